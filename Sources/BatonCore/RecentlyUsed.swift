/// The documents in `recently-used.xbel`, the freedesktop desktop-bookmark file that GTK's
/// `RecentManager` (and GLib's `GBookmarkFile`) writes to `$XDG_DATA_HOME`: each a
/// `<bookmark href=URI>` with an optional `<title>`, a MIME type, and the apps that used it,
/// each with when it last did (`bookmark:application name=… exec=… modified=…`).
///
/// A small reader for exactly that shape, not a general XML parser: elements and attributes
/// it does not know are skipped, and a bookmark it cannot read (no href, no time) is left out.
public enum RecentlyUsed {
    public struct Document: Equatable, Sendable {
        public var uri: String
        /// The `<title>`, if the app gave one.
        public var title: String?
        public var mimeType: String?
        /// The app that used it last: its name as recorded (an app id, a program name, or a
        /// readable name such as "Text Editor": GLib records `g_get_application_name()`).
        public var app: String?
        /// That app's command line as recorded: GLib's `'PROGRAM %u'`.
        public var exec: String?
        /// When it was last used, µs since the epoch: its app's `modified`, else the bookmark's.
        public var usedAt: UInt64

        public init(uri: String, title: String? = nil, mimeType: String? = nil, app: String? = nil, exec: String? = nil, usedAt: UInt64) {
            self.uri = uri
            self.title = title
            self.mimeType = mimeType
            self.app = app
            self.exec = exec
            self.usedAt = usedAt
        }

        /// What people see: the title, else the file's name (percent-decoded).
        public var displayName: String {
            if let title, !title.isEmpty { return title }
            let path = uri.split(separator: "?").first.map(String.init) ?? uri
            let name = path.split(separator: "/").last.map(String.init) ?? path
            return RecentlyUsed.percentDecoded(name)
        }
    }

    /// The documents the file lists, in its order.
    public static func documents(in text: String) -> [Document] {
        var documents: [Document] = []
        var current: (uri: String, modified: UInt64?, title: String?, mime: String?, apps: [(name: String, exec: String?, modified: UInt64?)])?
        var inTitle = false
        var scanner = TagScanner(text: Array(text.utf8))
        while let item = scanner.next() {
            switch item {
            case .open(let name, let attributes, let selfClosing):
                switch name {
                case "bookmark" where !selfClosing:
                    current = attributes["href"].map { (uri: $0, modified: attributes["modified"].flatMap(time), title: nil, mime: nil, apps: []) }
                case "title" where current != nil && !selfClosing:
                    inTitle = true
                case "mime:mime-type":
                    current?.mime = attributes["type"]
                case "bookmark:application":
                    if let app = attributes["name"] { current?.apps.append((app, attributes["exec"], attributes["modified"].flatMap(time))) }
                default: break
                }
            case .text(let text) where inTitle:
                let title = (current?.title ?? "") + text
                current?.title = title
            case .close("title"):
                inTitle = false
            case .close("bookmark"):
                if let bookmark = current {
                    let last = bookmark.apps.max { ($0.modified ?? 0) < ($1.modified ?? 0) }
                    if let usedAt = last?.modified ?? bookmark.modified {
                        documents.append(Document(
                            uri: bookmark.uri, title: bookmark.title, mimeType: bookmark.mime, app: last?.name, exec: last?.exec, usedAt: usedAt))
                    }
                }
                current = nil
            default: break
            }
        }
        return documents
    }

    /// `2026-11-26T05:53:20.293478Z` (the fraction optional) as µs since the epoch; nil otherwise.
    public static func time(_ text: String) -> UInt64? {
        let bytes = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[range] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        guard bytes.count >= 20, bytes[4] == 45, bytes[7] == 45, bytes[10] == 84, bytes[13] == 58, bytes[16] == 58, bytes.last == 90,
              let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61, year >= 1970 else { return nil }
        var micros = 0
        if bytes.count > 20 {
            guard bytes[19] == 46, (22...30).contains(bytes.count), let fraction = number(20..<(bytes.count - 1)) else { return nil }
            micros = fraction
            for _ in 0..<(6 - min(6, bytes.count - 21)) { micros *= 10 }
            for _ in 0..<max(0, bytes.count - 27) { micros /= 10 }
        } else if bytes[19] != 90 {
            return nil
        }
        // Days from the civil date (Howard Hinnant's algorithm).
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = ((days * 24 + hour) * 60 + minute) * 60 + second
        return UInt64(seconds) * 1_000_000 + UInt64(micros)
    }

    /// The path a `file:///` URI names on this machine, percent-decoded; nil for any other URI,
    /// and for one whose path would hold a NUL (no file has such a name).
    public static func localPath(_ uri: String) -> String? {
        guard uri.hasPrefix("file:///") else { return nil }
        let path = percentDecoded(String(uri.dropFirst("file://".count)))
        return path.contains("\0") ? nil : path
    }

    /// The name of the desktop entry a desktop id names, as the applications directories hold
    /// it without its suffix: "org.gnome.TextEditor.desktop" → "org.gnome.TextEditor".
    public static func entryName(_ desktopID: String) -> String {
        desktopID.hasSuffix(".desktop") ? String(desktopID.dropLast(".desktop".count)) : desktopID
    }

    /// `%20` and the like decoded; the text as it is where it is not valid.
    public static func percentDecoded(_ text: String) -> String {
        var bytes: [UInt8] = []
        var input = Array(text.utf8)[...]
        while let byte = input.popFirst() {
            if byte == 37, input.count >= 2, let value = UInt8(String(decoding: input.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(value)
                input = input.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self) ?? text
    }
}

/// Tags and text of an XML document, entities decoded; comments, processing instructions,
/// doctypes and CDATA skipped.
private struct TagScanner {
    enum Item {
        case open(String, [String: String], selfClosing: Bool)
        case close(String)
        case text(String)
    }

    let text: [UInt8]
    var position = 0

    init(text: [UInt8]) { self.text = text }

    mutating func next() -> Item? {
        while position < text.count {
            guard text[position] == UInt8(ascii: "<") else {
                let start = position
                while position < text.count && text[position] != UInt8(ascii: "<") { position += 1 }
                return .text(Self.decoded(text[start..<position]))
            }
            if starts(with: "<!--") { skip(past: "-->"); continue }
            if starts(with: "<?") || starts(with: "<!") { skip(past: ">"); continue }
            return tag()
        }
        return nil
    }

    private func starts(with prefix: String) -> Bool {
        let bytes = Array(prefix.utf8)
        return text.count - position >= bytes.count && Array(text[position..<(position + bytes.count)]) == bytes
    }

    private mutating func skip(past end: String) {
        let bytes = Array(end.utf8)
        while position < text.count && !starts(with: end) { position += 1 }
        position = min(text.count, position + bytes.count)
    }

    private mutating func tag() -> Item? {
        position += 1  // <
        let closing = position < text.count && text[position] == UInt8(ascii: "/")
        if closing { position += 1 }
        let name = word()
        var attributes: [String: String] = [:]
        while position < text.count {
            skipSpaces()
            guard position < text.count else { return nil }
            switch text[position] {
            case UInt8(ascii: ">"):
                position += 1
                return closing ? .close(name) : .open(name, attributes, selfClosing: false)
            case UInt8(ascii: "/"):
                position += 1
                if position < text.count && text[position] == UInt8(ascii: ">") { position += 1 }
                return .open(name, attributes, selfClosing: true)
            default:
                let key = word()
                guard !key.isEmpty else { position += 1; continue }
                skipSpaces()
                guard position < text.count, text[position] == UInt8(ascii: "=") else { continue }
                position += 1
                skipSpaces()
                guard position < text.count, text[position] == UInt8(ascii: "\"") || text[position] == UInt8(ascii: "'") else { continue }
                let quote = text[position]
                position += 1
                let start = position
                while position < text.count && text[position] != quote { position += 1 }
                attributes[key] = Self.decoded(text[start..<position])
                position += 1
            }
        }
        return nil
    }

    private mutating func word() -> String {
        let start = position
        while position < text.count, !Self.isSpace(text[position]),
              ![UInt8(ascii: ">"), UInt8(ascii: "/"), UInt8(ascii: "=")].contains(text[position]) {
            position += 1
        }
        return String(decoding: text[start..<position], as: UTF8.self)
    }

    private mutating func skipSpaces() {
        while position < text.count && Self.isSpace(text[position]) { position += 1 }
    }

    private static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

    /// `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;`, `&#N;` and `&#xN;` decoded.
    private static func decoded(_ bytes: ArraySlice<UInt8>) -> String {
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.contains("&") else { return text }
        var out = ""
        var rest = text[...]
        while let ampersand = rest.firstIndex(of: "&") {
            out += rest[..<ampersand]
            guard let semicolon = rest[ampersand...].firstIndex(of: ";") else { break }
            let entity = rest[rest.index(after: ampersand)..<semicolon]
            switch entity {
            case "amp": out += "&"
            case "lt": out += "<"
            case "gt": out += ">"
            case "quot": out += "\""
            case "apos": out += "'"
            default:
                let scalar = entity.hasPrefix("#x") ? UInt32(entity.dropFirst(2), radix: 16) : entity.hasPrefix("#") ? UInt32(entity.dropFirst()) : nil
                if let scalar, let character = Unicode.Scalar(scalar) { out.unicodeScalars.append(character) } else { out += "&\(entity);" }
            }
            rest = rest[rest.index(after: semicolon)...]
        }
        return out + rest
    }
}
