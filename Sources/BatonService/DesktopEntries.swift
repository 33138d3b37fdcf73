import Foundation

/// The XDG base directories for data: `$XDG_DATA_HOME` (or `~/.local/share`), then each of
/// `$XDG_DATA_DIRS` (or `/usr/local/share:/usr/share`); relative ones are ignored, as the
/// specification says.
public enum XDGData {
    /// Most important first.
    public static func directories(environment: [String: String]) -> [String] {
        let home = environment["HOME"] ?? ""
        let dataHome = environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? (home.isEmpty ? nil : home + "/.local/share")
        let dataDirs = (environment["XDG_DATA_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share")
            .split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
        return [dataHome].compactMap { $0 } + dataDirs
    }
}

/// What the desktop knows of an app: its name and icon, from its desktop entry,
/// `APP_ID.desktop` in the `applications` directory of the XDG data directories (the first
/// found wins, as for the desktop; Flatpak's exports are among them where Flatpak is used).
struct AppEntry: Sendable, Equatable {
    var name: String
    /// A themed icon's name, or an absolute file path.
    var icon: String?

    /// Read when asked, not kept: a search shows a handful of results, and an app installed
    /// since batond started shows at once.
    static func find(_ appID: String, in applicationDirectories: [String]) -> AppEntry? {
        for directory in applicationDirectories {
            if let text = try? String(contentsOfFile: directory + "/" + appID + ".desktop", encoding: .utf8) { return parse(text) }
        }
        return nil
    }

    /// `Name` and `Icon` of the `[Desktop Entry]` group (the untranslated name); nil without a name.
    static func parse(_ text: String) -> AppEntry? {
        var inMainGroup = false
        var name: String?
        var icon: String?
        for line in text.split(whereSeparator: \.isNewline) {
            if line.hasPrefix("[") {
                inMainGroup = line == "[Desktop Entry]"
                continue
            }
            guard inMainGroup, let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces), value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if key == "Name", name == nil { name = value }
            if key == "Icon", icon == nil, !value.isEmpty { icon = value }
        }
        return name.map { AppEntry(name: $0, icon: icon) }
    }
}
