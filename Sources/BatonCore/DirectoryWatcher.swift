import Glibc
import Synchronization

/// Tells when a file in one of some directories is written or replaced, or a directory is
/// made in one (inotify: `IN_CLOSE_WRITE`; `IN_MOVED_TO` for a file replaced by a rename, as
/// GLib's `g_file_set_contents` and sync tools do; `IN_CREATE` of a directory), where the
/// names `matching` accepts; and when a watched directory itself goes (deleted, moved away,
/// its file system unmounted). With `entries`, a file made counts too (a pseudo-terminal in
/// `/dev/pts`, say; see `watch(_:onlyEntries:)`). A thread of its own waits in `poll` until a change or
/// `stop()`: no wake-up while nothing changes.
public final class DirectoryWatcher: Sendable {
    /// One element per burst of changes; ends at `stop()`.
    public let changes: AsyncStream<Void>
    private let inotify: Int32
    private let stopWriter: Int32
    private let stopped = Mutex(false)
    private let entries: Bool

    /// Watches `directories`; throws when one cannot be watched (it does not exist, say).
    public init(_ directories: [String], entries: Bool = false, matching: @escaping @Sendable (String) -> Bool) throws {
        let inotify = inotify_init1(Int32(IN_CLOEXEC))
        guard inotify >= 0 else { throw WatchError(description: "inotify: \(String(cString: strerror(errno)))") }
        var stop: [Int32] = [0, 0]
        guard pipe(&stop) == 0 else {
            close(inotify)
            throw WatchError(description: "pipe: \(String(cString: strerror(errno)))")
        }
        for fd in stop { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        self.inotify = inotify
        self.entries = entries
        stopWriter = stop[1]
        let stopReader = stop[0]
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        changes = stream
        do {
            for directory in directories { try watch(directory) }
        } catch {
            close(inotify)
            close(stopReader)
            close(stopWriter)
            throw error
        }
        // From here the thread owns the inotify descriptor and the pipe's reading end; should it
        // not start, they are closed (and `stop()` closes the writing end) as after a stop.
        let watching: @Sendable () -> Void = {
            defer {
                continuation.finish()
                close(inotify)
                close(stopReader)
            }
            var buffer = [UInt8](repeating: 0, count: 16_384)
            while true {
                var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0), pollfd(fd: stopReader, events: Int16(POLLIN), revents: 0)]
                guard poll(&fds, 2, -1) >= 0 || errno == EINTR else { return }
                if fds[1].revents != 0 { return }
                guard fds[0].revents != 0 else { continue }
                let count = buffer.withUnsafeMutableBytes { read(inotify, $0.baseAddress, $0.count) }
                guard count > 0 else { if count < 0 && errno == EINTR { continue } else { return } }
                if Self.events(in: buffer[..<count]).contains(where: { Self.isGone($0) || (entries || Self.counts($0)) && matching($0.name) }) {
                    continuation.yield()
                }
            }
        }
        do {
            try OwnThread.start(watching)
        } catch {
            continuation.finish()
            close(inotify)
            close(stopReader)
            close(stopWriter)
            throw error
        }
    }


    /// Watches `file`: its directory, for that name only.
    public convenience init(file path: String) throws {
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let name = String(path.split(separator: "/").last ?? "")
        try self.init([directory.isEmpty ? "/" : directory]) { $0 == name }
    }

    /// Watches one more directory (watching one twice is watching it once); with
    /// `onlyEntries`, only for entries made and removed there (`/dev/pts`, where a terminal's
    /// every open and close of a pseudo-terminal would be a change otherwise).
    public func watch(_ directory: String, onlyEntries: Bool = false) throws {
        let selfEvents = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT
        let mask = onlyEntries ? IN_CREATE | IN_DELETE | selfEvents
            : IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | selfEvents
        guard inotify_add_watch(inotify, directory, UInt32(mask)) >= 0 else {
            throw WatchError(description: "cannot watch \(directory): \(String(cString: strerror(errno)))")
        }
    }

    /// Ends `changes` and the thread.
    public func stop() {
        let first = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        var byte: UInt8 = 1
        _ = write(stopWriter, &byte, 1)
        close(stopWriter)
    }

    private struct Event {
        let mask: UInt32
        let name: String
    }

    /// A file written or renamed in, or a directory made (a file made is told when written).
    private static func counts(_ event: Event) -> Bool {
        event.mask & UInt32(IN_CREATE) == 0 || event.mask & UInt32(IN_ISDIR) != 0
    }

    /// A watched directory itself went.
    private static func isGone(_ event: Event) -> Bool {
        event.mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT) != 0
    }

    /// The `inotify_event`s in `bytes`.
    private static func events(in bytes: ArraySlice<UInt8>) -> [Event] {
        var events: [Event] = []
        var offset = bytes.startIndex
        let header = MemoryLayout<inotify_event>.size
        while offset + header <= bytes.endIndex {
            let event = bytes[offset..<(offset + header)].withUnsafeBytes { $0.loadUnaligned(as: inotify_event.self) }
            let start = offset + header, end = min(bytes.endIndex, start + Int(event.len))
            events.append(Event(mask: event.mask, name: String(decoding: bytes[start..<end].prefix { $0 != 0 }, as: UTF8.self)))
            offset = end
        }
        return events
    }

    public struct WatchError: Error, CustomStringConvertible {
        public let description: String
    }
}
