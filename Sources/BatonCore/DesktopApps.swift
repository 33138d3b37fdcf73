import Glibc

/// The XDG base directories for data: `$XDG_DATA_HOME` (or `~/.local/share`), then each of
/// `$XDG_DATA_DIRS` (or `/usr/local/share:/usr/share`); relative ones are ignored, as the
/// specification says.
public enum XDGData {
    /// Most important first.
    public static func directories(environment: [String: String]) -> [String] {
        let dataDirs = (environment["XDG_DATA_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share")
            .split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
        return [home(environment: environment)].compactMap { $0 } + dataDirs
    }

    /// `$XDG_DATA_HOME`, or `~/.local/share`; nil when neither is known.
    public static func home(environment: [String: String]) -> String? {
        let home = environment["HOME"] ?? ""
        return environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? (home.isEmpty ? nil : home + "/.local/share")
    }

    /// The user's `recently-used.xbel` (GTK's recent documents), in the data home.
    public static func recentlyUsedPath(environment: [String: String]) -> String? {
        home(environment: environment).map { $0 + "/recently-used.xbel" }
    }

    /// Where desktop entries are: the `applications` directory of each, most important first.
    public static func applicationDirectories(environment: [String: String]) -> [String] {
        directories(environment: environment).map { $0 + "/applications" }
    }
}

/// An installed app as its desktop entry describes it (the freedesktop Desktop Entry
/// Specification): `ID.desktop` in the first applications directory that has it.
///
/// Read when asked, not kept: a search shows a handful of results, and an app installed since
/// batond started shows at once.
public struct DesktopApp: Equatable, Sendable {
    /// The desktop id without `.desktop`: "org.gnome.TextEditor".
    public var id: String
    /// The entry's file.
    public var path: String
    /// `Name`, untranslated.
    public var name: String?
    /// A themed icon's name, or an absolute file path.
    public var icon: String?
    public var exec: String?
    public var tryExec: String?
    public var startupWMClass: String?
    public var dbusActivatable = false
    /// `MimeType`: the types it opens.
    public var mimeTypes: [String] = []
    /// `Hidden=true`: as good as deleted, the specification says.
    public var hidden = false

    public var desktopID: String { id + ".desktop" }

    /// The entry of `id` ("org.gnome.TextEditor" or "org.gnome.TextEditor.desktop"), or nil
    /// when none is installed (or the first found is hidden).
    public static func find(id: String, in applicationDirectories: [String]) -> DesktopApp? {
        let id = RecentlyUsed.entryName(id)
        guard !id.isEmpty, !id.contains("/") else { return nil }
        for directory in applicationDirectories {
            let path = directory + "/" + id + ".desktop"
            if let text = readSmallFile(path) {
                let app = parse(text, id: id, path: path)
                return app.hidden ? nil : app
            }
        }
        return nil
    }

    /// The app that recorded a recent document, found as GLib and the desktop find it from what
    /// GLib writes (`bookmark:application`): `name` is `g_get_application_name()` — an app id, a
    /// program name, or a readable name such as "Text Editor" — and `exec` is
    /// `'PROGRAM %u'`, the program that ran. In that order: either as a desktop id; an entry whose
    /// `Exec` or `TryExec` runs that program; one whose `StartupWMClass` is either; last, one
    /// whose `Name` is the name.
    public static func find(recordedName name: String?, exec: String?, in applicationDirectories: [String]) -> DesktopApp? {
        let program = exec.flatMap(Self.program)
        for id in [name, program].compactMap({ $0 }) {
            if let app = find(id: id, in: applicationDirectories) { return app }
        }
        let installed = all(in: applicationDirectories)
        if let program {
            let base = basename(program)
            if let app = installed.first(where: { app in
                [app.exec.flatMap(Self.program), app.tryExec].contains { $0.map { $0 == program || basename($0) == base } ?? false }
            }) { return app }
        }
        let names = [name, program].compactMap { $0?.lowercased() }
        if let app = installed.first(where: { app in app.startupWMClass.map { names.contains($0.lowercased()) } ?? false }) { return app }
        guard let name = name?.lowercased() else { return nil }
        return installed.first { $0.name?.lowercased() == name }
    }

    /// Every installed entry, by desktop id (the first found of each id wins; hidden ones left out).
    public static func all(in applicationDirectories: [String]) -> [DesktopApp] {
        var seen: Set<String> = []
        var apps: [DesktopApp] = []
        for directory in applicationDirectories {
            for file in fileNames(in: directory).sorted() where file.hasSuffix(".desktop") {
                let id = RecentlyUsed.entryName(file)
                guard seen.insert(id).inserted, let text = readSmallFile(directory + "/" + file) else { continue }
                let app = parse(text, id: id, path: directory + "/" + file)
                if !app.hidden { apps.append(app) }
            }
        }
        return apps
    }

    /// The keys of the `[Desktop Entry]` group (untranslated values, escapes undone).
    public static func parse(_ text: String, id: String, path: String) -> DesktopApp {
        var app = DesktopApp(id: id, path: path)
        for (key, raw) in mainGroup(text) {
            let value = unescaped(String(raw))
            switch key {
            case "Name" where app.name == nil: app.name = value
            case "Icon" where app.icon == nil && !value.isEmpty: app.icon = value
            case "Exec" where app.exec == nil: app.exec = value
            case "TryExec" where app.tryExec == nil && !value.isEmpty: app.tryExec = value
            case "StartupWMClass" where app.startupWMClass == nil && !value.isEmpty: app.startupWMClass = value
            case "DBusActivatable": app.dbusActivatable = value == "true"
            case "MimeType": app.mimeTypes = value.split(separator: ";").map(String.init)
            case "Hidden": app.hidden = value == "true"
            default: break
            }
        }
        return app
    }

    /// The keys and values of a desktop entry's (or KConfig file's) `[Desktop Entry]` group,
    /// spaces around them trimmed, as they are written (escapes not undone), in order.
    static func mainGroup(_ text: String) -> [(key: Substring, value: Substring)] {
        var entries: [(key: Substring, value: Substring)] = []
        var inMainGroup = false
        for line in text.split(whereSeparator: \.isNewline) {
            if line.hasPrefix("[") {
                inMainGroup = line == "[Desktop Entry]"
                continue
            }
            guard inMainGroup, !line.hasPrefix("#"), let equals = line.firstIndex(of: "=") else { continue }
            entries.append((line[..<equals].trimmingSpaces, line[line.index(after: equals)...].trimmingSpaces))
        }
        return entries
    }

    /// The program a command line runs: its first word, shell quoting undone (GLib quotes the
    /// whole `exec` it records: `'gnome-text-editor %u'`), field codes left out; nil when empty.
    public static func program(_ commandLine: String) -> String? {
        var words = shellWords(commandLine)
        // A recorded exec quoted whole is one word holding the command line.
        if words.count == 1, let only = words.first, only.contains(" ") { words = shellWords(only) }
        return words.first { !$0.hasPrefix("%") && !$0.isEmpty }
    }

    /// Words as a POSIX shell splits them: single quotes, double quotes and backslashes undone.
    static func shellWords(_ text: String) -> [String] {
        var words: [String] = []
        var word: String?
        var quote: Character?
        var characters = text.makeIterator()
        while let character = characters.next() {
            switch (quote, character) {
            case (nil, "'"), (nil, "\""):
                quote = character
                word = word ?? ""
            case ("'", "'"), ("\"", "\""):
                quote = nil
            case (nil, "\\"), ("\"", "\\"):
                if let next = characters.next() { word = (word ?? "") + String(next) }
            case (nil, " "), (nil, "\t"):
                if let done = word { words.append(done) }
                word = nil
            default:
                word = (word ?? "") + String(character)
            }
        }
        if let done = word { words.append(done) }
        return words
    }

    /// A value with the escapes of desktop entries (`\s`, `\n`, `\t`, `\r`, `\\`) undone.
    static func unescaped(_ value: String) -> String {
        guard value.contains("\\") else { return value }
        var out = ""
        var characters = value.makeIterator()
        while let character = characters.next() {
            guard character == "\\", let next = characters.next() else { out.append(character); continue }
            switch next {
            case "s": out.append(" ")
            case "n": out.append("\n")
            case "t": out.append("\t")
            case "r": out.append("\r")
            case "\\": out.append("\\")
            default: out += "\\" + String(next)
            }
        }
        return out
    }

    private static func basename(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }

    /// Desktop entries are small; a file over 1 MiB is not one.
    static func readSmallFile(_ path: String, limit: Int = 1 << 20) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while bytes.count <= limit {
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        return bytes.count > limit ? nil : String(decoding: bytes, as: UTF8.self)
    }

    static func fileNames(in directory: String) -> [String] {
        guard let stream = opendir(directory) else { return [] }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}

extension RecentlyUsed {
    /// The app that opens a recent document's activity on this machine: the one its payload names
    /// (`app`, the desktop id its machine found), else the one the name and program GLib recorded
    /// (`app_name`, `app_program`) find here, as `DesktopApp.find(recordedName:exec:in:)` finds it.
    public static func app(for payload: [StrictJSON.Member], in applicationDirectories: [String]) -> DesktopApp? {
        if let id = payload.string("app"), let app = DesktopApp.find(id: id, in: applicationDirectories) { return app }
        let name = payload.string("app_name"), program = payload.string("app_program")
        guard name != nil || program != nil else { return nil }
        return DesktopApp.find(recordedName: name, exec: program, in: applicationDirectories)
    }

    /// The app a recent document's payload names, as a person reads it: "Text Editor
    /// (org.gnome.TextEditor.desktop)", "Text Editor (gnome-text-editor)"; nil when it names none.
    public static func appDescription(for payload: [StrictJSON.Member]) -> String? {
        let name = payload.string("app_name"), detail = payload.string("app") ?? payload.string("app_program")
        switch (name, detail) {
        case let (name?, detail?) where name != detail && name + ".desktop" != detail: return "\(name) (\(detail))"
        case let (name?, _): return name
        case let (nil, detail?): return detail
        case (nil, nil): return nil
        }
    }
}
