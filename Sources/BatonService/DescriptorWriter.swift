import BatonCore
import DBus
import Glibc

/// Writes a document to a file descriptor a caller passed (`Archive.ExportTo`), on a thread
/// of its own: the reader at the other end of a pipe may be slow or stop reading, and
/// neither the bus thread nor Swift's few concurrency threads may wait for it. A reader
/// that takes nothing for `stallTimeout` ends the write with `InvalidArgument`.
enum DescriptorWriter {
    static let stallTimeout: Duration = .seconds(30)

    /// Refuses a descriptor that is not open for writing, before any work is done for it.
    static func checkWritable(_ descriptor: FileDescriptor) throws(BatonError) {
        let flags = fcntl(descriptor.raw, F_GETFL)
        guard flags >= 0 else { throw .invalidArgument("the file descriptor cannot be used: \(String(cString: strerror(errno)))") }
        guard flags & O_ACCMODE == O_WRONLY || flags & O_ACCMODE == O_RDWR else {
            throw .invalidArgument("the file descriptor is not open for writing; pass one opened with O_WRONLY or O_RDWR (a file, or a pipe's write end)")
        }
    }

    /// Makes the text with `produce` and writes it whole to `descriptor`, both on a new
    /// thread; returns how many bytes were written.
    static func write(to descriptor: FileDescriptor, _ produce: @escaping @Sendable () throws -> String) async throws -> Int {
        try await OwnThread.run {
            var text = try produce()
            return try text.withUTF8 { bytes throws(BatonError) in try writeAll(bytes, to: descriptor.raw) }
        }
    }

    /// Blocks this thread until `bytes` are written, waiting at most `stallTimeout` for the
    /// reader each time it falls behind. Pipes take writes of at most a page once `poll`
    /// says they can: a larger write could block for good on a reader that stopped.
    private static func writeAll(_ bytes: UnsafeBufferPointer<UInt8>, to fd: Int32) throws(BatonError) -> Int {
        var info = stat()
        let chunk = fstat(fd, &info) == 0 && info.st_mode & S_IFMT == S_IFREG ? 1 << 20 : Int(PIPE_BUF)
        let stallMilliseconds = Int32(stallTimeout.components.seconds * 1000)
        var offset = 0
        while offset < bytes.count {
            var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let ready = poll(&poller, 1, stallMilliseconds)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else {
                throw .invalidArgument("nothing was read from the file descriptor for \(stallTimeout); the export stopped after \(offset) of \(bytes.count) bytes")
            }
            guard let base = bytes.baseAddress else { break }
            let written = Glibc.write(fd, base + offset, min(chunk, bytes.count - offset))
            if written < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw failure(errno, after: offset, of: bytes.count)
            }
            offset += written
        }
        return offset
    }

    private static func failure(_ code: Int32, after offset: Int, of total: Int) -> BatonError {
        let what = "the export stopped after \(offset) of \(total) bytes"
        switch code {
        case EPIPE: return .invalidArgument("the file descriptor's reader closed it; \(what)")
        case ENOSPC, EDQUOT: return .storageFull("no space left where the export is written; \(what)")
        default: return .invalidArgument("cannot write to the file descriptor: \(String(cString: strerror(code))); \(what)")
        }
    }
}
