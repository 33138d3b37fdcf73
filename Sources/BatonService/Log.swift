import Glibc
import Logging

/// batond's swift-log handler: lines on stderr, with the `<N>` priority prefixes journald
/// reads when stderr is the journal (`JOURNAL_STREAM` names its device and inode,
/// sd-daemon(3)), plain lines on a terminal or in a file. Messages never carry payloads
/// or storage values.
public struct StderrLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    /// True when stderr is journald's stream.
    public let toJournal: Bool

    public init(logLevel: Logger.Level, toJournal: Bool = StderrLogHandler.stderrIsJournal()) {
        self.logLevel = logLevel
        self.toJournal = toJournal
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let line: String
        if toJournal {
            line = "<\(Self.priority(event.level))>batond: \(event.message)\n"
        } else {
            let level = event.level >= .warning ? "\(event.level == .warning ? "warning" : "error"): " : ""
            line = "batond: \(level)\(event.message)\n"
        }
        line.utf8CString.withUnsafeBufferPointer { _ = write(2, $0.baseAddress, $0.count - 1) }
    }

    /// syslog priorities, as journald reads them.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
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

extension Logger {
    /// batond's logger: info and above, debug too when `verbose`.
    public static func batond(verbose: Bool) -> Logger {
        Logger(label: "batond") { _ in StderrLogHandler(logLevel: verbose ? .debug : .info) }
    }
}
