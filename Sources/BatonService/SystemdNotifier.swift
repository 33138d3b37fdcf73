import Glibc

/// Tells systemd where the daemon stands (sd_notify(3), without libsystemd): `KEY=VALUE`
/// lines in one datagram to the socket `$NOTIFY_SOCKET` names. Does nothing when batond
/// was not started by systemd with `Type=notify`-style notification.
public struct SystemdNotifier: Sendable {
    /// The socket's address (a leading `@` names the abstract namespace); nil: not asked.
    let socket: String?
    /// Half of `WatchdogSec=` when systemd asked this process for watchdog pings.
    public let watchdogInterval: Duration?

    public init(environment: [String: String]) {
        socket = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        let forUs = environment["WATCHDOG_PID"].map { Int32($0) == getpid() } ?? true
        if forUs, let text = environment["WATCHDOG_USEC"], let microseconds = UInt64(text), microseconds > 0 {
            watchdogInterval = .microseconds(Int64(microseconds / 2))
        } else {
            watchdogInterval = nil
        }
    }

    /// The service is up: it owns its bus name and answers calls.
    public func ready(status: String) { send("READY=1\nSTATUS=\(status)\nMAINPID=\(getpid())") }
    /// The service is going down on request.
    public func stopping(status: String) { send("STOPPING=1\nSTATUS=\(status)") }
    /// The watchdog's ping: the bus thread is alive.
    public func watchdog() { send("WATCHDOG=1") }
    public func status(_ status: String) { send("STATUS=\(status)") }

    func send(_ state: String) {
        guard let socket, socket.utf8.count < 108 else { return }
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var path = Array(socket.utf8)
        if path.first == UInt8(ascii: "@") { path[0] = 0 }  // the abstract namespace
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.enumerated() { buffer[index] = byte }
        }
        let length = socklen_t(MemoryLayout.offset(of: \sockaddr_un.sun_path)! + path.count)
        _ = state.utf8CString.withUnsafeBufferPointer { text in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, text.baseAddress, text.count - 1, Int32(MSG_NOSIGNAL), $0, length)
                }
            }
        }
    }
}
