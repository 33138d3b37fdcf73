import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// The recent-documents source against GTK 4's real RecentManager (PyGObject, under Xvfb), the
/// real batond, and the real handler `baton serve-documents` started by the bus, which opens a
/// document in the app that used it: a test app whose desktop entry's Exec writes down its arguments.
@Suite(.serialized) struct RecentDocumentsTests {
    static let app = "org.example.Viewer"

    /// The world, the test app's desktop entry, the handler's D-Bus service; returns the app's log.
    static func prepare(_ world: BatonWorld) throws -> URL {
        let applications = URL(fileURLWithPath: world.bus.dataHome).appendingPathComponent("applications")
        try FileManager.default.createDirectory(at: applications, withIntermediateDirectories: true)
        let log = world.bus.directory.appendingPathComponent("viewer.log")
        let viewer = world.bus.directory.appendingPathComponent("viewer.sh")
        try "#!/bin/sh\nprintf '%s\\n' \"$@\" >> '\(log.path)'\n".write(to: viewer, atomically: true, encoding: .utf8)
        chmod(viewer.path, 0o755)
        // Run by /bin/sh, not exec'd itself: a file just written can be "busy" for exec while a
        // child that another test spawned meanwhile still holds the writer's descriptor.
        try "[Desktop Entry]\nType=Application\nName=Viewer\nExec=/bin/sh \"\(viewer.path)\" --open %f\nMimeType=text/plain;\n"
            .write(to: applications.appendingPathComponent(app + ".desktop"), atomically: true, encoding: .utf8)
        try world.bus.installService(name: "org.baton.RecentDocuments",
                                     exec: "/usr/bin/env XDG_DATA_HOME=\(world.bus.dataHome) \(try Executables.built("baton")) serve-documents")
        return log
    }

    /// Records `uris` as used by the test app, through GTK.
    static func use(_ uris: [String], in world: BatonWorld) async throws {
        let result = try await world.run("/usr/bin/python3", [Repository.root.appendingPathComponent("Tests/Scripts/recent-document.py").path, app] + uris)
        #expect(result.status == 0, "\(result)")
    }

    static func documents(_ world: BatonWorld) async throws -> [[String: DBusValue]] {
        let listed = try await world.call("org.baton.Handoff1.Activities", "List", [.stringMap(["app_id": "org.baton.RecentDocuments"])])
        return (listed.first?.arrayValue ?? []).compactMap { $0.stringKeyedValue?.mapValues(\.unwrapped) }
    }

    @Test func aDocumentUsedInAnAppIsAnActivityThatOpensInThatApp() async throws {
        _ = try Executables.require("Xvfb", package: "xvfb")
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        let log = try Self.prepare(world)
        let files = world.bus.directory.appendingPathComponent("files")
        try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
        let before = files.appendingPathComponent("before.txt"), notes = files.appendingPathComponent("Field notes.txt")
        for file in [before, notes] { try "text\n".write(to: file, atomically: true, encoding: .utf8) }

        // Off until the user turns it on: what was used before is not recorded, then or later.
        let listed = try await world.baton(["sources"])
        #expect(listed.status == 0 && listed.stdout.contains("recent-documents") && listed.stdout.contains("off"), "\(listed)")
        #expect(try await world.baton(["status"]).stdout.contains("recent documents not recorded, media not recorded (baton sources)"))
        try await Self.use([before.absoluteString], in: world)
        let enabled = try await world.baton(["sources", "enable", "recent-documents"])
        #expect(enabled.status == 0 && enabled.stdout == "recent-documents: on\n", "\(enabled)")
        let sources = try await world.call("org.freedesktop.DBus.Properties", "Get", [.string("org.baton.Handoff1.Status"), .string("Sources")])
        #expect(sources.first?.unwrapped == .array(.string, [.string("recent-documents")]))
        #expect(try await world.baton(["status"]).stdout.contains("recent documents recorded, media not recorded (baton sources)"))

        try await Self.use([notes.absoluteString], in: world)
        try await eventually("the document used is an activity", timeout: .seconds(20)) { try await !Self.documents(world).isEmpty }
        let documents = try await Self.documents(world)
        #expect(documents.count == 1, "only the document used after the source was turned on: \(documents)")
        let document = try #require(documents.first)
        #expect(document["type"] == .string("org.freedesktop.RecentDocument") && document["title"] == .string("Field notes.txt"))
        #expect(document["target_content_id"] == .string(notes.absoluteString))
        let payload = try #require(document["payload"]?.stringValue)
        #expect(payload.contains("\"uri\":\"\(notes.absoluteString)\"") && payload.contains("\"mime_type\":\"text/plain\"")
                && payload.contains("\"app\":\"\(Self.app).desktop\"") && payload.contains("\"modified\":"), "\(payload)")

        // Continued: the app that used it opens it (no scene: it is not Baton's app).
        let id = try #require(document["id"]?.stringValue)
        let continued = try await world.call("org.baton.Handoff1.Activities", "Continue", [.string(id), .stringMap([:])])
        #expect(continued == [.objectPath("/")])
        try await eventually("the app was started with the document", timeout: .seconds(20)) {
            (try? String(contentsOf: log, encoding: .utf8)) == "--open\n\(notes.path)\n"
        }

        // The file gone: NotEligible, and Explain says why.
        try FileManager.default.removeItem(at: notes)
        let refused = await #expect(throws: DBusError.self) {
            try await world.call("org.baton.Handoff1.Activities", "Continue", [.string(id), .stringMap([:])])
        }
        #expect(refused?.name == "org.baton.Handoff1.Error.NotEligible" && refused?.message.contains("is not on this machine") == true,
                "\(String(describing: refused))")
        let explained = try await world.baton(["activities", "explain", id])
        #expect(explained.stdout.contains("the document \(notes.path) is not on this machine") && explained.stdout.contains("no"), "\(explained)")

        // Off: nothing is recorded; on again, from then on (a barrier: what the file says after it).
        #expect(try await world.baton(["sources", "disable", "recent-documents"]).status == 0)
        let later = files.appendingPathComponent("later.txt"), after = files.appendingPathComponent("after.txt")
        for file in [later, after] { try "text\n".write(to: file, atomically: true, encoding: .utf8) }
        try await Self.use([later.absoluteString], in: world)
        #expect(try await world.baton(["sources", "enable", "recent-documents"]).status == 0)
        try await Self.use([after.absoluteString], in: world)
        try await eventually("the document used after it was on again", timeout: .seconds(20)) {
            try await Self.documents(world).contains { $0["target_content_id"] == .string(after.absoluteString) }
        }
        #expect(try await Self.documents(world).map { $0["target_content_id"] } == [.string(after.absoluteString), .string(notes.absoluteString)])
    }

    /// KDE's links in `RecentDocuments/` are recent documents too (issue #61): a document only
    /// a link names becomes an activity, once however many links name it, and once with
    /// `recently-used.xbel`'s entry for it; a hand-made link that is no link to a file (an
    /// application's Exec, a symlink) runs and records nothing.
    @Test func kdesRecentDocumentLinksAreDocumentsEachOnce() async throws {
        _ = try Executables.require("Xvfb", package: "xvfb")
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        _ = try Self.prepare(world)
        let files = world.bus.directory.appendingPathComponent("files")
        let links = URL(fileURLWithPath: world.bus.dataHome).appendingPathComponent("RecentDocuments")
        try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
        let report = files.appendingPathComponent("Quarterly report.odt"), notes = files.appendingPathComponent("notes.txt")
        for file in [report, notes] { try "text\n".write(to: file, atomically: true, encoding: .utf8) }
        _ = try await world.baton(["sources", "enable", "recent-documents"])

        // As KIO writes them (the directory made after the source started): two links to one document.
        try FileManager.default.createDirectory(at: links, withIntermediateDirectories: true)
        func link(_ name: String, _ text: String) throws {
            try text.write(to: links.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        let entry = "[Desktop Entry]\nIcon=x-office-document\nName=Quarterly report.odt\nType=Link\nURL[$e]=file:\(report.path)\nX-KDE-LastOpenedWith=\(Self.app)\n"
        try link("Quarterly report.odt.desktop", entry)
        try link("Quarterly report.odt[2].desktop", entry)
        // Hostile: an application's entry, and a symlink to a link elsewhere. Neither is read.
        let marker = world.bus.directory.appendingPathComponent("ran").path
        try link("evil.desktop", "[Desktop Entry]\nType=Application\nExec=/usr/bin/touch \(marker)\nURL=file:\(notes.path)\n")
        let elsewhere = world.bus.directory.appendingPathComponent("elsewhere.desktop")
        try "[Desktop Entry]\nType=Link\nURL=file:\(notes.path)\n".write(to: elsewhere, atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: links.appendingPathComponent("linked.desktop").path, withDestinationPath: elsewhere.path)

        // A second link to a document is a second use of it (KIO's NAME[2].desktop): the activity
        // of the first use ends as the next one is advertised, as for the xbel's entries.
        let reportURI = "file://\(files.path)/Quarterly%20report.odt"
        // (Read in one state of the list: a later use's activity replaces the earlier one's.) The
        // hostile links name the notes: read, they would put the notes in the list.
        try await eventually("the report is one activity, continued in the app that opened it") {
            let documents = try await Self.documents(world)
            return documents.count == 1 && documents.first?["target_content_id"]?.stringValue == reportURI
                && documents.first?["payload"]?.stringValue?.contains("\"app\":\"\(Self.app).desktop\"") == true
        }

        // The same document in recently-used.xbel (through GTK) and in a link: one activity.
        try await Self.use([notes.absoluteString], in: world)
        try link("notes.txt.desktop", "[Desktop Entry]\nType=Link\nURL[$e]=file:\(notes.path)\nX-KDE-LastOpenedWith=\(Self.app)\n")
        try await eventually("the notes are one activity beside the report's") {
            let uris = try await Self.documents(world).compactMap { $0["target_content_id"]?.stringValue }
            return uris.sorted() == [reportURI, notes.absoluteString].sorted()
        }
        #expect(!FileManager.default.fileExists(atPath: marker), "nothing in a link is run")
    }

    @Test func aDBusActivatableAppIsAskedToOpenItThroughTheBus() async throws {
        _ = try Executables.require("Xvfb", package: "xvfb")
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        _ = try Self.prepare(world)
        let reader = "org.example.Reader", log = world.bus.directory.appendingPathComponent("reader.log")
        try "[Desktop Entry]\nType=Application\nName=Reader\nExec=/bin/false %U\nDBusActivatable=true\n"
            .write(to: URL(fileURLWithPath: world.bus.dataHome).appendingPathComponent("applications/\(reader).desktop"), atomically: true, encoding: .utf8)
        try world.bus.installService(name: reader, exec: "/usr/bin/python3 \(Repository.root.appendingPathComponent("Tests/Scripts/application-open.py").path) \(reader) \(log.path)")
        let file = world.bus.directory.appendingPathComponent("report.txt")
        try "text\n".write(to: file, atomically: true, encoding: .utf8)
        _ = try await world.call("org.baton.Handoff1.Status", "EnableSource", [.string("recent-documents")])
        let result = try await world.run("/usr/bin/python3", [Repository.root.appendingPathComponent("Tests/Scripts/recent-document.py").path, reader, file.absoluteString])
        #expect(result.status == 0, "\(result)")
        try await eventually("the document is an activity", timeout: .seconds(20)) { try await !Self.documents(world).isEmpty }
        let id = try #require(try await Self.documents(world).first?["id"]?.stringValue)
        _ = try await world.call("org.baton.Handoff1.Activities", "Continue", [.string(id), .stringMap([:])])
        try await eventually("the app's Open was called with the document", timeout: .seconds(20)) {
            (try? String(contentsOf: log, encoding: .utf8)) == file.absoluteString + "\n"
        }
    }

    @Test func theSourceObeysPauseBlockAndForgetting() async throws {
        _ = try Executables.require("Xvfb", package: "xvfb")
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        _ = try Self.prepare(world)
        let files = (0..<4).map { world.bus.directory.appendingPathComponent("file\($0).txt") }
        for file in files { try "text\n".write(to: file, atomically: true, encoding: .utf8) }
        @Sendable func shown() async throws -> [String] { try await Self.documents(world).compactMap { $0["target_content_id"]?.stringValue } }
        _ = try await world.call("org.baton.Handoff1.Status", "EnableSource", [.string("recent-documents")])

        // Paused: kept in memory only; gone at Resume, with nothing in the history.
        _ = try await world.call("org.baton.Handoff1.Privacy", "Pause", [.uint64(0)])
        try await Self.use([files[0].absoluteString], in: world)
        try await eventually("the document used while paused", timeout: .seconds(20)) { try await shown() == [files[0].absoluteString] }
        _ = try await world.call("org.baton.Handoff1.Privacy", "Resume", [])
        #expect(try await shown() == [])
        #expect(try await world.call("org.baton.Handoff1.Archive", "History", [.stringMap([:])]).first?.arrayValue == [])

        // Blocked: not recorded; unblocked, what is used next is (a barrier for the blocked one).
        _ = try await world.call("org.baton.Handoff1.Privacy", "BlockApp", [.string("org.baton.RecentDocuments")])
        try await Self.use([files[1].absoluteString], in: world)
        _ = try await world.call("org.baton.Handoff1.Privacy", "UnblockApp", [.string("org.baton.RecentDocuments")])
        try await Self.use([files[2].absoluteString], in: world)
        try await eventually("the document used once unblocked", timeout: .seconds(20)) { try await shown() == [files[2].absoluteString] }

        // Forgotten: what it recorded goes; the source goes on recording.
        _ = try await world.call("org.baton.Handoff1.Privacy", "ForgetApp", [.string("org.baton.RecentDocuments")])
        #expect(try await shown() == [])
        try await Self.use([files[3].absoluteString], in: world)
        try await eventually("the document used after forgetting", timeout: .seconds(20)) { try await shown() == [files[3].absoluteString] }
    }

    /// Debian's GNOME Text Editor, a real GTK 4 program: a file opened through its Open dialog is
    /// recorded by GTK's file chooser under the editor's name and program (not a desktop id), and
    /// continuing it opens the file in the editor again, started by D-Bus activation as its
    /// desktop entry (`DBusActivatable=true`) asks.
    @Test func aDocumentOpenedInGNOMETextEditorContinuesInIt() async throws {
        let editor = try Executables.require("gnome-text-editor", package: "gnome-text-editor")
        _ = try Executables.require("xdotool", package: "xdotool")
        let display = try await VirtualDisplay(width: 1024, height: 768)
        defer { display.close() }
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        _ = try Self.prepare(world)
        let desktop = ["DISPLAY": display.name, "GSETTINGS_BACKEND": "memory", "NO_AT_BRIDGE": "1"]
        let environment = desktop.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ")
        try world.bus.installService(name: "org.gnome.TextEditor",
                                     exec: "/usr/bin/env \(environment) XDG_DATA_HOME=\(world.bus.dataHome) \(editor) --gapplication-service")
        let notes = world.bus.directory.appendingPathComponent("Hawk notes.txt")
        try "Agatha\n".write(to: notes, atomically: true, encoding: .utf8)
        _ = try await world.call("org.baton.Handoff1.Status", "EnableSource", [.string("recent-documents")])

        // Longer than the script's own deadline (60 s), which names the step that did not happen.
        let opened = try await world.run("/usr/bin/python3", [Repository.root.appendingPathComponent("Tests/Scripts/text-editor-open.py").path, notes.path],
                                         environment: desktop, timeout: .seconds(90))
        #expect(opened.status == 0, "\(opened)")
        try await eventually("the document is an activity", timeout: .seconds(20)) { try await !Self.documents(world).isEmpty }
        let document = try #require(try await Self.documents(world).first)
        let payload = try #require(document["payload"]?.stringValue)
        #expect(payload.contains(#""app":"org.gnome.TextEditor.desktop""#) && payload.contains(#""app_program":"gnome-text-editor""#), "\(payload)")
        let id = try #require(document["id"]?.stringValue)
        let explained = try await world.baton(["activities", "explain", id])
        #expect(explained.stdout.contains("continuing opens it in the app that used it"), "\(explained)")

        let continued = try await world.baton(["continue", id])
        #expect(continued.status == 0, "\(continued)")
        try await eventually("the editor shows the document again", timeout: .seconds(60)) {
            let windows = try await Executables.run("xdotool", ["search", "--onlyvisible", "--name", "Hawk notes"], environment: desktop)
            return !windows.stdout.isEmpty
        }
    }

    /// A GTK app that sets a readable name (`g_set_application_name`), as most do: GLib records
    /// that name and the program, and the app is found by its program's desktop entry. Where it is
    /// not installed, continuing and Explain name it and say so.
    @Test func anAppThatNamesItselfIsFoundByItsProgramAndNamedWhereItIsMissing() async throws {
        _ = try Executables.require("Xvfb", package: "xvfb")
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        let log = try Self.prepare(world)
        let entry = URL(fileURLWithPath: world.bus.dataHome).appendingPathComponent("applications/\(Self.app).desktop")
        // GLib records the program ("viewer.sh"); the entry names it in TryExec (and runs it through
        // /bin/sh, as `prepare` says why).
        let viewer = world.bus.directory.appendingPathComponent("viewer.sh").path
        try "[Desktop Entry]\nType=Application\nName=Viewer\nExec=/bin/sh \"\(viewer)\" --open %f\nTryExec=\(viewer)\n"
            .write(to: entry, atomically: true, encoding: .utf8)
        let file = world.bus.directory.appendingPathComponent("chapter.txt")
        try "text\n".write(to: file, atomically: true, encoding: .utf8)
        _ = try await world.call("org.baton.Handoff1.Status", "EnableSource", [.string("recent-documents")])
        let used = try await world.run("/usr/bin/python3", [
            Repository.root.appendingPathComponent("Tests/Scripts/recent-document.py").path, "--name", "Hawk Viewer", "viewer.sh", file.absoluteString,
        ])
        #expect(used.status == 0, "\(used)")
        try await eventually("the document is an activity", timeout: .seconds(20)) { try await !Self.documents(world).isEmpty }
        let document = try #require(try await Self.documents(world).first)
        let payload = try #require(document["payload"]?.stringValue)
        #expect(payload.contains(#""app":"\#(Self.app).desktop""#) && payload.contains(#""app_name":"Hawk Viewer""#), "\(payload)")
        let id = try #require(document["id"]?.stringValue)
        #expect(try await world.baton(["continue", id]).status == 0)
        try await eventually("the app was started with the document", timeout: .seconds(20)) {
            (try? String(contentsOf: log, encoding: .utf8)) == "--open\n\(file.path)\n"
        }

        // Uninstalled: refused, naming the app, as Explain does.
        try FileManager.default.removeItem(at: entry)
        let refused = try await world.baton(["continue", id])
        let missing = "the app that used it, Hawk Viewer (\(Self.app).desktop), is not installed on this machine"
        #expect(refused.status != 0 && refused.stderr.contains(missing), "\(refused)")
        let explained = try await world.baton(["activities", "explain", id])
        #expect(explained.stdout.contains(missing), "\(explained)")
    }
}
