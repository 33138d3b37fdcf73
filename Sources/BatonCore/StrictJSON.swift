/// A strict checker for activity payloads: RFC 8259 JSON whose top level is an
/// object, with no duplicate keys, no NaN or Infinity, no lone surrogates, no
/// `\u0000`, and limits on size and nesting.
///
/// Foundation's parsers accept some non-standard input and disagree on
/// duplicates (shared/FIELD-NOTES.md), so payloads are checked here, once, by
/// one scanner. It works over UTF-8 bytes with an explicit stack, so a payload
/// nested 100 000 deep is refused without deep recursion.
public enum StrictJSON {
    /// One top-level member of a payload: its decoded key and its value's JSON text, as written.
    public struct Member: Equatable, Sendable {
        public let key: String
        public let rawValue: String

        public init(key: String, rawValue: String) {
            self.key = key
            self.rawValue = rawValue
        }
    }

    /// Checks `text` and returns its top-level members in order.
    public static func parseObject(_ text: String, maxBytes: Int, maxDepth: Int) throws(BatonError) -> [Member] {
        let size = text.utf8.count
        guard size <= maxBytes else {
            // Scanned all the same (once, linearly) to name the keys that make it big.
            var scanner = Scanner(bytes: Array(text.utf8), maxDepth: maxDepth)
            let members = (try? scanner.scanTopLevelObject()) ?? []
            throw SizeReport.error("the payload", bytes: size, limit: maxBytes, keys: SizeReport.keys(of: members))
        }
        var scanner = Scanner(bytes: Array(text.utf8), maxDepth: maxDepth)
        return try scanner.scanTopLevelObject()
    }

    /// A payload whose top-level members are `base`'s with `changes` applied: a key in
    /// `changes` replaces the same key in place, new keys go at the end (like
    /// `addUserInfoEntries(from:)`).
    public static func merge(_ base: [Member], with changes: [Member]) -> String {
        var members = base
        for change in changes {
            if let index = members.firstIndex(where: { $0.key == change.key }) {
                members[index] = change
            } else {
                members.append(change)
            }
        }
        return serialize(members)
    }

    /// `{"key":value,…}` from members.
    public static func serialize(_ members: [Member]) -> String {
        "{" + members.map { quote($0.key) + ":" + $0.rawValue }.joined(separator: ",") + "}"
    }

    /// The text of a member's value when it is a JSON string (`"…"`, escapes decoded); nil for any other value.
    public static func string(_ rawValue: String) -> String? {
        var scanner = Scanner(bytes: Array(rawValue.utf8), maxDepth: 1)
        return scanner.scanWholeString()
    }

    /// A JSON string literal for `text`.
    public static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

private struct Scanner {
    let bytes: [UInt8]
    let maxDepth: Int
    var position = 0

    init(bytes: [UInt8], maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    private struct Frame {
        let isObject: Bool
        var keys: Set<String> = []
        var path: String
    }

    private func fail(_ reason: String) -> BatonError {
        .invalidPayload("\(reason) (at byte \(position))")
    }

    private mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    private func peek() -> UInt8? { position < bytes.count ? bytes[position] : nil }

    mutating func scanTopLevelObject() throws(BatonError) -> [StrictJSON.Member] {
        skipWhitespace()
        guard peek() == UInt8(ascii: "{") else {
            throw .invalidPayload("the payload must be a JSON object, like {\"id\": \"…\"}")
        }
        var members: [StrictJSON.Member] = []
        var stack: [Frame] = []
        var memberKey: String?
        var memberStart = 0

        // Each pass handles one value; containers push a frame and continue with their first element.
        var expectingKey = false
        while true {
            skipWhitespace()
            if expectingKey {
                guard let next = peek() else { throw fail("the payload ends in the middle") }
                guard next == UInt8(ascii: "\"") else { throw fail("expected a quoted key") }
                let key = try scanString()
                let frame = stack.count - 1
                guard stack[frame].keys.insert(key).inserted else {
                    throw fail("duplicate key \(StrictJSON.quote(key)) in \(stack[frame].path)")
                }
                skipWhitespace()
                guard peek() == UInt8(ascii: ":") else { throw fail("expected ':' after a key") }
                position += 1
                skipWhitespace()
                if stack.count == 1 {
                    memberKey = key
                    memberStart = position
                }
                expectingKey = false
            }

            // A value.
            guard let byte = peek() else { throw fail("the payload ends in the middle") }
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                guard stack.count < maxDepth else {
                    throw .invalidPayload("the payload is nested deeper than \(maxDepth) levels")
                }
                let isObject = byte == UInt8(ascii: "{")
                let path = stack.last.map { $0.path + (isObject ? "{}" : "[]") } ?? "the top-level object"
                stack.append(Frame(isObject: isObject, path: path))
                position += 1
                skipWhitespace()
                let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
                if peek() == close {
                    position += 1
                    stack.removeLast()
                } else {
                    expectingKey = isObject
                    continue
                }
            case UInt8(ascii: "\""):
                _ = try scanString()
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                try scanNumber()
            case UInt8(ascii: "t"): try scanLiteral("true")
            case UInt8(ascii: "f"): try scanLiteral("false")
            case UInt8(ascii: "n"): try scanLiteral("null")
            case UInt8(ascii: "N"), UInt8(ascii: "I"):
                throw fail("NaN and Infinity are not JSON numbers")
            default:
                throw fail("unexpected character '\(String(decoding: [byte], as: UTF8.self))'")
            }

            // After a value: separators and closing brackets, possibly several.
            while true {
                if stack.isEmpty {
                    skipWhitespace()
                    guard position == bytes.count else { throw fail("unexpected text after the payload's object") }
                    return members
                }
                if stack.count == 1, let key = memberKey {
                    members.append(.init(key: key, rawValue: String(decoding: bytes[memberStart..<position], as: UTF8.self)))
                    memberKey = nil
                }
                skipWhitespace()
                guard let next = peek() else { throw fail("the payload ends in the middle") }
                let frame = stack[stack.count - 1]
                if next == UInt8(ascii: ",") {
                    position += 1
                    expectingKey = frame.isObject
                    break
                }
                guard next == (frame.isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) else {
                    throw fail(frame.isObject ? "expected ',' or '}'" : "expected ',' or ']'")
                }
                position += 1
                stack.removeLast()
            }
        }
    }

    private mutating func scanLiteral(_ literal: StaticString) throws(BatonError) {
        let count = literal.utf8CodeUnitCount
        let expected = UnsafeBufferPointer(start: literal.utf8Start, count: count)
        guard position + count <= bytes.count, bytes[position..<position + count].elementsEqual(expected) else {
            throw fail("unexpected word; JSON allows true, false and null")
        }
        position += count
    }

    private mutating func scanDigits() -> Int {
        let start = position
        while let byte = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { position += 1 }
        return position - start
    }

    private mutating func scanNumber() throws(BatonError) {
        if peek() == UInt8(ascii: "-") { position += 1 }
        if peek() == UInt8(ascii: "I") { throw fail("NaN and Infinity are not JSON numbers") }
        if peek() == UInt8(ascii: "0") {
            position += 1
            if let byte = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                throw fail("numbers cannot have leading zeros")
            }
        } else if scanDigits() == 0 {
            throw fail("expected a digit")
        }
        if peek() == UInt8(ascii: ".") {
            position += 1
            guard scanDigits() > 0 else { throw fail("expected a digit after '.'") }
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            position += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { position += 1 }
            guard scanDigits() > 0 else { throw fail("expected a digit in the exponent") }
        }
    }

    private mutating func scanHex4() throws(BatonError) -> UInt32 {
        guard position + 4 <= bytes.count else { throw fail("a \\u escape needs four hex digits") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw fail("a \\u escape needs four hex digits")
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }

    /// Scans a string starting at its opening quote and returns it decoded.
    /// The string that is the whole of `bytes`, or nil.
    mutating func scanWholeString() -> String? {
        guard peek() == UInt8(ascii: "\""), let text = try? scanString(), position == bytes.count else { return nil }
        return text
    }

    private mutating func scanString() throws(BatonError) -> String {
        position += 1
        var decoded: [UInt8] = []
        while true {
            guard let byte = peek() else { throw fail("unterminated string") }
            position += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(decoding: decoded, as: UTF8.self)
            case 0..<0x20:
                throw fail("control characters must be escaped in strings")
            case UInt8(ascii: "\\"):
                guard let escape = peek() else { throw fail("unterminated escape") }
                position += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escape)
                case UInt8(ascii: "b"): decoded.append(0x08)
                case UInt8(ascii: "f"): decoded.append(0x0C)
                case UInt8(ascii: "n"): decoded.append(0x0A)
                case UInt8(ascii: "r"): decoded.append(0x0D)
                case UInt8(ascii: "t"): decoded.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try scanHex4()
                    if (0xDC00...0xDFFF).contains(scalar) { throw fail("a low surrogate without a high one") }
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard peek() == UInt8(ascii: "\\"), position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: "u") else {
                            throw fail("a high surrogate without a low one")
                        }
                        position += 2
                        let low = try scanHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("a high surrogate without a low one") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    if scalar == 0 { throw fail("\\u0000 is not allowed: C programs would cut the text there") }
                    guard let unicode = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                    decoded.append(contentsOf: String(unicode).utf8)
                default:
                    throw fail("invalid escape '\\\(String(decoding: [escape], as: UTF8.self))'")
                }
            default:
                decoded.append(byte)
            }
        }
    }
}

extension [StrictJSON.Member] {
    /// The value of the member named `key` when it is a JSON string (escapes decoded); nil when
    /// there is none or it is another kind of value.
    public func string(_ key: String) -> String? {
        first { $0.key == key }.flatMap { StrictJSON.string($0.rawValue) }
    }

    /// The value of the member named `key` when it is a JSON number; nil otherwise.
    public func number(_ key: String) -> Double? {
        first { $0.key == key }.flatMap { Double($0.rawValue) }
    }
}
