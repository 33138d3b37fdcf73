import Glibc
import Synchronization

/// Identifiers: lowercase UUID strings, as the D-Bus contract fixes. New ones are
/// version 7 (RFC 9562): time-ordered, then random.
///
/// Time order matters to the database: ids are a unique index, and random (version 4)
/// ids put every new activity, and every one the quota trims, on a different index
/// page, so each commit wrote about two pages per call. Version 7 ids land on the
/// same few pages. They reveal their creation time to the millisecond, which every
/// record carries as `created_at` anyway.
public enum Identifier {
    /// A new identifier for something created at `microseconds` since the Unix epoch.
    public static func make(at microseconds: UInt64 = WallClock.nowMicroseconds()) -> String {
        // 48 bits of milliseconds, the version, 12 bits of the sub-millisecond time
        // (RFC 9562 method 3, so ids made in one millisecond still sort by time), the
        // variant and 62 random bits: one getrandom(2) call.
        var generator = SystemRandomNumberGenerator()
        let milliseconds = microseconds / 1_000 & 0xFFFF_FFFF_FFFF
        let fraction = microseconds % 1_000 * 4_096 / 1_000
        let high = milliseconds << 16 | 0x7000 | fraction
        let low = (generator.next() as UInt64) & ~(0xC0 << 56) | (0x80 << 56)
        let digits = Array("0123456789abcdef".utf8)
        return String(unsafeUninitializedCapacity: 36) { text in
            var index = 0
            for word in [high, low] {
                for nibble in 0..<16 {
                    if index == 8 || index == 13 || index == 18 || index == 23 {
                        text[index] = UInt8(ascii: "-")
                        index += 1
                    }
                    text[index] = digits[Int(word >> UInt64(60 - 4 * nibble) & 0xF)]
                    index += 1
                }
            }
            return index
        }
    }

    /// The lowercase form of the beginning of an identifier (1 to 36 of its characters),
    /// as a person types it to name one id among others.
    public static func normalizePrefix(_ text: String) throws(BatonError) -> String {
        let lowered = text.lowercased()
        guard (1...36).contains(lowered.utf8.count),
              lowered.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) || $0 == UInt8(ascii: "-") })
        else {
            throw .invalidArgument("id_prefix '\(printable(text))' is not the beginning of an id: 1 to 36 of 0-9, a-f and -")
        }
        return lowered
    }

    /// The canonical (lowercase) form of an identifier that came from outside.
    public static func normalize(_ text: String, what: String = "id") throws(BatonError) -> String {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else {
            throw .invalidArgument("\(what) '\(printable(text))' is not an id: ids look like 3f2a9c1e-…, 36 characters")
        }
        var out: [UInt8] = []
        out.reserveCapacity(36)
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == UInt8(ascii: "-") else { throw .invalidArgument("\(what) '\(printable(text))' is not an id") }
                out.append(byte)
                continue
            }
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): out.append(byte)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): out.append(byte + 32)
            default: throw .invalidArgument("\(what) '\(printable(text))' is not an id")
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Wall-clock time in the contract's unit: microseconds since the Unix epoch.
public enum WallClock {
    public static func nowMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
    }

    /// A time as people read it in a sentence: `2026-11-24 07:55:01 UTC`.
    public static func text(_ microseconds: UInt64) -> String {
        var seconds = time_t(microseconds / 1_000_000)
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return "\(microseconds) µs after the epoch" }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) UTC"
    }
}

/// Checks on the names and texts callers send.
public enum Validate {
    /// The longest `request_id`, in bytes.
    public static let requestIDBytes = 128

    /// A write's `request_id` option: 1 to 128 bytes of text without NUL; nil when absent.
    public static func requestID(_ options: [String: String]) throws(BatonError) -> String? {
        guard let value = options["request_id"] else { return nil }
        guard !value.isEmpty, value.utf8.count <= requestIDBytes else {
            throw .invalidArgument("request_id must be 1 to \(requestIDBytes) bytes, not \(value.utf8.count); a UUID is a good one")
        }
        try text(value, what: "request_id", limit: requestIDBytes)
        return value
    }

    /// Activity types and app ids are reverse-DNS names: `com.raywenderlich.hawknotes`.
    public static func reverseDNS(_ text: String, what: String, limits: Limits) throws(BatonError) {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty else { throw .invalidArgument("\(what) is empty") }
        guard bytes.count <= limits.nameBytes else {
            throw .invalidArgument("\(what) is \(bytes.count) bytes; the limit is \(limits.nameBytes)")
        }
        let elements = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        let allowed: (UInt8) -> Bool = { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"): true
            default: false
            }
        }
        guard elements.count >= 2, elements.allSatisfy({ !$0.isEmpty && $0.allSatisfy(allowed) }) else {
            throw .invalidArgument(
                "\(what) '\(printable(text))' is not a reverse-DNS name like com.example.app (letters, digits, '-', '_', dots between)")
        }
    }

    /// Text that travels to other programs: no NUL, within `limit` bytes.
    ///
    /// `what` names the text in the error, and is built only for one: callers quote the
    /// text itself, and quoting every storage key of every scene written showed in the
    /// profile of Continue with a handler.
    public static func text(_ text: String, what: @autoclosure () -> String, limit: Int) throws(BatonError) {
        if containsNUL(text) { throw .invalidArgument("\(what()) contains a NUL byte") }
        let size = text.utf8.count
        if size > limit { throw .quotaExceeded("\(what()) is \(size) bytes; the limit is \(limit)") }
    }

    /// A web page's address (`webpage_url`): an http or https URL without spaces or control characters.
    public static func webPageURL(_ url: String) throws(BatonError) {
        let lowered = url.lowercased()
        guard lowered.hasPrefix("https://") || lowered.hasPrefix("http://"),
              !url.unicodeScalars.contains(where: { $0.value <= 0x20 }) else {
            throw .invalidArgument("webpage_url must be an http or https URL without spaces, not '\(printable(url))'")
        }
    }

    /// Words and keys that are stored joined by a control character must not hold one.
    public static func noControlCharacters(_ text: String, what: @autoclosure () -> String) throws(BatonError) {
        if text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw .invalidArgument("\(what()) contains a control character")
        }
    }

    /// A scene storage key: non-empty text within the name limit.
    public static func storageKey(_ key: String, limits: Limits) throws(BatonError) {
        guard !key.isEmpty else { throw .invalidArgument("a storage key cannot be empty") }
        try text(key, what: "storage key '\(printable(key))'", limit: limits.nameBytes)
    }

    /// `true` or `false`, nothing else.
    public static func boolean(_ text: String, option: String) throws(BatonError) -> Bool {
        switch text {
        case "true": return true
        case "false": return false
        default: throw .invalidArgument("option \(option) must be true or false, not '\(printable(text))'")
        }
    }
}

/// True when `text` holds a NUL byte: memchr over the string's bytes. The generic
/// `text.utf8.contains(0)` is a loop of about 30 instructions a byte.
func containsNUL(_ text: String) -> Bool {
    var text = text
    return text.withUTF8 { bytes in bytes.baseAddress.map { memchr($0, 0, bytes.count) != nil } ?? false }
}

/// Text safe to quote in an error message: no control characters, at most 80 characters.
public func printable(_ text: String) -> String {
    var out = ""
    for scalar in text.unicodeScalars.prefix(80) {
        if scalar.value < 0x20 || scalar.value == 0x7F {
            out += "\\u{\(String(scalar.value, radix: 16))}"
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    return text.unicodeScalars.count > 80 ? out + "…" : out
}

/// The process environment, read without Foundation (whose start-up cost the CLI avoids).
public enum ProcessEnvironment {
    public static func current() -> [String: String] {
        var result: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.firstIndex(of: "=") {
                result[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            entry += 1
        }
        return result
    }
}
