import BatonCore
@testable import BatonKit
import DBus
import Foundation
import Synchronization
import Testing
import TestSupport

/// BatonKit against the real batond on a private bus.
@Suite(.serialized)
struct KitTests {
    static let type = "com.raywenderlich.hawknotes.staterestore.characterDetail"
    static let app = "com.raywenderlich.hawknotes"

    struct Character: Codable, Equatable {
        var id: UUID
        var name: String
        var book: Int
    }

    /// TestSupport's world with the test type registered and a BatonKit client on its bus.
    struct World {
        let base: BatonWorld
        let client: BatonClient
        var bus: PrivateBus { base.bus }

        static func start() async throws -> World {
            let base = try await BatonWorld.started()
            do {
                let client = try BatonClient(.address(base.bus.address))
                let world = World(base: base, client: client)
                try await client.register(ActivityType(type: KitTests.type, appID: KitTests.app, title: "Character", requiredKeys: ["id"]))
                return world
            } catch {
                base.close()
                throw error
            }
        }

        func close() {
            client.close()
            base.close()
        }
    }

    @Test func typedPayloadsRoundTripThroughTheDaemon() async throws {
        let world = try await World.start()
        defer { world.close() }
        let agatha = Character(id: UUID(), name: "Agatha", book: 1)
        let scene = try await world.client.openScene(appID: Self.app, title: "Window")
        let activity = UserActivity(activityType: Self.type, client: world.client)
        activity.title = "Agatha"
        activity.targetContentIdentifier = agatha.id.uuidString
        activity.keywords = ["witch", "mentor"]
        activity.isEligibleForSearch = true
        try activity.setTypedPayload(agatha)
        try await activity.becomeCurrent(in: scene)
        let id = try #require(activity.id)
        #expect(try await scene.activityID() == id)

        let stored = try await world.client.activity(id: id)
        #expect(stored.payloadType == "Character" && stored.keywords.sorted() == ["mentor", "witch"])
        #expect(try UserActivity(stored, client: world.client).typedPayload(Character.self) == agatha)
        #expect(try await world.client.search("witch").map(\.id) == [id])
    }

    @Test func payloadErrorsSayWhatDidNotDecode() async throws {
        let world = try await World.start()
        defer { world.close() }
        let activity = UserActivity(activityType: Self.type, client: world.client)
        struct Partial: Encodable { var id = UUID(); var book = "one" }
        try activity.setTypedPayload(Partial())
        #expect(throws: PayloadError.missingKey("name", type: "Character")) { try activity.typedPayload(Character.self) }
        struct Named: Decodable { var id: UUID; var book: Int }
        #expect(throws: PayloadError.wrongType("book", expected: "Int", type: "Named")) { try activity.typedPayload(Named.self) }
        #expect(throws: PayloadError.notAnObject("Array<Int>")) { try activity.setTypedPayload([1, 2]) }
        // The type's required keys are the daemon's to enforce, with its named error.
        struct NoID: Encodable { var name = "Agatha" }
        try activity.setTypedPayload(NoID())
        await #expect(throws: BatonError.self) { try await activity.becomeCurrent() }
    }

    @Test func savingCallsWillSaveAndInvalidateRemoves() async throws {
        let world = try await World.start()
        defer { world.close() }
        let activity = UserActivity(activityType: Self.type, client: world.client)
        try activity.setTypedPayload(Character(id: UUID(), name: "Jamie", book: 1))
        try await activity.becomeCurrent()
        #expect(!activity.needsSave)
        let calls = Mutex(0)
        activity.willSave = { activity in
            calls.withLock { $0 += 1 }
            activity.title = "Jamie, saved"
        }
        activity.title = "Jamie"
        #expect(activity.needsSave)
        try await activity.save()
        let id = try #require(activity.id)
        #expect(try await world.client.activity(id: id).title == "Jamie, saved")
        #expect(calls.withLock { $0 } == 1)
        try await activity.invalidate()
        await #expect(throws: BatonError.notFound("no activity \(id)")) { try await world.client.activity(id: id) }
    }

    enum Tab: String, Codable { case goodHawk = "b1", brokenRaven = "b2" }
    enum Level: Int { case low = 1, high = 2 }
    struct Draft: Codable, Equatable { var text: String; var words: Int }

    @Test func sizeErrorsNameTheBiggestKeysAsData() async throws {
        let world = try await World.start()
        defer { world.close() }
        let activity = UserActivity(activityType: Self.type, client: world.client)
        struct Heavy: Encodable { var id = "agatha"; var portrait = String(repeating: "p", count: 66_000); var bio = "Witch" }
        try activity.setTypedPayload(Heavy())
        do {
            try await activity.becomeCurrent()
            Issue.record("an oversize payload was accepted")
        } catch let error as BatonError {
            #expect(error.code == .quotaExceeded)
            #expect(error.biggestKeys.map(\.key) == ["portrait", "bio", "id"] && error.biggestKeys.first?.bytes == 66_013)
        }

        // A scene's storage: the keys already stored count too.
        let storage = try await world.client.openScene(appID: Self.app).storage
        for index in 0..<17 { try await storage.set("page \(index)", String(repeating: "x", count: 60_000 + index)) }
        do {
            try await storage.set("cover", String(repeating: "c", count: 65_000))
            Issue.record("storage over the scene's limit was accepted")
        } catch let error as BatonError {
            #expect(error.message.hasPrefix("the scene's storage is 1 MiB"), "\(error.message)")
            #expect(error.biggestKeys.map(\.key) == ["cover", "page 16", "page 15"])
        }
        #expect(try await storage.string("cover") == nil)
    }

    @Test func sceneStorageHoldsWhatSceneStorageHolds() async throws {
        let world = try await World.start()
        defer { world.close() }
        let scene = try await world.client.openScene(appID: Self.app)
        let storage = scene.storage
        try await storage.set("flag", true)
        try await storage.set("count", 42)
        try await storage.set("ratio", 0.25)
        try await storage.set("name", "Agatha")
        try await storage.set("page", URL(string: "https://example.org/hawk")!)
        try await storage.set("blob", Data([0, 1, 255]))
        try await storage.set("tab", Tab.brokenRaven)  // Codable and RawRepresentable: stored by raw value
        try await storage.set("level", Level.high)
        try await storage.setCodable("draft", Draft(text: "notes", words: 1))
        #expect(try await storage.bool("flag") == true)
        #expect(try await storage.int("count") == 42)
        #expect(try await storage.double("ratio") == 0.25)
        #expect(try await storage.string("name") == "Agatha")
        #expect(try await storage.url("page") == URL(string: "https://example.org/hawk"))
        #expect(try await storage.data("blob") == Data([0, 1, 255]))
        #expect(try await storage.string("tab") == "b2")
        #expect(try await storage.value("tab", as: Tab.self) == .brokenRaven)
        #expect(try await storage.value("level", as: Level.self) == .high)
        #expect(try await storage.codable("draft", as: Draft.self) == Draft(text: "notes", words: 1))
        #expect(try await storage.string("absent") == nil)
        #expect(try await storage.int("name") == nil, "a value of another type reads as nil")

        // One draft per book tab: scoped keys never collide.
        let goodHawk = storage.scoped("BookView", id: "b1")
        let brokenRaven = storage.scoped("BookView", id: "b2")
        try await goodHawk.set("newNote", "about Agatha")
        try await brokenRaven.set("newNote", "about Sigrid")
        #expect(try await goodHawk.string("newNote") == "about Agatha")
        #expect(try await brokenRaven.string("newNote") == "about Sigrid")
        #expect(goodHawk.key("newNote") == "BookView[b1].newNote")
        try await goodHawk.remove("newNote")
        #expect(try await goodHawk.string("newNote") == nil)
        #expect(try await brokenRaven.string("newNote") == "about Sigrid")

        try await scene.close()
        await #expect(throws: (any Error).self) { try await storage.string("name") }
    }
}

extension KitTests {
    @Test func continuationHandlersFillTheNewScene() async throws {
        let world = try await World.start()
        defer { world.close() }
        let appClient = try BatonClient(.address(world.bus.address))
        defer { appClient.close() }
        let continuation = ActivityContinuation(client: appClient, appID: Self.app, busName: "org.baton.KitApp")
        continuation.onContinue(Self.type, title: "Character", requiredKeys: ["id"], payloadType: "Character") { continued in
            let character = try continued.typedPayload(Character.self)
            try await continued.storage.set("ContentView.CurrentTab", "b\(character.book)")
            try await continued.storage.scoped("BookView", id: "b\(character.book)")
                .set("SelectedCharacter", "b|b\(character.book)::c|\(character.id.uuidString.lowercased())")
        }
        try await continuation.start()
        #expect(try await world.client.activityTypes().first?.handler == "org.baton.KitApp")

        let agatha = Character(id: UUID(), name: "Agatha", book: 1)
        let activity = UserActivity(activityType: Self.type, client: world.client)
        try activity.setTypedPayload(agatha)
        try await activity.becomeCurrent()
        let scene = try await world.client.continueActivity(id: try #require(activity.id))
        #expect(try await scene.storage.string("ContentView.CurrentTab") == "b1")
        #expect(try await scene.storage.scoped("BookView", id: "b1").string("SelectedCharacter")
            == "b|b1::c|\(agatha.id.uuidString.lowercased())")
        #expect(try await scene.storage.scoped("BookView", id: "b2").string("SelectedCharacter") == nil)
        #expect(try await scene.activityID() == activity.id)

        // A payload the handler cannot decode: the daemon says why, and opens nothing.
        let before = try await world.client.scenes().count
        struct Broken: Encodable { var id = "not a uuid" }
        let broken = UserActivity(activityType: Self.type, client: world.client)
        try broken.setTypedPayload(Broken())
        try await broken.becomeCurrent()
        do {
            _ = try await world.client.continueActivity(id: try #require(broken.id))
            Issue.record("a payload that does not decode was continued")
        } catch let error as BatonError {
            #expect(error.code == .handlerFailed)
            #expect(error.message.contains("org.baton.Handoff1.Error.InvalidPayload"), "\(error.message)")
        }
        #expect(try await world.client.scenes().count == before)

        // While recording is paused the handler fills the scene all the same, which names no activity.
        try await world.client.pauseRecording()
        let sigrid = Character(id: UUID(), name: "Sigrid", book: 2)
        let unrecorded = UserActivity(activityType: Self.type, client: world.client)
        try unrecorded.setTypedPayload(sigrid)
        try await unrecorded.becomeCurrent()
        let pausedScene = try await world.client.continueActivity(id: try #require(unrecorded.id))
        #expect(try await pausedScene.storage.string("ContentView.CurrentTab") == "b2")
        #expect(try await pausedScene.activityID() == nil)
        try await world.client.resumeRecording()
    }
}

extension KitTests {
    @Test func storageChangesArriveAndRequiredKeysAreCheckedFirst() async throws {
        let world = try await World.start()
        defer { world.close() }
        let scene = try await world.client.openScene(appID: Self.app)
        let changes = try await scene.changes()
        var iterator = changes.makeAsyncIterator()
        // Another client (another window of the app) writes.
        let other = try BatonClient(.address(world.bus.address))
        defer { other.close() }
        try await other.scene(named: scene.path.text).storage.set("ContentView.CurrentTab", "b2")
        #expect(await iterator.next() == StorageChange(changed: ["ContentView.CurrentTab"], removed: []))
        try await other.scene(named: scene.id).storage.remove("ContentView.CurrentTab")
        #expect(await iterator.next() == StorageChange(changed: [], removed: ["ContentView.CurrentTab"]))

        let activity = UserActivity(activityType: Self.type, client: world.client)
        activity.requiredUserInfoKeys = ["id", "name"]
        struct OnlyID: Encodable { var id = UUID() }
        try activity.setTypedPayload(OnlyID())
        await #expect(throws: PayloadError.missingKey("name", type: "OnlyID")) { try await activity.becomeCurrent() }
        #expect(activity.id == nil, "nothing was advertised")
        #expect(throws: BatonError.self) { try world.client.scene(named: "/org/baton/Handoff1/other") }
    }
}

extension KitTests {
    @Test func everyUserActivityFieldReachesTheDaemon() async throws {
        let world = try await World.start()
        defer { world.close() }
        let activity = UserActivity(activityType: Self.type, client: world.client)
        activity.title = "Jamie"
        activity.persistentIdentifier = "jamie-notes"
        activity.webpageURL = URL(string: "https://example.org/jamie")
        activity.expirationDate = Date().addingTimeInterval(3600)
        activity.isEligibleForHandoff = false
        activity.isEligibleForSearch = true
        try activity.setTypedPayload(Character(id: UUID(), name: "Jamie", book: 1))
        try await activity.becomeCurrent()
        #expect(activity.isCurrent)
        let stored = try await world.client.activity(id: try #require(activity.id))
        #expect(stored.persistentID == "jamie-notes")
        #expect(stored.webpageURL == "https://example.org/jamie")
        let expiresIn = Double(try #require(stored.expiresAt)) / 1_000_000 - Date().timeIntervalSince1970
        #expect(expiresIn > 3500 && expiresIn <= 3601)
        #expect(!stored.eligibleForHandoff && stored.eligibleForSearch)
        try await activity.resignCurrent()
        #expect(!activity.isCurrent)
        // deleteSavedUserActivities(withPersistentIdentifiers:)
        #expect(try await world.client.deleteSaved(persistentIDs: ["jamie-notes"]) == 1)
        await #expect(throws: BatonError.self) { try await world.client.activity(id: try #require(activity.id)) }
    }
}

extension KitTests {
    /// BatonKit's writes carry a `request_id`, so its own retries of them are safe.
    @Test func writesCarryARequestID() async throws {
        let world = try await World.start()
        defer { world.close() }
        let monitor = try await BusMonitor(bus: world.bus, rules: ["type='method_call',destination='org.baton.Handoff1'"])
        let id = try await world.client.advertise(type: Self.type, title: "Agatha", payload: #"{"id":"a"}"#)
        try await world.client.update(id: id, payload: #"{"n":1}"#)
        _ = try await world.client.openScene(appID: Self.app)
        _ = try await world.client.continueActivity(id: id)
        try await eventually("dbus-monitor printed the four calls") { monitor.text.components(separatedBy: "method call").count > 4 }
        for member in ["Advertise", "Update", "OpenScene", "Continue"] {
            let call = try #require(monitor.text.components(separatedBy: "method call").first { $0.contains("member=\(member)") })
            #expect(call.contains(#"string "request_id""#), "\(member): \(call)")
        }
        monitor.stop()
    }
}

extension KitTests {
    struct Hero: Codable, Equatable {
        var id: String
        var name: String
        var nickname: String?
    }

    @Test func aKeyDroppedFromTheTypedPayloadIsDroppedByTheDaemon() async throws {
        let world = try await World.start()
        defer { world.close() }
        let activity = UserActivity(activityType: Self.type, client: world.client)
        activity.title = "Agatha"
        try activity.setTypedPayload(Hero(id: "a1", name: "Agatha", nickname: "Aggie"))
        try await activity.becomeCurrent()
        let id = try #require(activity.id)
        #expect(try UserActivity(try await world.client.activity(id: id), client: world.client).typedPayload(Hero.self).nickname == "Aggie")

        try activity.setTypedPayload(Hero(id: "a1", name: "Agatha", nickname: nil))
        try await activity.save()
        let stored = try await world.client.activity(id: id)
        #expect(!stored.payload.contains("nickname") && !stored.payload.contains("Aggie"), "\(stored.payload)")
        #expect(try UserActivity(stored, client: world.client).typedPayload(Hero.self) == Hero(id: "a1", name: "Agatha", nickname: nil))
    }

    @Test func becomingCurrentAndResigningReachTheDaemon() async throws {
        let world = try await World.start()
        defer { world.close() }
        let first = try await world.client.openScene(appID: Self.app, title: "Window 1")
        let second = try await world.client.openScene(appID: Self.app, title: "Window 2")
        let activity = UserActivity(activityType: Self.type, client: world.client)
        activity.title = "Agatha"
        try activity.setTypedPayload(Hero(id: "a1", name: "Agatha"))
        try await activity.becomeCurrent(in: first)
        let id = try #require(activity.id)
        #expect(try await first.activityID() == id)
        #expect(try await second.activityID() == nil)

        try await activity.becomeCurrent(in: second)
        #expect(try await first.activityID() == nil, "one scene shows it at a time")
        #expect(try await second.activityID() == id)
        #expect(try await world.client.activity(id: id).sceneID == second.id)

        try await activity.resignCurrent()
        #expect(!activity.isCurrent)
        #expect(try await first.activityID() == nil)
        #expect(try await second.activityID() == nil)
        #expect(try await world.client.activity(id: id).sceneID == nil)
        #expect(try await world.client.activity(id: id).title == "Agatha", "still advertised")
    }
}

extension KitTests {
    /// Apple's `userActivityWasContinued`: the app that advertised hears where its activity went.
    @Test func theAdvertisingAppHearsItsActivityWasContinued() async throws {
        let world = try await World.start()
        defer { world.close() }
        let appClient = try BatonClient(.address(world.bus.address))
        defer { appClient.close() }
        let continuation = ActivityContinuation(client: appClient, appID: Self.app, busName: "org.baton.KitApp")
        continuation.onContinue(Self.type, title: "Character", requiredKeys: ["id"]) { _ in }
        try await continuation.start()

        let heard = Mutex<[(String, String)]>([])
        let activity = UserActivity(activityType: Self.type, client: appClient)
        activity.title = "Agatha"
        activity.onContinued = { scene, device in heard.withLock { $0.append((scene.path.text, device)) } }
        try activity.setTypedPayload(Character(id: UUID(), name: "Agatha", book: 1))
        try await activity.becomeCurrent()
        // Another program continues it.
        let scene = try await world.client.continueActivity(id: try #require(activity.id))
        try await eventually("the app heard it") { heard.withLock { $0.count } == 1 }
        #expect(heard.withLock { $0.first?.0 } == scene.path.text)
        #expect(heard.withLock { $0.first?.1 } == "", "continued on this machine")

        // An activity without onContinued hears nothing; nothing fails. Another activity that
        // listens hears its own continuation after that one: by then the first would have heard.
        activity.onContinued = nil
        _ = try await world.client.continueActivity(id: try #require(activity.id), newScene: true)
        try await activity.invalidate()
        let later = UserActivity(activityType: Self.type, client: appClient)
        later.onContinued = { scene, _ in heard.withLock { $0.append((scene.path.text, "later")) } }
        try later.setTypedPayload(Character(id: UUID(), name: "Jamie", book: 2))
        try await later.becomeCurrent()
        _ = try await world.client.continueActivity(id: try #require(later.id))
        try await eventually("the later activity heard it") { heard.withLock { $0.count } == 2 }
        #expect(heard.withLock { $0.map(\.1) } == ["", "later"])
    }
}

extension KitTests {
    @Test func theUsersDataAndControlsThroughBatonKit() async throws {
        let world = try await World.start()
        defer { world.close() }
        let activity = UserActivity(activityType: Self.type, client: world.client)
        activity.title = "Agatha"
        activity.keywords = ["witch"]
        activity.isEligibleForSearch = true
        try activity.setTypedPayload(Character(id: UUID(), name: "Agatha", book: 1))
        try await activity.becomeCurrent()
        let id = try #require(activity.id)
        try await activity.invalidate()
        let past = try await world.client.history(filter: ["query": "witch"])
        #expect(past.map(\.activity.id) == [id] && past.first?.endState == "invalidated")
        #expect(try await world.client.continueActivity(id: id).path.text.hasPrefix("/org/baton/Handoff1/scene/"))

        let document = try await world.client.exportData()
        #expect(try await world.client.importData(document)["unchanged"] ?? 0 > 0)
        #expect(try await world.client.clearHistory() == 1)

        try await world.client.pauseRecording()
        #expect(try await world.client.pause().paused)
        try await world.client.resumeRecording()
        try await world.client.block(appID: Self.app)
        let blocked = UserActivity(activityType: Self.type, client: world.client)
        try blocked.setTypedPayload(Character(id: UUID(), name: "Jamie", book: 1))
        await #expect(throws: BatonError.self) { try await blocked.becomeCurrent() }
        try await world.client.unblock(appID: Self.app)
        #expect(try await world.client.forget(appID: Self.app)["types"] == 1)
    }
}
