import CDBus
import Glibc

/// Who is behind a unique bus name: the Unix user the bus vouches for and, told apart as
/// xdg-desktop-portal tells them, the sandboxed app the process belongs to, if any.
public struct Caller: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// Not in a sandbox this knows: a terminal's program, the desktop, an app installed from packages.
        case host
        /// A Flatpak app: its process's root holds `/.flatpak-info`.
        case flatpak
        /// A Snap: its process runs in a `snap.<name>.…` cgroup.
        case snap
    }

    /// The Unix user id, as the bus vouches.
    public let user: UInt32
    public let kind: Kind
    /// A sandboxed caller's app: its Flatpak app id (`org.example.App`) or `snap.<name>`;
    /// nil for a host client.
    public let appID: String?

    public var isSandboxed: Bool { kind != .host }

    public init(user: UInt32, kind: Kind = .host, appID: String? = nil) {
        self.user = user
        self.kind = kind
        self.appID = appID
    }
}

/// Who may hear a signal, on a connection that identifies its callers (`Connection.setAccessCheck`).
public enum Audience: Sendable, Equatable {
    /// Every caller.
    case everyone
    /// Host clients only: what concerns every app, or the user's own settings.
    case hosts
    /// Host clients and the sandboxed callers of one app: what belongs to that app.
    case app(String)

    public func admits(_ caller: Caller) -> Bool {
        switch self {
        case .everyone: true
        case .hosts: !caller.isSandboxed
        case .app(let app): !caller.isSandboxed || caller.appID == app
        }
    }
}

/// What the bus says of a connection's process (`GetConnectionCredentials`).
public struct Credentials: Sendable {
    public var user: UInt32
    /// The process id, in the bus's pid namespace.
    public var processID: UInt32?
    /// A pidfd of the process, from buses that give one (dbus-daemon ≥ 1.15.8, dbus-broker ≥ 34):
    /// it names the process for good, where a pid could be reused once the process ends.
    public var processFD: FileDescriptor?

    public init(user: UInt32, processID: UInt32? = nil, processFD: FileDescriptor? = nil) {
        self.user = user
        self.processID = processID
        self.processFD = processFD
    }

    /// From the bus's reply; nil when it does not say which user.
    init?(_ reply: [String: DBusValue]) {
        guard let user = reply["UnixUserID"]?.variantValue?.uint32Value else { return nil }
        self.user = user
        processID = reply["ProcessID"]?.variantValue?.uint32Value
        if case .unixFD(let descriptor)? = reply["ProcessFD"]?.variantValue { processFD = descriptor }
    }
}

/// Tells which sandbox a process runs in, from `/proc` (`proc`: another directory laid out
/// like it, for tests).
///
/// The process is pinned first (the bus's pidfd, or one opened on its pid) and checked to be
/// still running after its files were read: a pid is reused only once its process has
/// ended, so what was read was that process's.
public struct SandboxIdentification: Sendable {
    public let proc: String
    /// False: as where `pidfd_open` is missing (a kernel before 5.3, valgrind, a seccomp
    /// filter without it), the process's start time pins it instead.
    let pidfds: Bool

    public init(proc: String = "/proc") {
        self.init(proc: proc, pidfds: true)
    }

    init(proc: String, pidfds: Bool) {
        self.proc = proc
        self.pidfds = pidfds
    }

    public func caller(_ credentials: Credentials) throws(DBusError) -> Caller {
        let pinned: FileDescriptor
        let pid: Int32
        if let descriptor = credentials.processFD {
            guard let read = Self.processID(fdinfo: try Self.contents(of: "/proc/self/fdinfo/\(descriptor.raw)", in: AT_FDCWD) ?? "") else {
                throw Self.gone("the bus gave a process descriptor that names no running process")
            }
            (pinned, pid) = (descriptor, read)
        } else if let processID = credentials.processID, processID > 0, processID <= UInt32(Int32.max) {
            pid = Int32(processID)
            var failure: Int32 = 0
            guard pidfds, let descriptor = Self.pin(pid, failure: &failure) else {
                // ESRCH: no such process. Anything else (ENOSYS, EPERM): no pidfds here.
                if failure == ESRCH { throw Self.gone("process \(pid) is gone") }
                return try identifyByStartTime(pid: pid, user: credentials.user)
            }
            pinned = descriptor
        } else {
            throw Self.unknown("the bus did not say which process it is")
        }
        let caller: Caller
        do {
            caller = try identify(pid: pid, user: credentials.user)
        } catch where cdbus_pidfd_is_alive(pinned.raw) == 0 {
            throw Self.gone("process \(pid) ended while it was being identified")
        }
        guard cdbus_pidfd_is_alive(pinned.raw) != 0 else { throw Self.gone("process \(pid) ended while it was being identified") }
        return caller
    }

    /// Where there is no pidfd: the process's start time, read before and after its files,
    /// tells whether the pid still names the same process (a pid and its start time do).
    /// (Of the running process, whatever `proc` says: it pins, as a pidfd would.)
    private func identifyByStartTime(pid: Int32, user: UInt32) throws(DBusError) -> Caller {
        func startTime() throws(DBusError) -> UInt64? { Self.startTime(stat: try Self.contents(of: "/proc/\(pid)/stat", in: AT_FDCWD) ?? "") }
        guard let started = try startTime() else { throw Self.gone("process \(pid) is gone") }
        let caller: Caller
        do {
            caller = try identify(pid: pid, user: user)
        } catch where (try? startTime()) != started {
            throw Self.gone("process \(pid) ended while it was being identified")
        }
        guard try startTime() == started else {
            throw Self.gone("process \(pid) ended while it was being identified")
        }
        return caller
    }

    /// The start time (field 22) of a `/proc/PID/stat`; its second field, the command name
    /// in parentheses, may hold spaces and parentheses itself.
    static func startTime(stat: String) -> UInt64? {
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (the state), so field 22 is fields[19].
        return fields.count > 19 ? UInt64(fields[19]) : nil
    }

    /// The sandbox of process `pid` from its files under `proc`, which the caller pinned. A
    /// file that is not there says "not that sandbox"; one that cannot be read says nothing,
    /// and the caller is refused rather than taken for a host client.
    func identify(pid: Int32, user: UInt32) throws(DBusError) -> Caller {
        // The process's entry as `proc` holds it (fixtures in tests).
        func file(_ name: String) -> String { "\(proc)/\(pid)/\(name)" }
        let root = open(file("root"), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else {
            let failure = errno
            // The kernel lets a process read another's root only if it holds every capability
            // that one holds: a caller with capabilities this process lacks (root's programs,
            // with batond's capabilities dropped by its unit) is refused here. A sandbox holds
            // none, so such a caller is a host client.
            if failure == EACCES || failure == EPERM,
               let status = try Self.contents(of: file("status"), in: AT_FDCWD),
               Self.holdsCapabilities(status: status) {
                return Caller(user: user)
            }
            throw Self.unknown("cannot open process \(pid)'s root: \(String(cString: strerror(failure)))")
        }
        defer { close(root) }
        if let info = try Self.contents(of: ".flatpak-info", in: root), let app = Self.flatpakAppID(info: info) {
            return Caller(user: user, kind: .flatpak, appID: app)
        }
        if let cgroup = try Self.contents(of: file("cgroup"), in: AT_FDCWD), let snap = Self.snapName(cgroup: cgroup) {
            return Caller(user: user, kind: .snap, appID: "snap.\(snap)")
        }
        return Caller(user: user)
    }

    /// A pidfd of process `pid` (`pidfd_open`), or nil with the reason in `failure` (`ESRCH`:
    /// there is no such process).
    static func pin(_ pid: Int32, failure: inout Int32) -> FileDescriptor? {
        let descriptor = cdbus_pidfd_open(pid)
        if descriptor < 0 { failure = errno }
        return descriptor >= 0 ? FileDescriptor(owning: descriptor) : nil
    }

    /// `[Application] name` of a `.flatpak-info` (a key file); nil without one.
    static func flatpakAppID(info: String) -> String? {
        var section = ""
        for line in info.split(whereSeparator: \.isNewline) {
            let trimmed = line.trimmingSpaces
            if trimmed.hasPrefix("[") && trimmed.hasSuffix("]") {
                section = String(trimmed.dropFirst().dropLast())
            } else if section == "Application", let equals = trimmed.firstIndex(of: "="),
                      trimmed[..<equals].trimmingSpaces == "name" {
                let name = trimmed[trimmed.index(after: equals)...].trimmingSpaces
                return name.isEmpty ? nil : String(name)
            }
        }
        return nil
    }

    /// The snap's name from `/proc/PID/cgroup`: a path component `snap.<name>.<app>…`
    /// (`snap.firefox.firefox-1234.scope`, `snap.firefox.hook.configure-…`); nil for none.
    static func snapName(cgroup: String) -> String? {
        for line in cgroup.split(whereSeparator: \.isNewline) {
            // hierarchy-ID:controllers:path
            let path = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).last ?? ""
            for component in path.split(separator: "/").reversed() where component.hasPrefix("snap.") {
                let parts = component.split(separator: ".", omittingEmptySubsequences: false)
                if parts.count >= 3, !parts[1].isEmpty { return String(parts[1]) }
            }
        }
        return nil
    }

    /// Whether a `/proc/PID/status` gives the process any permitted capability (`CapPrm`).
    static func holdsCapabilities(status: String) -> Bool {
        for line in status.split(whereSeparator: \.isNewline) where line.hasPrefix("CapPrm:") {
            return UInt64(line.dropFirst(7).trimmingSpaces, radix: 16).map { $0 != 0 } ?? false
        }
        return false
    }

    /// The `Pid:` of a pidfd's `/proc/self/fdinfo` entry; nil when absent or not positive
    /// (-1: the process has ended; 0: it is in a pid namespace this process cannot see).
    static func processID(fdinfo: String) -> Int32? {
        for line in fdinfo.split(whereSeparator: \.isNewline) where line.hasPrefix("Pid:") {
            guard let pid = Int32(line.dropFirst(4).trimmingSpaces), pid > 0 else { return nil }
            return pid
        }
        return nil
    }

    /// A small file's text (at most 64 KiB) at `path` relative to directory `directory`;
    /// nil when there is no such file.
    static func contents(of path: String, in directory: Int32) throws(DBusError) -> String? {
        let descriptor = openat(directory, path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw unknown("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 65_536 {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func unknown(_ reason: String) -> DBusError {
        DBusError(name: DBusError.Name.accessDenied, message: "cannot tell which app is calling: \(reason)")
    }

    /// The process ended before it could be identified (its connection is leaving the bus).
    static func gone(_ reason: String) -> DBusError {
        DBusError(name: DBusError.Name.unixProcessIdUnknown, message: "cannot tell which app is calling: \(reason)")
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs.
    fileprivate var trimmingSpaces: Substring {
        let text = Substring(self)
        guard let first = text.firstIndex(where: { $0 != " " && $0 != "\t" }),
              let last = text.lastIndex(where: { $0 != " " && $0 != "\t" && $0 != "\r" }) else { return "" }
        return text[first...last]
    }
}
