import BatonCore
import Foundation
import Testing

/// The app a track plays in when the player that played it is not installed: the default for
/// the file's type as `mimeapps.list` says, else an app whose entry lists the type — laid out as
/// a desktop does (shared-mime-info's globs2 under the data directory, the user's config first).
struct DefaultAppsTests {
    static func entry(_ name: String, _ types: String) -> String {
        "[Desktop Entry]\nType=Application\nName=\(name)\nExec=\(name.lowercased()) %U\nMimeType=\(types)\n"
    }

    /// A data directory with globs2 and the entries, and a config directory with `mimeapps`
    /// (nil: none); removed after `body`, which gets (config directories, applications directories).
    func withDesktop(mimeapps: String?, _ body: ([String], [String]) throws -> Void) throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("baton-defaults-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let data = root.appendingPathComponent("data"), config = root.appendingPathComponent("config")
        for directory in ["mime", "applications"] {
            try FileManager.default.createDirectory(at: data.appendingPathComponent(directory), withIntermediateDirectories: true)
        }
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try "# glob patterns\n50:audio/x-wav:*.wav\n50:audio/ogg:*.ogg\n50:video/ogg:*.ogg\n"
            .write(to: data.appendingPathComponent("mime/globs2"), atomically: true, encoding: .utf8)
        for (id, text) in ["org.example.Amp": Self.entry("Amp", "audio/x-wav;audio/ogg;"), "org.example.Tube": Self.entry("Tube", "video/ogg;audio/x-wav;")] {
            try text.write(to: data.appendingPathComponent("applications/\(id).desktop"), atomically: true, encoding: .utf8)
        }
        if let mimeapps { try mimeapps.write(to: config.appendingPathComponent("mimeapps.list"), atomically: true, encoding: .utf8) }
        try body([config.path], [data.appendingPathComponent("applications").path])
    }

    @Test func theDefaultForTheTypeThenAnAppThatListsIt() throws {
        try withDesktop(mimeapps: "[Added Associations]\naudio/x-wav=org.example.Amp.desktop;\n[Default Applications]\naudio/x-wav=org.example.Missing.desktop;org.example.Tube.desktop;\n") { config, applications in
            #expect(DefaultApps.mimeTypes(ofFileNamed: "Field Recording.WAV", dataDirectories: [applications[0].replacingOccurrences(of: "/applications", with: "")]) == ["audio/x-wav"])
            // The first default that is installed; case does not matter in the extension.
            #expect(DefaultApps.app(forFileNamed: "a tone.WAV", configDirectories: config, applicationDirectories: applications)?.id == "org.example.Tube")
            // No default for the type: the first app (by id) that lists it.
            #expect(DefaultApps.app(forFileNamed: "song.ogg", configDirectories: config, applicationDirectories: applications)?.id == "org.example.Amp")
            #expect(DefaultApps.app(forFileNamed: "notes.txt", configDirectories: config, applicationDirectories: applications) == nil)
            #expect(DefaultApps.app(forFileNamed: "live", configDirectories: config, applicationDirectories: applications) == nil)
        }
    }

    @Test func aTrackPlaysInItsPlayerElseTheDefault() throws {
        try withDesktop(mimeapps: "[Default Applications]\naudio/x-wav=org.example.Tube.desktop\n") { config, applications in
            let track = MediaTrack(url: "file:///music/a%20tone.wav", positionUS: 42_000_000, lengthUS: 0, player: "org.example.Amp")
            #expect(track.app(in: applications, configDirectories: config)?.id == "org.example.Amp", "its own player, installed")
            var elsewhere = track
            elsewhere.player = "vlc"
            #expect(elsewhere.app(in: applications, configDirectories: config)?.id == "org.example.Tube", "vlc is not here: the default for audio/x-wav")
            #expect(elsewhere.obstacle(applicationDirectories: applications) == "the file /music/a tone.wav is not on this machine")
            var stream = elsewhere
            stream.url = "https://radio.example/live"
            #expect(stream.obstacle(applicationDirectories: applications) == nil, "a stream plays in any app that opens audio or video")
            #expect(stream.obstacle(applicationDirectories: []) == "neither vlc nor another media player is installed here")
        }
    }
}
