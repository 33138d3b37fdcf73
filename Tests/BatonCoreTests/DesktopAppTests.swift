@testable import BatonCore
import Foundation
import Testing

/// Finding the app that recorded a recent document as GLib records it (`name` =
/// `g_get_application_name()`, `exec` = `'PROGRAM %u'`) among desktop entries laid out as
/// Debian installs them.
struct DesktopAppTests {
    /// Applications directories (home first, then the system's) holding `entries` (file name →
    /// text) in the system one and `home` in the user's; removed after `body`.
    func withApplications(_ entries: [String: String], home: [String: String] = [:], _ body: ([String]) throws -> Void) throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("baton-apps-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let directories = ["home", "system"].map { root.appendingPathComponent($0).path }
        for (directory, files) in zip(directories, [home, entries]) {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            for (name, text) in files { try text.write(toFile: directory + "/" + name, atomically: true, encoding: .utf8) }
        }
        try body(directories)
    }

    static let textEditor = """
        [Desktop Entry]
        Name=Text Editor
        Name[de]=Texteditor
        Exec=gnome-text-editor %U
        TryExec=gnome-text-editor
        Icon=org.gnome.TextEditor
        DBusActivatable=true

        [Desktop Action new-window]
        Name=New Window
        Exec=other-program --new-window
        """

    @Test func theAppIsFoundByIdProgramWindowClassAndLastByName() throws {
        let entries = [
            "org.gnome.TextEditor.desktop": Self.textEditor,
            "libreoffice-writer.desktop": "[Desktop Entry]\nName=LibreOffice Writer\nExec=/usr/bin/libreoffice --writer %U\n",
            "org.example.Viewer.desktop": "[Desktop Entry]\nName=Viewer\nExec=env GDK_BACKEND=x11 viewer-bin %f\nStartupWMClass=Viewer-Bin\n",
            "org.example.Named.desktop": "[Desktop Entry]\nName=Quiet  Notes\nExec=qn\n",
        ]
        try withApplications(entries) { directories in
            func found(_ name: String?, _ exec: String?) -> String? {
                DesktopApp.find(recordedName: name, exec: exec, in: directories)?.desktopID
            }
            // GNOME Text Editor, as GLib records it: a readable name and its program.
            #expect(found("Text Editor", "'gnome-text-editor %u'") == "org.gnome.TextEditor.desktop")
            // An app id as its name (GtkApplication without g_set_application_name).
            #expect(found("org.gnome.TextEditor", "'whatever %u'") == "org.gnome.TextEditor.desktop")
            #expect(found("org.gnome.TextEditor.desktop", nil) == "org.gnome.TextEditor.desktop")
            // Exec with an absolute path; TryExec; not the entry's actions' Exec.
            #expect(found("LibreOffice", "'libreoffice %u'") == "libreoffice-writer.desktop")
            #expect(found(nil, "'/usr/bin/libreoffice %u'") == "libreoffice-writer.desktop")
            #expect(found("Something", "'other-program %u'") == nil)
            // StartupWMClass, whichever case; an Exec behind env is not read as the program.
            #expect(found("viewer-bin", "'viewer-bin %u'") == "org.example.Viewer.desktop")
            // Last: the name.
            #expect(found("quiet  notes", "'not-installed %u'") == "org.example.Named.desktop")
            #expect(found("Not Installed", "'not-installed %u'") == nil)
            #expect(found(nil, nil) == nil)
            #expect(found("../../etc/passwd", nil) == nil)
        }
    }

    @Test func theUsersEntryHidesTheSystemsAndHiddenMeansGone() throws {
        let home = ["org.gnome.TextEditor.desktop": "[Desktop Entry]\nName=My Editor\nExec=my-editor %U\n",
                    "libreoffice-writer.desktop": "[Desktop Entry]\nName=Writer\nHidden=true\n"]
        try withApplications(["org.gnome.TextEditor.desktop": Self.textEditor,
                              "libreoffice-writer.desktop": "[Desktop Entry]\nName=Writer\nExec=libreoffice %U\n"], home: home) { directories in
            let editor = DesktopApp.find(id: "org.gnome.TextEditor", in: directories)
            #expect(editor?.name == "My Editor" && editor?.path.hasPrefix(directories[0]) == true)
            #expect(DesktopApp.find(recordedName: "Text Editor", exec: "'gnome-text-editor %u'", in: directories) == nil,
                    "the user's own entry for that id runs another program")
            #expect(DesktopApp.find(id: "libreoffice-writer", in: directories) == nil)
            #expect(DesktopApp.find(recordedName: nil, exec: "'libreoffice %u'", in: directories) == nil)
        }
    }

    @Test func entriesAndCommandLinesAreReadAsTheSpecificationsSay() {
        let editor = DesktopApp.parse(Self.textEditor, id: "org.gnome.TextEditor", path: "/x")
        #expect(editor == DesktopApp(id: "org.gnome.TextEditor", path: "/x", name: "Text Editor", icon: "org.gnome.TextEditor",
                                     exec: "gnome-text-editor %U", tryExec: "gnome-text-editor", dbusActivatable: true))
        #expect(DesktopApp.parse("[Desktop Entry]\nName=A\\sB\n# Name=C\n", id: "a", path: "/a").name == "A B")
        #expect(DesktopApp.program("'gnome-text-editor %u'") == "gnome-text-editor")
        #expect(DesktopApp.program("'/opt/My App/bin/app' %u") == "/opt/My App/bin/app")
        #expect(DesktopApp.program("'/usr/bin/gedit %u'") == "/usr/bin/gedit")
        #expect(DesktopApp.program("\"quoted prog\" --flag") == "quoted prog")
        #expect(DesktopApp.program("%u") == nil)
        #expect(DesktopApp.program("") == nil)
    }

    @Test func aRecentDocumentsAppIsNamedAsAPersonReadsIt() throws {
        func members(_ json: String) throws -> [StrictJSON.Member] { try StrictJSON.parseObject(json, maxBytes: 4096, maxDepth: 4) }
        #expect(RecentlyUsed.appDescription(for: try members(#"{"app":"org.gnome.TextEditor.desktop","app_name":"Text Editor"}"#))
            == "Text Editor (org.gnome.TextEditor.desktop)")
        #expect(RecentlyUsed.appDescription(for: try members(#"{"app_name":"Text Editor","app_program":"gnome-text-editor"}"#))
            == "Text Editor (gnome-text-editor)")
        #expect(RecentlyUsed.appDescription(for: try members(#"{"app_name":"gedit","app_program":"gedit"}"#)) == "gedit")
        #expect(RecentlyUsed.appDescription(for: try members(#"{"uri":"file:///a"}"#)) == nil)
        try withApplications(["org.gnome.TextEditor.desktop": Self.textEditor]) { directories in
            // Found here from what was recorded, though the machine that recorded it had no entry.
            let recorded = try members(#"{"app_name":"Text Editor","app_program":"gnome-text-editor"}"#)
            #expect(RecentlyUsed.app(for: recorded, in: directories)?.id == "org.gnome.TextEditor")
            #expect(RecentlyUsed.app(for: try members(#"{"app":"org.gnome.TextEditor.desktop"}"#), in: directories)?.id == "org.gnome.TextEditor")
            #expect(RecentlyUsed.app(for: try members(#"{"app":"gone.desktop","app_name":"Gone"}"#), in: directories) == nil)
        }
    }
}
