import Glibc

/// Log lines on stderr. When stderr is the journal (`JOURNAL_STREAM` names its device and
/// inode, sd-daemon(3)), each line carries the `<N>` priority prefix journald reads; on a
/// terminal or in a file, plain lines. Messages never carry payloads or storage values.
public struct Log: Sendable {
    public let verbose: Bool
    /// True when stderr is journald's stream.
    public let toJournal: Bool

    public init(verbose: Bool, toJournal: Bool = Log.stderrIsJournal()) {
        self.verbose = verbose
        self.toJournal = toJournal
    }

    public func error(_ message: String) { write(3, "error: ", message) }
    public func warning(_ message: String) { write(4, "warning: ", message) }
    public func info(_ message: String) { write(6, "", message) }
    public func debug(_ message: String) { if verbose { write(7, "", message) } }

    private func write(_ priority: Int, _ level: String, _ message: String) {
        let line = toJournal ? "<\(priority)>batond: \(message)\n" : "batond: \(level)\(message)\n"
        line.utf8CString.withUnsafeBufferPointer { _ = Glibc.write(2, $0.baseAddress, $0.count - 1) }
    }

    /// Whether `JOURNAL_STREAM` (`device:inode`) is stderr's own device and inode.
    public static func stderrIsJournal() -> Bool {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
        let parts = value.split(separator: ":")
        var info = stat()
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]), fstat(2, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }
}
