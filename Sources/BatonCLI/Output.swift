import BatonCore
import DBus
import Glibc

/// "1 scene", "3 scenes", "0 scenes".
func counted(_ count: some BinaryInteger, _ one: String, _ many: String) -> String {
    count == 1 ? "1 \(one)" : "\(count) \(many)"
}

/// How results are printed: tables for people, JSON for scripts.
struct Output {
    let json: Bool
    let color: Bool

    init(json: Bool, noColor: Bool) {
        self.json = json
        // Colour only on a terminal, and never when NO_COLOR is set (no-color.org). One
        // getenv: copying the whole environment into a dictionary was 4% of `baton types list`.
        color = !json && !noColor && isatty(1) == 1 && getenv("NO_COLOR") == nil
    }

    func bold(_ text: String) -> String { color ? "\u{1B}[1m\(text)\u{1B}[0m" : text }
    func dim(_ text: String) -> String { color ? "\u{1B}[2m\(text)\u{1B}[0m" : text }

    /// Prints rows under headers, each column as wide as its widest cell.
    func table(_ headers: [String], _ rows: [[String]]) {
        guard !rows.isEmpty else { return }
        var widths = headers.map(\.count)
        for row in rows {
            for (index, cell) in row.enumerated() where index < widths.count { widths[index] = max(widths[index], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { index, cell in
                index == cells.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] - cell.count)
            }.joined(separator: "  ")
        }
        print(bold(line(headers)))
        for row in rows { print(line(row)) }
    }
}

/// JSON text for D-Bus values, without Foundation (whose start-up alone costs
/// several milliseconds): records become objects, `payload` fields stay raw JSON.
enum JSONText {
    static func value(_ value: DBusValue, rawJSONKeys: Set<String> = ["payload"]) -> String {
        switch value.unwrapped {
        case .boolean(let v): return v ? "true" : "false"
        case .byte(let v): return String(v)
        case .int16(let v): return String(v)
        case .uint16(let v): return String(v)
        case .int32(let v): return String(v)
        case .uint32(let v): return String(v)
        case .int64(let v): return String(v)
        case .uint64(let v): return String(v)
        case .double(let v): return v.isFinite ? "\(v)" : "null"
        case .string(let v): return StrictJSON.quote(v)
        case .objectPath(let v): return StrictJSON.quote(v.text)
        case .signature(let v): return StrictJSON.quote(v.text)
        case .unixFD: return "null"  // batond sends none; a descriptor means nothing in a script's JSON
        case .array(_, let values): return "[" + values.map { Self.value($0, rawJSONKeys: rawJSONKeys) }.joined(separator: ",") + "]"
        case .bytes(let bytes): return "[" + bytes.map { String($0) }.joined(separator: ",") + "]"
        case .structure(let values): return "[" + values.map { Self.value($0, rawJSONKeys: rawJSONKeys) }.joined(separator: ",") + "]"
        case .dictionary(_, _, let entries):
            let members = entries.map { entry -> String in
                let key = entry.key.unwrapped.stringValue ?? Self.value(entry.key)
                if rawJSONKeys.contains(key), let raw = entry.value.unwrapped.stringValue {
                    return StrictJSON.quote(key) + ":" + raw
                }
                return StrictJSON.quote(key) + ":" + Self.value(entry.value, rawJSONKeys: rawJSONKeys)
            }
            return "{" + members.joined(separator: ",") + "}"
        case .variant(let inner): return Self.value(inner, rawJSONKeys: rawJSONKeys)
        }
    }
}
