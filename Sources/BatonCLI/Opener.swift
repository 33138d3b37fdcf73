import BatonContract
import BatonCore
import CSpawn
import DBus
import Glibc
import Synchronization

/// The handlers the bus starts to open what batond continues outside any scene: web pages
/// (`baton serve-web`, `org.baton.Web`) and recent documents (`baton serve-documents`,
/// `org.baton.RecentDocuments`). They run as processes of their own because batond's unit is
/// confined (no network, a memory cap, no executable memory): whatever they start is the
/// desktop's, not batond's.
enum Opener {
    /// Owns `name` and answers `Handler.ContinueActivity` with `open` (given the activity's
    /// record and the connection, returning what it opened), until nothing came for 10 s or the bus went.
    static func serve(
        _ name: String, address: String?,
        open: @escaping @Sendable ([String: DBusValue], Connection) async throws -> [String: DBusValue]
    ) async throws {
        let connection: Connection
        do {
            connection = try Connection(address.map { .address($0) } ?? .session) { _ in }
        } catch {
            throw CLIError(description: "cannot reach the session bus (\(error.message))", status: ExitStatus.daemonUnavailable)
        }
        let opening = Opening()
        try await connection.export(try ObjectPath(validating: Contract.Sources.handlerPath), [Interface(Contract.Interface.handler, methods: [
            Method(Contract.Handler.continueActivity) { call in
                opening.begin()
                defer { opening.end() }
                return [.record(try await open(try call.argument(1), connection))]
            },
        ])])
        try await connection.requestName(name)
        // Started for one page, usually: gone once nothing came for a while, or the bus went. The
        // name goes first, so that the bus starts a new handler for the next one, and what was
        // sent to this one before that is still answered.
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await connection.waitUntilClosed() }
            group.addTask {
                while !opening.quietFor(.seconds(10)) && !Task.isCancelled { try? await Task.sleep(for: .seconds(1)) }
                try? await connection.releaseName(name)
                while !opening.quietFor(.seconds(1)) && !Task.isCancelled { try? await Task.sleep(for: .milliseconds(100)) }
            }
            await group.next()
            group.cancelAll()
        }
        connection.close()
    }

    /// Starts `arguments` (a program on PATH, or a path) in a session of its own, without
    /// waiting for it: an app runs for as long as the user keeps it open.
    static func launch(_ arguments: [String], in directory: String? = nil) throws(BatonError) {
        _ = try spawn(arguments, in: directory)
    }

    /// Starts `arguments` with the usual signals (unblocked, default actions) in a session of
    /// its own, stdin /dev/null, in `directory` when given; returns its pid.
    static func spawn(_ arguments: [String], in directory: String? = nil) throws(BatonError) -> pid_t {
        guard let program = arguments.first else { throw .handlerFailed("nothing to start") }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Swift's threads block signals, and a child inherits the mask: the app gets the usual one.
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()  // libdbus ignores SIGPIPE; the app gets it back
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        let setsid: Int32 = 0x80  // POSIX_SPAWN_SETSID (glibc), which Swift's Glibc does not export
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | setsid))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let directory { posix_spawn_file_actions_addchdir_np(&actions, directory) }
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, program, &actions, &attributes, argv, environ)
        guard result == 0 else { throw .handlerFailed("cannot start \(program): \(String(cString: strerror(result)))") }
        return pid
    }
}

/// The activities a handler is opening, and when it last finished one.
private final class Opening: Sendable {
    private let state = Mutex((opening: 0, last: ContinuousClock.now))
    func begin() { state.withLock { $0.opening += 1 } }
    func end() { state.withLock { $0 = ($0.opening - 1, .now) } }
    func quietFor(_ duration: Duration) -> Bool { state.withLock { $0.opening == 0 && ContinuousClock.now - $0.last >= duration } }
}
