/// A copy of the clipboard that crosses machines (the clipboard source): text as UTF-8, or an
/// image as PNG. Never stored in the clear: sealed before it is written, held in memory after.
public struct ClipboardCopy: Sendable, Equatable {
    /// The two kinds that cross: what the agent reads from the clipboard, and offers.
    public static let text = "text/plain;charset=utf-8"
    public static let png = "image/png"
    public static let kinds = [text, png]

    public var id: String
    /// `ClipboardCopy.text` or `ClipboardCopy.png`.
    public var mime: String
    public var content: [UInt8]
    /// When it was copied, and until when the other machines offer it (µs since the epoch, by
    /// the clock of the machine that copied it).
    public var madeAt: UInt64
    public var expiresAt: UInt64
    /// The device that copied it; empty for this machine's.
    public var device: String

    public init(id: String, mime: String, content: [UInt8], madeAt: UInt64, expiresAt: UInt64, device: String = "") {
        self.id = id
        self.mime = mime
        self.content = content
        self.madeAt = madeAt
        self.expiresAt = expiresAt
        self.device = device
    }

    /// Checked as the bus checks a caller's input: an id, a kind that crosses, a content within
    /// `maxBytes` (and valid UTF-8 for text), a lifetime that ends after it began.
    public func validate(maxBytes: Int) throws(BatonError) {
        _ = try Identifier.normalize(id, what: "the copy's id")
        guard Self.kinds.contains(mime) else {
            throw .invalidArgument("a copy is \(Self.kinds.joined(separator: " or ")), not '\(printable(mime))'")
        }
        guard !content.isEmpty, content.count <= maxBytes else {
            throw .invalidArgument("a copy has 1 to \(maxBytes) bytes, not \(content.count)")
        }
        if mime == Self.text, String(validating: content, as: UTF8.self) == nil {
            throw .invalidArgument("a text copy is UTF-8")
        }
        guard expiresAt > madeAt else { throw .invalidArgument("a copy expires after it was made") }
    }
}
