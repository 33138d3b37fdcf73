import BatonCore

/// What the desktop knows of an app: its name and icon, from its desktop entry,
/// `APP_ID.desktop` in the `applications` directory of the XDG data directories (the first
/// found wins, as for the desktop; Flatpak's exports are among them where Flatpak is used).
struct AppEntry: Sendable, Equatable {
    var name: String
    /// A themed icon's name, or an absolute file path.
    var icon: String?

    static func find(_ appID: String, in applicationDirectories: [String]) -> AppEntry? {
        DesktopApp.find(id: appID, in: applicationDirectories).flatMap { app in app.name.map { AppEntry(name: $0, icon: app.icon) } }
    }

    /// What to call an app that has no desktop entry here, rather than its reverse-DNS id: the
    /// id's last part in words, "org.baton.RecentDocuments" → "Recent Documents",
    /// "com.raywenderlich.hawknotes" → "Hawknotes", "org.example.my-app" → "My App".
    static func readableName(_ appID: String) -> String {
        let last = appID.split(separator: ".").last.map(String.init) ?? appID
        var words: [String] = []
        var word = ""
        for character in last {
            if character == "-" || character == "_" || character == " " {
                if !word.isEmpty { words.append(word) }
                word = ""
            } else {
                if character.isUppercase, let previous = word.last, previous.isLowercase { words.append(word); word = "" }
                word.append(character)
            }
        }
        if !word.isEmpty { words.append(word) }
        guard !words.isEmpty else { return appID }
        return words.map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined(separator: " ")
    }
}
