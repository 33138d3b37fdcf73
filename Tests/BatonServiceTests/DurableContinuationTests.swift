import BatonCore
import DBus
import Foundation
import Glibc
import Synchronization
import Testing
import TestSupport

/// Continuations an app cannot take now wait, pending, and reach it once it appears:
/// across its crashes and batond's, exactly once from the app's side.
@Suite(.serialized)
struct DurableContinuationTests {
    static let activities = "org.baton.Handoff1.Activities"
    static let scene = "org.baton.Handoff1.Scene"
    static let appName = "org.baton.DurableApp"

    /// A handler app on its own connection: counts the calls per scene, reads the scene it
    /// is given while it is asked (it must exist on the bus), and holds while `held` is set.
    final class App: @unchecked Sendable {
        let connection: Connection
        let calls = Mutex<[String]>([])
        let statesSeen = Mutex<[String]>([])
        let held = Atomic(false)

        init(_ world: BatonWorld, holding: Bool = false) async throws {
            connection = try world.bus.connect()
            held.store(holding, ordering: .relaxed)
            let connection = self.connection
            try await connection.export("/", [Interface("org.baton.Handoff1.Handler", methods: [
                Method("ContinueActivity", in: [Argument("scene", "o"), Argument("activity", "a{sv}")],
                       out: [Argument("storage", "a{sv}")], ordering: .concurrent) { [self] call in
                    let scene = try call.argument(0, as: ObjectPath.self)
                    calls.withLock { $0.append(scene.text) }
                    let state = try await connection.call("org.baton.Handoff1", scene, "org.freedesktop.DBus.Properties", "Get",
                                                          [.string(DurableContinuationTests.scene), .string("State")])
                    statesSeen.withLock { $0.append(state.first?.unwrapped.stringValue ?? "?") }
                    while held.load(ordering: .relaxed) { try await Task.sleep(for: .milliseconds(5)) }
                    let activity: [String: DBusValue] = try call.argument(1)
                    return [.record(["delivered": .string(activity["title"]?.unwrapped.stringValue ?? "?")])]
                },
            ])])
            try await connection.requestName(DurableContinuationTests.appName)
        }

        func close() { connection.close() }
    }

    func state(of scene: ObjectPath, _ world: BatonWorld) async throws -> String? {
        try await world.call("org.freedesktop.DBus.Properties", "Get", [.string(Self.scene), .string("State")], path: scene)
            .first?.unwrapped.stringValue
    }

    func delivered(_ scene: ObjectPath, _ world: BatonWorld) async throws -> String? {
        try await world.call(Self.scene, "GetAll", path: scene).first?.stringKeyedValue?["delivered"]?.unwrapped.stringValue
    }

    /// The app comes (again): the continuation waiting in `scene` reaches it, once, with the
    /// activity titled `title`. Returns the app, for the caller to close.
    func appComesAndTakes(_ scene: ObjectPath, _ title: String, _ world: BatonWorld) async throws -> App {
        let app = try await App(world)
        try await eventually("delivered when the app came") { try await state(of: scene, world) == "ready" }
        #expect(app.calls.withLock { $0 } == [scene.text])
        #expect(try await delivered(scene, world) == title)
        return app
    }

    /// How the last continuation of `id` went, as Explain says (`last_continuation`).
    func lastContinuation(_ id: String, _ world: BatonWorld) async throws -> [String: DBusValue]? {
        try await world.call(Self.activities, "Explain", [.string(id)]).first?.stringKeyedValue?["last_continuation"]?.unwrapped.stringKeyedValue
    }

    /// Continue, which must fail because the app cannot take it now; returns the waiting scene.
    func continueWhileAway(_ id: String, _ world: BatonWorld) async throws -> ObjectPath {
        do {
            _ = try await world.call(Self.activities, "Continue", [.string(id), .stringMap([:])])
        } catch let error as DBusError {
            #expect(error.name == "org.baton.Handoff1.Error.HandlerFailed", "\(error)")
            let marker = "waits in scene "
            let path = try #require(error.message.range(of: marker).map { error.message[$0.upperBound...] }?.split(separator: " ").first)
            return try ObjectPath(validating: String(path))
        }
        throw TestSupportError("Continue reached an app that is not there")
    }

    @Test func aContinuationWaitsForItsAppAndArrivesOnce() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        world.extraArguments = ["--handler-timeout", "2"]
        try await world.startDaemon()
        try await world.register(handler: Self.appName)
        let continued = try await SignalLog(world.client, MatchRule(interface: Self.activities, member: "Continued"))

        // Not running, not activatable: the scene waits, pending, on the bus.
        let id = try await world.advertise("Agatha")
        let scene = try await continueWhileAway(id, world)
        #expect(try await state(of: scene, world) == "pending")
        #expect(try await delivered(scene, world) == nil)
        #expect(continued.all.isEmpty)

        // The app appears: the continuation arrives, once, into a scene that already existed.
        let app = try await App(world)
        defer { app.close() }
        try await continued.wait(for: "Continued") { $0.body.first == .string(id) }
        #expect(try await state(of: scene, world) == "ready")
        #expect(try await delivered(scene, world) == "Agatha")
        #expect(app.calls.withLock { $0 } == [scene.text])
        #expect(app.statesSeen.withLock { $0 } == ["pending"], "the handler could read its scene")
        #expect(continued.all.first?.body == [.string(id), .objectPath(scene), .boolean(true)])
        // Nothing is delivered twice: the app leaving and coming back gets only what waits now
        // (delivered in the same pass that would have redelivered the first).
        app.close()
        try await eventually("the app's name is free") { try await world.client.nameOwner(Self.appName) == nil }
        let second = try await continueWhileAway(try await world.advertise("Sigrid"), world)
        let again = try await App(world)
        defer { again.close() }
        try await eventually("the waiting one arrived") { try await state(of: second, world) == "ready" }
        #expect(again.calls.withLock { $0 } == [second.text])
        // Continued is emitted after the scene turns ready: awaited, then counted.
        try await continued.wait(for: "the second Continued", after: 1) { $0.body.dropFirst().first == .objectPath(second) }
        #expect(continued.all.count == 2)
    }

    @Test func withoutWaitingTheSceneComesBackAtOnce() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let app = try await App(world, holding: true)
        defer { app.close() }
        try await world.register(handler: Self.appName)
        let id = try await world.advertise("Jamie")
        let scene = try #require(try await world.call(Self.activities, "Continue", [.string(id), .stringMap(["wait": "false"])])
            .first?.objectPathValue)
        try await eventually("the handler was asked") { app.calls.withLock { $0 } == [scene.text] }
        #expect(try await state(of: scene, world) == "pending")
        app.held.store(false, ordering: .relaxed)
        try await eventually("the scene is ready") { try await state(of: scene, world) == "ready" }
        #expect(try await delivered(scene, world) == "Jamie")
        #expect(await errorName { try await world.call(Self.activities, "Continue", [.string(id), .stringMap(["wait": "soon"])]) }
            == "org.baton.Handoff1.Error.InvalidArgument")
    }

    @Test func anAppThatDiesMidCallGetsItAgain() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        world.extraArguments = ["--handler-timeout", "20"]
        try await world.startDaemon()
        try await world.register(handler: Self.appName)
        let crashing = try await App(world, holding: true)
        let id = try await world.advertise("Sigrid")
        let pending = Task { try await continueWhileAway(id, world) }
        try await eventually("the handler was asked") { crashing.calls.withLock { $0 }.count == 1 }
        crashing.close()      // gone mid-call, as a crash is
        let scene = try await pending.value
        #expect(try await state(of: scene, world) == "pending")

        try await eventually("the app's name is free") { try await world.client.nameOwner(Self.appName) == nil }
        let restarted = try await appComesAndTakes(scene, "Sigrid", world)
        restarted.close()
    }

    @Test func aWaitingContinuationSurvivesKill9OfBatond() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        try await world.register(handler: Self.appName)
        let first = try await continueWhileAway(try await world.advertise("first"), world)
        let second = try await continueWhileAway(try await world.advertise("second"), world)
        await world.stopDaemon(SIGKILL)

        // The app is there when batond comes back: delivered at start.
        let app = try await App(world)
        defer { app.close() }
        try await world.startDaemon()
        try await eventually("both delivered after the restart") {
            let states = [try await state(of: first, world), try await state(of: second, world)]
            return states == ["ready", "ready"]
        }
        #expect(Set(app.calls.withLock { $0 }) == [first.text, second.text] && app.calls.withLock { $0 }.count == 2)

        // And one that waits across a restart for an app that comes later.
        app.close()
        try await eventually("the app is gone") { try await world.client.nameOwner(Self.appName) == nil }
        let third = try await continueWhileAway(try await world.advertise("third"), world)
        await world.stopDaemon(SIGKILL)
        try await world.startDaemon()
        #expect(try await state(of: third, world) == "pending")
        let later = try await App(world)
        defer { later.close() }
        try await eventually("delivered when the app came") { try await state(of: third, world) == "ready" }
        #expect(later.calls.withLock { $0 } == [third.text])
    }

    /// `wait=false` for an app that has never been on the bus, batond killed before the app
    /// comes: the batond that starts next delivers it when the app takes its name.
    @Test func aContinuationNotAwaitedSurvivesKill9BeforeItsAppEverRan() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        try await world.register(handler: Self.appName)
        let id = try await world.advertise("never ran")
        let scene = try #require(try await world.call(Self.activities, "Continue", [.string(id), .stringMap(["wait": "false"])])
            .first?.objectPathValue)
        #expect(try await state(of: scene, world) == "pending")
        await world.stopDaemon(SIGKILL)
        try await world.startDaemon()
        #expect(try await state(of: scene, world) == "pending")
        let app = try await appComesAndTakes(scene, "never ran", world)
        app.close()
    }

    /// SIGTERM while a continuation not awaited is with an app that holds it: the delivery is
    /// cancelled before the connection closes, so the stop is not noted as the app's failure,
    /// and the continuation waits, pending, for the next batond, which delivers it.
    @Test func aStopDuringABackgroundDeliveryLeavesItPendingForTheNextStart() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        world.extraArguments = ["--handler-timeout", "30"]
        try await world.startDaemon()
        try await world.register(handler: Self.appName)
        let holding = try await App(world, holding: true)
        let id = try await world.advertise("held")
        let scene = try #require(try await world.call(Self.activities, "Continue", [.string(id), .stringMap(["wait": "false"])])
            .first?.objectPathValue)
        try await eventually("the handler was asked") { holding.calls.withLock { $0 } == [scene.text] }

        let clock = ContinuousClock()
        let stopping = clock.now
        #expect(await world.stopDaemon() == 0)
        #expect(clock.now - stopping < .seconds(10), "the stop waited for the handler (\(clock.now - stopping))")
        #expect(!world.daemonLog.contains("closed"), "\(world.daemonLog)")
        #expect(!world.daemonLog.contains("failed"), "\(world.daemonLog)")
        holding.close()
        try await eventually("the app's name is free") { try await world.client.nameOwner(Self.appName) == nil }

        try await world.startDaemon()
        #expect(try await state(of: scene, world) == "pending")
        // No attempt noted: the handler call was cut by the stop, not failed by the app.
        let waiting = try await lastContinuation(id, world)
        #expect(waiting?["error"] == nil, "\(String(describing: waiting))")
        let app = try await appComesAndTakes(scene, "held", world)
        app.close()
    }

    /// A continuation its app never takes fails once a day has passed, and not a microsecond before.
    // On a clock the test holds: a move that never returned would hang it; the limit fails it.
    @Test(.timeLimit(.minutes(1))) func aContinuationNotTakenWithinADayFails() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        let clock = ManualClock()
        let batond = try await InProcessBatond(on: world, clock: clock)
        try await world.register(handler: Self.appName)
        let id = try await world.advertise("never taken", options: ["expires_in": "\(3 * 86_400)"])
        let scene = try await continueWhileAway(id, world)
        // batond's clock, held by the test, stands still but for its moves: a day to the microsecond.
        await clock.advance(by: .seconds(86_400))
        #expect(try await state(of: scene, world) == "pending", "failed before its day was over")
        // The move returns once housekeeping has run at the new time.
        await clock.advance(by: .microseconds(1))
        #expect(try await state(of: scene, world) == "failed", "not failed after a day")
        let last = try await lastContinuation(id, world)
        #expect(last?["state"]?.unwrapped.stringValue == "failed", "\(String(describing: last))")
        try await batond.stop()
    }

    @Test func aRefusalOrAGoneActivityLeavesNoWaitingScene() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        try await world.register(handler: Self.appName)
        // Invalidated while it waits: when the app comes, the scene opened for it goes.
        let id = try await world.advertise("gone")
        let scene = try await continueWhileAway(id, world)
        _ = try await world.call(Self.activities, "Invalidate", [.string(id)])
        let app = try await App(world)
        defer { app.close() }
        // The scene leaves the database, then the bus: the second a moment after the first.
        try await eventually("the waiting scene is closed, and its object gone") {
            let listed = try await world.call("org.baton.Handoff1.Scenes", "ListScenes", [.string("")]).first?.arrayValue ?? [.string("?")]
            let object = await errorName { try await state(of: scene, world) as Any }
            return listed.isEmpty && object == DBusError.Name.unknownObject
        }
        #expect(app.calls.withLock { $0 }.isEmpty, "nothing to continue, so the app was not asked")
    }

    @Test func anAppTooSlowOnceGetsItAgainAtRestoreScenes() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        world.extraArguments = ["--handler-timeout", "0.5"]
        try await world.startDaemon()
        try await world.register(handler: Self.appName)
        let slow = try await App(world, holding: true)
        defer { slow.close() }
        let scene = try await continueWhileAway(try await world.advertise("slow"), world)
        #expect(try await state(of: scene, world) == "pending")
        // The app is still there (no name appears), catches up, and restores its scenes.
        slow.held.store(false, ordering: .relaxed)
        _ = try await slow.connection.call("org.baton.Handoff1", "/org/baton/Handoff1", "org.baton.Handoff1.Scenes", "RestoreScenes",
                                           [.string(BatonWorld.app)])
        try await eventually("delivered after RestoreScenes") { try await state(of: scene, world) == "ready" }
        #expect(slow.calls.withLock { $0 } == [scene.text, scene.text], "asked again, with the same scene, after its answer was lost")
        #expect(try await delivered(scene, world) == "slow")
    }

    /// An app that continues and takes its handler's name a few milliseconds later (an app that
    /// starts itself and continues, a launcher), its own process, against a batond just started
    /// as bus activation starts it: the name often appears while the first delivery is still in
    /// flight, and the continuation must reach the app all the same, once.
    @Test func anAppTakingItsNameWhileTheFirstDeliveryIsInFlightGetsIt() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        let python = try Executables.require("/usr/bin/python3", package: "python3-dbus python3-gi")
        let app = Repository.root.appendingPathComponent("Tests/Scripts/handler-app.py").path
        let name = "org.baton.LateApp"
        try await world.startDaemon()
        try await world.register(handler: name)
        for round in 0..<10 {
            await world.stopDaemon()
            try await world.startDaemon()
            let id = try await world.advertise("round \(round)")
            // 0–4 ms: before, during and after the first attempt's call and its write.
            let result = try await world.run(python, [app, name, "--continue", id, "--delay-ms", String(round % 5)])
            let lines = result.stdout.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
            let scene = lines.first { $0.first == "scene" }?.last
            #expect(result.status == 0, "round \(round): never delivered: \(result)\n\(world.daemonLog.suffix(2000))")
            #expect(lines.filter { $0.first == "delivered" }.map(\.last) == [scene], "round \(round): \(result.stdout)")
            let path = try ObjectPath(validating: try #require(scene))
            try await eventually("round \(round): ready") { try await state(of: path, world) == "ready" }
        }
    }

    /// The promises of the tests above with the app as a process of its own, on its own
    /// schedule: it crashes mid-call (exits without answering), batond is killed, and the app
    /// starts again a second after batond came back: the continuation reaches it, once.
    @Test func anAppOfItsOwnThatCrashesMidCallGetsItAfterBatondRestarts() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        world.extraArguments = ["--handler-timeout", "20"]
        let python = try Executables.require("/usr/bin/python3", package: "python3-dbus python3-gi")
        let app = Repository.root.appendingPathComponent("Tests/Scripts/handler-app.py").path
        let name = "org.baton.ProcessApp"
        try await world.startDaemon()
        try await world.register(handler: name)
        let id = try await world.advertise("Lady Beatrice")

        let crashing = try Subprocess(python, [app, name, "--die-on-call"], environment: world.bus.environment)
        defer { crashing.kill(SIGKILL) }
        try await world.client.waitForName(name, timeout: .seconds(15))
        let scene = try await continueWhileAway(id, world)
        #expect(try await state(of: scene, world) == "pending")
        try await eventually("the app's name is free") { try await world.client.nameOwner(name) == nil }

        await world.stopDaemon(SIGKILL)
        try await world.startDaemon()
        #expect(try await state(of: scene, world) == "pending")
        let again = try await world.run(python, [app, name, "--delay-ms", "1000"])
        #expect(again.status == 0, "\(again)")
        #expect(again.stdout == "delivered \(scene.text)\n", "once, into the scene that waited: \(again.stdout)")
        try await eventually("ready") { try await state(of: scene, world) == "ready" }
        #expect(try await delivered(scene, world) == "Lady Beatrice")
    }

    /// A Continue that finds its scene's continuation already being delivered (its app just
    /// appeared) waits for that delivery instead of failing.
    @Test func aContinueMeetingARedeliveryWaitsForIt() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        try await world.register(handler: Self.appName)
        for round in 0..<15 {
            let id = try await world.advertise("round \(round)", options: ["target_content_id": "c\(round)"])
            let scene = try await continueWhileAway(id, world)
            // The app appears (batond redelivers) while the same content is continued again.
            let app = try await App(world)
            let again = try await world.call(Self.activities, "Continue", [.string(id), .stringMap([:])]).first?.objectPathValue
            #expect(again == scene, "round \(round)")
            try await eventually("ready") { try await state(of: scene, world) == "ready" }
            app.close()
            try await eventually("the app's name is free") { try await world.client.nameOwner(Self.appName) == nil }
        }
    }
}
