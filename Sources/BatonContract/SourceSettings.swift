import BatonCore

/// A setting of one of batond's sources (`Status.SourceSettings`, `Status.SetSourceSetting`,
/// `baton sources show|set`): declared once, with its default and the values it takes, in the
/// source's declaration (`Contract.Sources`). Values travel and are stored as text; seconds and
/// bytes are plain integers.
public struct SourceSetting: Sendable, Equatable {
    /// The values a setting takes.
    public enum Values: Sendable, Equatable {
        /// One of these words.
        case oneOf([String])
        /// A whole number in this range (seconds, bytes).
        case number(ClosedRange<UInt64>)
        /// Text of at most this many bytes, without control characters; `takes` says what it is.
        case text(maxBytes: Int, takes: String)
    }

    public let name: String
    public let values: Values
    public let defaultValue: String
    /// What it decides, in a sentence, for `baton sources show`.
    public let summary: String

    public init(_ name: String, _ values: Values, default defaultValue: String, _ summary: String) {
        self.name = name
        self.values = values
        self.defaultValue = defaultValue
        self.summary = summary
    }

    /// `value` as it is stored (a number without leading zeros), or `InvalidArgument` saying what it takes.
    public func checked(_ value: String, of source: String) throws(BatonError) -> String {
        switch values {
        case .oneOf(let words):
            guard words.contains(value) else {
                throw .invalidArgument("\(source)'s \(name) is one of \(words.joined(separator: ", ")), not '\(printable(value))'")
            }
            return value
        case .number(let range):
            guard let number = UInt64(value), range.contains(number) else {
                throw .invalidArgument("\(source)'s \(name) is a whole number from \(range.lowerBound) to \(range.upperBound), not '\(printable(value))'")
            }
            return String(number)
        case .text(let maxBytes, let takes):
            guard value.utf8.count <= maxBytes, !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw .invalidArgument("\(source)'s \(name) is \(takes) of at most \(maxBytes) bytes, without control characters")
            }
            return value
        }
    }

    /// The values it takes, in words: `both, send or receive`, `5 to 3600`.
    public var takes: String {
        switch values {
        case .oneOf(let words): words.dropLast().joined(separator: ", ") + (words.count > 1 ? " or " : "") + (words.last ?? "")
        case .number(let range): "\(range.lowerBound) to \(range.upperBound)"
        case .text(_, let takes): takes
        }
    }
}

extension Contract.Sources {
    /// Copies the user makes on one machine, offered on the clipboards of their others (the
    /// clipboard agent does the display's part); off until the user turns it on on each machine.
    public enum Clipboard {
        /// Its name for `Status.EnableSource`, `Status.SourceSettings` and `baton sources`.
        public static let name = "clipboard"
        public static let settings = [
            SourceSetting("direction", .oneOf(["both", "send", "receive"]), default: "both",
                          "whether this machine sends its copies, receives the others', or both"),
            SourceSetting("lifetime", .number(5...3_600), default: "120",
                          "seconds a copy is offered on the other machines' clipboards, from when it was made"),
            SourceSetting("max-text", .number(1...4_194_304), default: "262144", "bytes of the largest text sent"),
            SourceSetting("max-image", .number(1...33_554_432), default: "8388608", "bytes of the largest image (PNG) sent"),
        ]
    }

    /// The shells open in terminal windows, each an activity that continuing opens in a terminal
    /// at its directory; off until the user turns it on.
    public enum Terminals {
        public static let type = "org.baton.terminal.session"
        public static let app = "org.baton.Terminals"
        /// Its name for `Status.EnableSource`, `Status.SourceSettings` and `baton sources`.
        public static let name = "terminals"
        /// The history's end reason of a shell open when batond last stopped: what `baton terminals restore` reopens.
        public static let openAtStop = "its shell was open when Baton last stopped following it"
        public static let settings = [
            SourceSetting("blocked-paths", .text(maxBytes: 4_096, takes: "directories separated by ':' (~/ the home, * any name)"),
                          default: "~/.ssh:~/.gnupg", "directories whose shells are never recorded, nor anything below them"),
        ]
    }

    /// Each source's settings, by the source's name: every source batond has, with or without settings.
    public static let settings: [String: [SourceSetting]] = [
        RecentDocuments.name: [], Media.name: [], Clipboard.name: Clipboard.settings, Terminals.name: Terminals.settings,
    ]
}
