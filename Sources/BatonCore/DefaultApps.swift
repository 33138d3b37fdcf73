/// The app the desktop opens a file with, as the freedesktop specifications say: the file's
/// MIME type from its name (shared-mime-info's `mime/globs2` in the data directories), then the
/// default for that type (`[Default Applications]` of the `mimeapps.list` files, the user's
/// config first), else an installed app whose entry lists the type.
public enum DefaultApps {
    /// The MIME types a file name's extension gives, most likely first (`*.ogg` is audio and
    /// video); empty when no glob of the form `*.ext` matches. Matched without regard to case.
    public static func mimeTypes(ofFileNamed name: String, dataDirectories: [String]) -> [String] {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return [] }
        let pattern = "*" + name[dot...].lowercased()
        for directory in dataDirectories {
            guard let text = DesktopApp.readSmallFile(directory + "/mime/globs2") else { continue }
            // Lines are "weight:type:glob[:flags]", sorted by weight already.
            let types = text.split(separator: "\n").compactMap { line -> String? in
                let fields = line.split(separator: ":", omittingEmptySubsequences: false)
                guard fields.count >= 3, !line.hasPrefix("#"), fields[2].lowercased() == pattern else { return nil }
                return String(fields[1])
            }
            if !types.isEmpty { return types }
        }
        return []
    }

    /// The desktop ids `mimeapps.list` names as the default for `type`, in the order the
    /// specification reads them: `configDirectories` (the user's, then the system's), then the
    /// `applications` directories.
    public static func defaults(for type: String, configDirectories: [String], applicationDirectories: [String]) -> [String] {
        (configDirectories + applicationDirectories).flatMap { directory -> [String] in
            guard let text = DesktopApp.readSmallFile(directory + "/mimeapps.list") else { return [] }
            var inDefaults = false
            for line in text.split(whereSeparator: \.isNewline) {
                if line.hasPrefix("[") { inDefaults = line == "[Default Applications]"; continue }
                guard inDefaults, let equals = line.firstIndex(of: "="), line[..<equals].trimmingSpaces == type else { continue }
                return line[line.index(after: equals)...].split(separator: ";").map { String($0.trimmingSpaces) }.filter { !$0.isEmpty }
            }
            return []
        }
    }

    /// The app that opens a file named `name`: the default for its type, else the first
    /// installed app (by id) whose entry lists the type; nil when none does.
    public static func app(forFileNamed name: String, configDirectories: [String], applicationDirectories: [String]) -> DesktopApp? {
        let dataDirectories = applicationDirectories.map { $0.hasSuffix("/applications") ? String($0.dropLast("/applications".count)) : $0 }
        let types = mimeTypes(ofFileNamed: name, dataDirectories: dataDirectories)
        for type in types {
            for id in defaults(for: type, configDirectories: configDirectories, applicationDirectories: applicationDirectories) {
                if let app = DesktopApp.find(id: id, in: applicationDirectories) { return app }
            }
        }
        let installed = DesktopApp.all(in: applicationDirectories)
        for type in types {
            if let app = installed.first(where: { $0.exec != nil && $0.mimeTypes.contains(type) }) { return app }
        }
        return nil
    }
}

/// The XDG base directories for configuration: `$XDG_CONFIG_HOME` (or `~/.config`), then each of
/// `$XDG_CONFIG_DIRS` (or `/etc/xdg`); relative ones are ignored.
public enum XDGConfig {
    public static func directories(environment: [String: String]) -> [String] {
        let home = environment["HOME"] ?? ""
        let configHome = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? (home.isEmpty ? nil : home + "/.config")
        let configDirs = (environment["XDG_CONFIG_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/etc/xdg")
            .split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
        return [configHome].compactMap { $0 } + configDirs
    }
}
