import BatonCore
import BatonKit
import DBus
import Foundation
import Glibc
@testable import HawkNotes
import Testing
import TestSupport

/// The state-restoration tutorial, played end to end with the real batond and the
/// real hawk-notes on a private bus.
@Suite(.serialized)
struct TutorialTests {
    final class HawkNotesProcess: Sendable {
        let process: Subprocess
        init(bus: PrivateBus) async throws {
            process = try Subprocess(try Executables.built("hawk-notes"), ["serve"], environment: bus.environment)
            let watcher = try bus.connect()
            defer { watcher.close() }
            try await watcher.waitForName(HawkNotesApp.busName, timeout: .seconds(15))
        }
        func stop() async { process.kill(); await process.wait() }
    }

    func show(_ scene: SceneHandle, on bus: PrivateBus) async throws -> String {
        let result = try await Executables.run(try Executables.built("hawk-notes"), ["show", scene.path.text], environment: bus.environment)
        #expect(result.status == 0, "\(result)")
        return result.stdout
    }

    @Test func selectRestartRestoreAndContinue() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let bus = world.bus
        var app = try await HawkNotesProcess(bus: bus)
        defer { app.process.kill(SIGKILL) }
        var client = try BatonClient(.address(bus.address))

        // A window: Agatha opened in the first tab with a note on her, then the third tab
        // selected with a book draft and the shop page showing.
        let window = try await client.openScene(appID: HawkNotesApp.appID, title: "Window 1")
        let notes = HawkNotesScene(scene: window, client: client)
        try await notes.select(Catalog.goodHawk)
        let agatha = try await notes.open(Catalog.agatha, in: Catalog.goodHawk)
        try await notes.writeDraft("Agatha knows more than she says", on: Catalog.agatha)
        try await notes.select(Catalog.burningSwift)
        try await notes.writeDraft("Who can Lady Beatrice trust?", in: Catalog.burningSwift)
        try await notes.showShop(true, in: Catalog.burningSwift)
        let before = try await window.storage.all()
        #expect(before.count >= 4, "the draft, the selection and the shop are stored")

        // Cold launch: both processes stop and start again.
        client.close()
        await app.stop()
        #expect(await world.stopDaemon() == 0)
        try await world.startDaemon()
        app = try await HawkNotesProcess(bus: bus)
        client = try BatonClient(.address(bus.address))
        let restored = try client.scene(named: window.path.text)
        #expect(try await restored.isRestored())
        #expect(try await restored.storage.all() == before)
        #expect(try await restored.activityID() == agatha.id)

        let shown = try await show(restored, on: bus)
        #expect(shown.contains("(restored)"))
        #expect(shown.contains("[ The Burning Swift ]"))
        #expect(shown.contains("Book draft: “Who can Lady Beatrice trust?”"))
        #expect(shown.contains("Shop page: open"))
        #expect(!shown.contains("› Agatha"), "Agatha shows only in her own book's tab:\n\(shown)")
        // Her tab still has her; the other tabs never had her.
        let tabs = restored.storage
        #expect(try await tabs.scoped("BookView", id: Catalog.goodHawk.id.uuidString.lowercased()).string("SelectedCharacter")
            == CharacterPath(book: Catalog.goodHawk, character: Catalog.agatha).description)
        for book in [Catalog.brokenRaven, Catalog.burningSwift] {
            #expect(try await tabs.scoped("BookView", id: book.id.uuidString.lowercased()).string("SelectedCharacter") == nil)
        }

        // Continue her activity: the window that shows her already takes it, back on her
        // book's tab, with its drafts and shop page kept; no second window opens.
        let again = try await client.continueActivity(id: try #require(agatha.id))
        #expect(again == restored)
        #expect(try await client.scenes(appID: HawkNotesApp.appID).count == 1)
        let shownAgain = try await show(again, on: bus)
        #expect(shownAgain.contains("[ The Good Hawk ]") && shownAgain.contains("The Good Hawk › Agatha"), "\(shownAgain)")
        let kept = try await restored.storage.all()
        for (key, value) in before where key != HawkNotesApp.Key.currentTab {
            #expect(kept[key] == value, "\(key) kept")
        }

        // A new window on purpose: on The Good Hawk showing Agatha, without the first one's drafts.
        let continued = try await client.continueActivity(id: try #require(agatha.id), newScene: true)
        #expect(continued != restored)
        let newWindow = try await show(continued, on: bus)
        #expect(newWindow.contains("[ The Good Hawk ]"))
        #expect(newWindow.contains("The Good Hawk › Agatha"))
        #expect(newWindow.contains("Draft note: —"), "drafts belong to the first window:\n\(newWindow)")
        // Continuing her again goes to the window that showed her last.
        #expect(try await client.continueActivity(id: try #require(agatha.id)) == continued)
        #expect(try await client.scenes(appID: HawkNotesApp.appID).count == 2)

        // Hawk Notes not running and not activatable: the continuation waits in its window,
        // and reaches Hawk Notes when it starts.
        await app.stop()
        do {
            _ = try await client.continueActivity(id: try #require(agatha.id), newScene: true)
            Issue.record("continued with Hawk Notes away")
        } catch let error as BatonError {
            #expect(error.code == .handlerFailed && error.message.contains("waits in scene"), "\(error)")
        }
        let waiting = try #require(try await client.scenes(appID: HawkNotesApp.appID).last)
        #expect(try await waiting.state() == .pending)
        app = try await HawkNotesProcess(bus: bus)
        try await eventually("the waiting window reached Hawk Notes") { try await waiting.state() == .ready }
        #expect(try await show(waiting, on: bus).contains("The Good Hawk › Agatha"))
        await app.stop()

        // Hawk Notes not running: the bus starts it from its service file to continue.
        let hawkNotes = try Executables.built("hawk-notes")
        try bus.installService(name: HawkNotesApp.busName, exec: "\(hawkNotes) serve")
        let watcher = try bus.connect()
        defer { watcher.close() }
        #expect(try await watcher.nameOwner(HawkNotesApp.busName) == nil)
        let activated = try await client.continueActivity(id: try #require(agatha.id))
        #expect(try await show(activated, on: bus).contains("The Good Hawk › Agatha"))
        #expect(try await watcher.nameOwner(HawkNotesApp.busName) != nil)

        // A shell user's minimal payload continues just as well.
        let minimal = try await client.advertise(type: HawkNotesApp.characterDetail, title: "Sigrid",
                                                 payload: #"{"id": "\#(Catalog.sigrid.id.uuidString.lowercased())", "name": "Sigrid"}"#)
        let sigrid = try await show(try await client.continueActivity(id: minimal), on: bus)
        #expect(sigrid.contains("[ The Broken Raven ]") && sigrid.contains("The Broken Raven › Sigrid"), "\(sigrid)")

        // The activated app is the bus's child; stop it with everything else.
        if let owner = try await watcher.nameOwner(HawkNotesApp.busName),
           let pid = try await watcher.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                            "GetConnectionUnixProcessID", [.string(owner)]).first?.uint32Value, pid > 0 {
            kill(pid_t(pid), SIGTERM)
        }
        client.close()
    }

    /// Installed as `scripts/install` installs it (its declared types and its activation file),
    /// Hawk Notes never having run: an activity of its type can be advertised, and continuing
    /// it starts Hawk Notes through the bus, which opens Agatha's tab.
    @Test func installedHawkNotesIsContinuedBeforeItEverRan() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try Self.installDeclaration(on: world.bus)
        try world.bus.installService(name: HawkNotesApp.busName, exec: "\(try Executables.built("hawk-notes")) serve")
        try await world.startDaemon()
        let client = try BatonClient(.address(world.bus.address))
        defer { client.close() }

        let agatha = try await client.advertise(
            type: HawkNotesApp.characterDetail, title: "Agatha", payload: #"{"id": "\#(Catalog.agatha.id.uuidString.lowercased())"}"#)
        let scene = try await client.continueActivity(id: agatha)
        #expect(try await scene.storage.string(HawkNotesApp.Key.currentTab) == Catalog.goodHawk.id.uuidString.lowercased())
    }

    /// The declaration says what Hawk Notes registers when it runs, to the last option.
    @Test func theDeclarationIsWhatHawkNotesRegisters() async throws {
        let declaredWorld = try BatonWorld()
        defer { declaredWorld.close() }
        try Self.installDeclaration(on: declaredWorld.bus)
        try await declaredWorld.startDaemon()
        let declared = try #require(try await Self.characterDetail(on: declaredWorld.bus))

        let world = try await BatonWorld.started()
        defer { world.close() }
        let app = try await HawkNotesProcess(bus: world.bus)
        defer { app.process.kill(SIGKILL) }
        try await eventually("hawk-notes registered its type") { try await Self.characterDetail(on: world.bus) != nil }
        #expect(try await Self.characterDetail(on: world.bus) == declared)
    }

    static func installDeclaration(on bus: PrivateBus) throws {
        let types = URL(fileURLWithPath: bus.dataHome).appendingPathComponent("baton/types")
        try FileManager.default.createDirectory(at: types, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: Repository.root.appendingPathComponent("share/baton/types/com.raywenderlich.hawknotes.json"),
                                         to: types.appendingPathComponent("com.raywenderlich.hawknotes.json"))
    }

    static func characterDetail(on bus: PrivateBus) async throws -> ActivityType? {
        let client = try BatonClient(.address(bus.address))
        defer { client.close() }
        return try await client.activityTypes().first { $0.type == HawkNotesApp.characterDetail }
    }

    @Test func libraryListsTheBooksOverTheBus() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let bus = world.bus
        let app = try await HawkNotesProcess(bus: bus)
        defer { app.process.kill(SIGKILL) }
        let gdbus = try await Executables.run(try Executables.require("gdbus", package: "libglib2.0-bin"), [
            "call", "--session", "--dest", HawkNotesApp.busName, "--object-path", HawkNotesApp.path.text,
            "--method", "com.raywenderlich.hawknotes.Library.ListBooks",
        ], environment: bus.environment)
        #expect(gdbus.status == 0, "\(gdbus)")
        #expect(gdbus.stdout.contains("'title': <'The Good Hawk'>") && gdbus.stdout.contains("'name': <'Lady Beatrice'>"))
        let unknown = try await Executables.run(try Executables.built("hawk-notes"), ["show", "not-a-scene"], environment: bus.environment)
        #expect(unknown.status != 0 && unknown.stderr.contains("is not an id"), "\(unknown)")
    }
}
