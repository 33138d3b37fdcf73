import BatonCore
import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// What batond tells systemd (sd_notify), read from a real datagram socket standing in
/// for systemd's, and how it logs with and without the journal.
@Suite(.serialized)
struct SystemdNotifyTests {
    /// A datagram socket like the one systemd passes in `NOTIFY_SOCKET`.
    final class NotifySocket: @unchecked Sendable {
        let path: String
        let fd: Int32

        init(in directory: URL) throws {
            path = directory.appendingPathComponent("notify").path
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { buffer in
                for (index, byte) in path.utf8.enumerated() { buffer[index] = byte }
            }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard fd >= 0, bound == 0 else { throw TestSupportError("cannot bind \(path): errno \(errno)") }
        }

        /// The next datagram, or nil after `timeout`.
        func next(timeout: Duration = .seconds(5)) -> String? {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)) == 1 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &buffer, buffer.count, 0)
            return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : nil
        }

        deinit { close(fd) }
    }

    @Test func readyWatchdogPingsFromTheBusThreadAndStopping() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        let notify = try NotifySocket(in: world.bus.directory)
        var environment = world.bus.environment
        environment["NOTIFY_SOCKET"] = notify.path
        environment["WATCHDOG_USEC"] = "400000"
        let log = open(world.logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        let database = world.bus.directory.appendingPathComponent("baton.sqlite").path
        let daemon = try Subprocess(try Executables.built("batond"), ["--database", database], environment: environment, stderr: log)
        close(log)
        defer { daemon.kill(SIGKILL) }

        var first = notify.next()
        // The first ping may come before READY: the bus thread pings as soon as it can.
        while first == "WATCHDOG=1" { first = notify.next() }
        #expect(first?.hasPrefix("READY=1\nSTATUS=serving org.baton.Handoff1 from ") == true, "\(first ?? "nothing")")
        #expect(first?.contains("MAINPID=\(daemon.pid)") == true)
        // Half of WatchdogSec: a ping about every 0.2 s.
        let clock = ContinuousClock()
        let start = clock.now
        for _ in 0..<5 { #expect(notify.next(timeout: .seconds(2)) == "WATCHDOG=1") }
        // About 1 s; generous, for a loaded machine (a ping every 2 s would take 10).
        #expect(clock.now - start < .seconds(4))

        daemon.kill(SIGTERM)
        var message = notify.next()
        while message == "WATCHDOG=1" { message = notify.next() }
        #expect(message?.hasPrefix("STOPPING=1\nSTATUS=stopping") == true, "\(message ?? "nothing")")
        #expect(await daemon.wait() == 0)
        // Not the journal: plain lines, no <N> prefixes.
        #expect(world.daemonLog.contains("batond: stopping; finishing calls in flight") && !world.daemonLog.contains("<6>"), "\(world.daemonLog)")
    }

    /// With stderr the journal (JOURNAL_STREAM names its device and inode), lines carry priorities.
    @Test func journalPrioritiesOnlyWhenStderrIsTheJournal() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        _ = FileManager.default.createFile(atPath: world.logPath, contents: nil)
        var info = stat()
        #expect(stat(world.logPath, &info) == 0)
        var environment = world.bus.environment
        environment["JOURNAL_STREAM"] = "\(info.st_dev):\(info.st_ino)"
        let log = open(world.logPath, O_WRONLY | O_APPEND | O_CLOEXEC)
        let daemon = try Subprocess(try Executables.built("batond"), ["--database", world.bus.directory.appendingPathComponent("b.sqlite").path],
                                    environment: environment, stderr: log)
        close(log)
        try await world.client.waitForName("org.baton.Handoff1", timeout: .seconds(15))
        daemon.kill(SIGTERM)
        #expect(await daemon.wait() == 0)
        #expect(world.daemonLog.contains("<6>batond: serving org.baton.Handoff1"), "\(world.daemonLog)")
    }
}
