import Foundation
import Glibc

/// A child process started with `posix_spawn`.
///
/// Foundation's `Process.waitUntilExit` spins a run loop and was seen hanging
/// inside Swift-concurrency threads, so tests spawn and reap children directly.
public final class Subprocess: @unchecked Sendable {
    public let pid: pid_t
    private let exit = ExitStatus()

    /// Whether the child leads a process group of its own (`kill(_:)` then reaches its children too).
    public let ownsGroup: Bool

    /// Starts `executable`; each of `stdin`, `stdout`, `stderr` is a file descriptor
    /// the child gets (nil: /dev/null for stdin, inherit for the others). With `ownGroup`,
    /// the child leads a new process group: a script that signals its group (`kill -STOP 0`,
    /// or `kill -STOP ""` gone wrong) cannot stop the test process, and killing it on a
    /// deadline takes whatever it started along.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        stdin: Int32? = nil, stdout: Int32? = nil, stderr: Int32? = nil, ownGroup: Bool = false
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let stdin {
            posix_spawn_file_actions_adddup2(&actions, stdin, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        if let stdout { posix_spawn_file_actions_adddup2(&actions, stdout, 1) }
        if let stderr { posix_spawn_file_actions_adddup2(&actions, stderr, 2) }

        // Dispatch worker threads block every signal, and a spawned child inherits
        // the mask: without this, dbus-daemon would never see our SIGTERM.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        if ownGroup {
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= POSIX_SPAWN_SETPGROUP
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let env = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { env.forEach { free($0) } }

        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, env)
        guard result == 0 else {
            throw TestSupportError("could not start \(executable): \(String(cString: strerror(result)))")
        }
        self.pid = pid
        self.ownsGroup = ownGroup
        // One thread per child reaps it, so `wait()` can be awaited from any task.
        let exit = self.exit
        let child = pid
        Thread.detachNewThread {
            var status: Int32 = 0
            while waitpid(child, &status, 0) < 0 && errno == EINTR {}
            exit.set(status)
        }
    }

    /// Sends `signal` to the child if it is still running (and to its group, when it leads one).
    /// Never to a pid of 0 or less: that would signal the test's own process group.
    public func kill(_ signal: Int32 = SIGTERM) {
        guard pid > 0, !exit.isSet else { return }
        Glibc.kill(ownsGroup ? -pid : pid, signal)
    }

    /// Waits for the child to end and returns its exit code (128 + signal when killed).
    @discardableResult
    public func wait() async -> Int32 {
        let status = await exit.value()
        if status & 0x7f == 0 { return (status >> 8) & 0xff }
        return 128 + (status & 0x7f)
    }

    /// True once the child has ended.
    public var hasExited: Bool { exit.isSet }
}

/// A one-shot value that async waiters can await.
final class ExitStatus: @unchecked Sendable {
    private let lock = NSLock()
    private var status: Int32?
    private var waiters: [CheckedContinuation<Int32, Never>] = []

    var isSet: Bool { lock.withLock { status != nil } }

    func set(_ value: Int32) {
        let waiting = lock.withLock {
            status = value
            defer { waiters.removeAll() }
            return waiters
        }
        for waiter in waiting { waiter.resume(returning: value) }
    }

    func value() async -> Int32 {
        await withCheckedContinuation { continuation in
            let ready: Int32? = lock.withLock {
                if let status { return status }
                waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
