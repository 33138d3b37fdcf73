import Glibc

/// A Unix file descriptor that travels in a message (`h`), owned: closed when the last
/// value holding it goes. libdbus hands each one read from a message as a duplicate, and
/// duplicates the one appended, so a descriptor a handler never takes is closed, not leaked.
public final class FileDescriptor: Hashable, Sendable, CustomStringConvertible {
    /// The descriptor; valid while this object lives.
    public let raw: Int32

    /// Takes ownership of `raw` (closed with this object).
    public init(owning raw: Int32) {
        self.raw = raw
    }

    /// A duplicate of `raw` (close-on-exec), owned; the caller keeps its own.
    public static func duplicating(_ raw: Int32) throws(DBusError) -> FileDescriptor {
        let copy = fcntl(raw, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else { throw .invalidArgs("cannot duplicate file descriptor \(raw): \(String(cString: strerror(errno)))") }
        return FileDescriptor(owning: copy)
    }

    deinit { close(raw) }

    public var description: String { "fd \(raw)" }
    public static func == (left: FileDescriptor, right: FileDescriptor) -> Bool { left === right }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
