import DBus
import Foundation
import Glibc

/// The world every test that crosses the bus runs in: a private `dbus-daemon`, the built
/// `batond` on it with a database of its own (started at once, or when the test says),
/// and a raw client connection. Every test target builds it here and ends it with
/// `defer { world.close() }`, which kills what is left even when the test fails or throws.
public final class BatonWorld: @unchecked Sendable {
    public let bus: PrivateBus
    /// A raw connection to the bus, for calls spelled as any client spells them.
    public let client: Connection
    public private(set) var daemon: RunningBatond?
    /// Arguments every start of batond gets (a handler timeout, say).
    public var extraArguments: [String] = []
    /// Environment every start of batond gets beside the bus's (`XDG_RUNTIME_DIR`, say).
    public var extraEnvironment: [String: String] = [:]
    /// Run by `close()`, first: what a test started in its own process (a daemon built in it).
    private var closing: [() -> Void] = []

    /// Where batond keeps its database, stable across restarts.
    public var database: String { RunningBatond.database(on: bus) }
    /// batond's stderr, appended across restarts.
    public var logPath: String { RunningBatond.logPath(on: bus) }
    public var daemonLog: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// A bus and a client; batond is not started (`startDaemon`).
    public init(allowOtherUsers: Bool = false) throws {
        bus = try PrivateBus(allowOtherUsers: allowOtherUsers)
        do {
            client = try bus.connect()
        } catch {
            bus.stop()
            throw error
        }
    }

    /// A world with batond already running (with `arguments`) and owning its name.
    public static func started(_ arguments: [String] = []) async throws -> BatonWorld {
        let world = try BatonWorld()
        do {
            try await world.startDaemon(arguments)
        } catch {
            world.close()
            throw error
        }
        return world
    }

    /// Starts batond and waits until it owns its name.
    public func startDaemon(_ arguments: [String] = [], umask: mode_t? = nil) async throws {
        daemon = try await RunningBatond(on: bus, arguments: extraArguments + arguments, umask: umask, environment: extraEnvironment)
    }

    /// Stops batond with `signal` and returns its exit status.
    @discardableResult
    public func stopDaemon(_ signal: Int32 = SIGTERM) async -> Int32? {
        guard let daemon else { return nil }
        self.daemon = nil
        return await daemon.stop(signal)
    }

    /// Adds `action` to what `close()` does first.
    public func onClose(_ action: @escaping () -> Void) { closing.append(action) }

    /// Kills batond and the bus at once, for `defer`. (A `Task` started in a `defer` to stop
    /// them may not run before the test process exits: that left one bus daemon running per
    /// test run.)
    public func close() {
        closing.forEach { $0() }
        closing = []
        daemon?.process.kill(SIGKILL)
        daemon = nil
        client.close()
        bus.stop()
    }

    /// Calls batond as `dbus-send` would: names spelled out, not taken from our contract module.
    public func call(
        _ interface: String, _ member: String, _ arguments: [DBusValue] = [], path: ObjectPath = "/org/baton/Handoff1"
    ) async throws -> [DBusValue] {
        try await client.call("org.baton.Handoff1", path, interface, member, arguments, timeout: .seconds(20))
    }

    /// A property of the Sync interface, its variant unwrapped (nil when the reply has none).
    public func syncProperty(_ name: String) async throws -> DBusValue? {
        try await call("org.freedesktop.DBus.Properties", "Get", [.string("org.baton.Handoff1.Sync"), .string(name)]).first?.unwrapped
    }

    /// Runs a program (a path, or a name on PATH) with this bus as its session bus.
    /// `timeout` as `Executables.run`'s: longer than the deadlines of the program's own steps,
    /// so that a step that fails says which it was.
    public func run(
        _ tool: String, _ arguments: [String], environment extra: [String: String] = [:], stdin: String? = nil, timeout: Duration = .seconds(30)
    ) async throws -> CommandResult {
        try await Executables.run(tool, arguments, environment: bus.environment.merging(extra) { $1 }, stdin: stdin, timeout: timeout)
    }

    /// Runs the built `baton` on this bus, without colours.
    public func baton(_ arguments: [String], environment: [String: String] = [:], stdin: String? = nil) async throws -> CommandResult {
        try await run(try Executables.built("baton"), arguments, environment: ["NO_COLOR": "1"].merging(environment) { $1 }, stdin: stdin)
    }
}

extension BatonWorld {
    /// Whether the first scene `ListScenes` gives for `app` shows `activityID` (its `ActivityId`).
    /// False while there is none, or while the one listed is not on the bus yet: a scene is in
    /// the database a moment before its object is exported.
    public func firstScene(of app: String, shows activityID: String) async throws -> Bool {
        let scenes = try await call("org.baton.Handoff1.Scenes", "ListScenes", [.string(app)]).first?.arrayValue ?? []
        guard let scene = scenes.first?.objectPathValue else { return false }
        let shown = try? await call("org.freedesktop.DBus.Properties", "Get", [
            .string("org.baton.Handoff1.Scene"), .string("ActivityId"),
        ], path: scene)
        return shown?.first?.unwrapped == .string(activityID)
    }
}

extension BatonWorld {
    /// A notification python3-dbusmock's notification server was asked to show.
    public typealias Notified = (replaces: UInt32, summary: String, body: String, actions: [String], hints: [String: DBusValue])

    /// Starts python3-dbusmock's notification server on this bus (a server we did not write,
    /// needing no display) and waits for its name; kill it at the end.
    public func startNotificationServer() async throws -> Subprocess {
        let mock = try Subprocess("/usr/bin/python3", ["-m", "dbusmock", "--template", "notification_daemon",
                                                        "-p", #"{"capabilities": "body actions"}"#], environment: bus.environment)
        try await client.waitForName("org.freedesktop.Notifications", timeout: .seconds(15))
        return mock
    }

    /// The Notify calls the mock notification server received so far.
    public func notified() async throws -> [Notified] {
        let calls = try await client.call("org.freedesktop.Notifications", "/org/freedesktop/Notifications", "org.freedesktop.DBus.Mock",
                                          "GetMethodCalls", [.string("Notify")])
        return (calls.first?.arrayValue ?? []).compactMap { call in
            guard let fields = call.structureValue, fields.count == 2, let arguments = fields[1].arrayValue?.map(\.unwrapped),
                  arguments.count == 8 else { return nil }
            return (arguments[1].uint32Value ?? 0, arguments[3].stringValue ?? "", arguments[4].stringValue ?? "",
                    arguments[5].arrayValue?.compactMap(\.stringValue) ?? [], arguments[6].stringKeyedValue?.mapValues(\.unwrapped) ?? [:])
        }
    }
}
