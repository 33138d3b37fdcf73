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
}
