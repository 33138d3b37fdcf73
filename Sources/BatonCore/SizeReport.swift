/// What an error over a size limit says, so that the app's developer can tell which key to
/// slim (Android's TransactionTooLargeException says only the total): the total, the limit
/// and the biggest keys with their sizes, biggest first.
public struct KeySize: Equatable, Sendable {
    public let key: String
    /// The key and its value as stored: for a payload member, `"key":value` in JSON.
    public let bytes: Int

    public init(key: String, bytes: Int) {
        self.key = key
        self.bytes = bytes
    }
}

public enum SizeReport {
    /// How many keys an error names.
    public static let keysNamed = 3

    /// `QuotaExceeded`: "the payload is 70.2 KiB (71 880 bytes); the limit is 64 KiB; biggest
    /// keys: blob 69 KiB, notes 1.1 KiB", with the keys as data too.
    public static func error(_ what: String, bytes: Int, limit: Int, keys: [KeySize]) -> BatonError {
        let biggest = Array(keys.sorted { ($0.bytes, $1.key) > ($1.bytes, $0.key) }.prefix(keysNamed))
        var message = "\(what) is \(text(bytes)) (\(bytes) bytes); the limit is \(text(limit))"
        if !biggest.isEmpty {
            message += "; biggest keys: " + biggest.map { "\(printable($0.key)) \(text($0.bytes))" }.joined(separator: ", ")
        }
        return BatonError(.quotaExceeded, message, biggestKeys: biggest)
    }

    /// A payload's top-level members as `KeySize`s.
    public static func keys(of members: [StrictJSON.Member]) -> [KeySize] {
        // "key": plus the value's text: what the member costs in the payload, near enough.
        members.map { KeySize(key: $0.key, bytes: $0.key.utf8.count + 3 + $0.rawValue.utf8.count) }
    }

    /// A size as people read it: bytes below 1 KiB, else KiB or MiB with at most one decimal.
    public static func text(_ bytes: Int) -> String {
        func scaled(_ unit: Int, _ name: String) -> String {
            let tenths = (bytes * 10 + unit / 2) / unit
            return tenths % 10 == 0 ? "\(tenths / 10) \(name)" : "\(tenths / 10).\(tenths % 10) \(name)"
        }
        if bytes < 1024 { return bytes == 1 ? "1 byte" : "\(bytes) bytes" }
        if bytes < 1024 * 1024 { return scaled(1024, "KiB") }
        return scaled(1024 * 1024, "MiB")
    }
}
