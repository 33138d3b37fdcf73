import Foundation
import Glibc
import Synchronization

/// Tells when a file is written or replaced (inotify on its directory: `IN_CLOSE_WRITE`, and
/// `IN_MOVED_TO` for a file replaced by a rename, as GLib's `g_file_set_contents` does). A
/// thread of its own waits in `poll` until a change or `stop()`: no wake-up while nothing changes.
final class FileWatcher: Sendable {
    /// One element per change to the file; ends at `stop()`.
    let changes: AsyncStream<Void>
    private let stopWriter: Int32
    private let stopped = Mutex(false)

    /// Watches `path`; throws when its directory cannot be watched (it does not exist, say).
    init(_ path: String) throws {
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let name = String(path.split(separator: "/").last ?? "")
        let inotify = inotify_init1(Int32(IN_CLOEXEC))
        guard inotify >= 0 else { throw WatchError(description: "inotify: \(String(cString: strerror(errno)))") }
        guard inotify_add_watch(inotify, directory.isEmpty ? "/" : directory, UInt32(IN_CLOSE_WRITE | IN_MOVED_TO)) >= 0 else {
            let reason = String(cString: strerror(errno))
            close(inotify)
            throw WatchError(description: "cannot watch \(directory): \(reason)")
        }
        var stop: [Int32] = [0, 0]
        guard pipe(&stop) == 0 else {
            close(inotify)
            throw WatchError(description: "pipe: \(String(cString: strerror(errno)))")
        }
        for fd in stop { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        stopWriter = stop[1]
        let stopReader = stop[0]
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        changes = stream
        Thread.detachNewThread {
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
                if Self.names(in: buffer[..<count]).contains(name) { continuation.yield() }
            }
        }
    }

    /// Ends `changes` and the thread.
    func stop() {
        let first = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        var byte: UInt8 = 1
        _ = write(stopWriter, &byte, 1)
        close(stopWriter)
    }

    /// The file names of the `inotify_event`s in `bytes`.
    private static func names(in bytes: ArraySlice<UInt8>) -> [String] {
        var names: [String] = []
        var offset = bytes.startIndex
        let header = MemoryLayout<inotify_event>.size
        while offset + header <= bytes.endIndex {
            let length = bytes[offset..<(offset + header)].withUnsafeBytes { Int($0.loadUnaligned(as: inotify_event.self).len) }
            let start = offset + header, end = min(bytes.endIndex, start + length)
            names.append(String(decoding: bytes[start..<end].prefix { $0 != 0 }, as: UTF8.self))
            offset = end
        }
        return names
    }

    struct WatchError: Error, CustomStringConvertible {
        let description: String
    }
}
