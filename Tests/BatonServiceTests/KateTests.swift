import DBus
import Foundation
import Glibc
import Synchronization
import Testing
import TestSupport

/// Kate, as Debian ships it, records a document the ways KDE does (KIO's launcher `kde-open5`,
/// and KDE's file dialog: `recently-used.xbel` and `RecentDocuments/NAME.desktop` both), and the
/// recent-documents source makes one activity of it, which continuing opens in Kate again.
@Suite(.serialized) struct KateTests {
    static let activities = "org.baton.Handoff1.Activities"

    @Test func aDocumentKateOpenedIsOneActivityContinuedInKate() async throws {
        _ = try Executables.require("kate", package: "kate")
        let opener = try Executables.require("kde-open5", package: "kde-cli-tools")
        let world = try await BatonWorld.started()
        defer { world.close() }
        // KIO records nothing under the temporary directory (/tmp): the document lives elsewhere.
        let documents = URL(fileURLWithPath: "/var/tmp").appendingPathComponent("baton-kate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: documents, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: documents) }
        let document = documents.appendingPathComponent("meeting notes.txt")
        try "agenda\n".write(to: document, atomically: true, encoding: .utf8)
        // Kate as the default for text: a user's choice, in their mimeapps.list.
        let home = world.bus.directory.appendingPathComponent("home"), config = home.appendingPathComponent(".config")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try "[Default Applications]\ntext/plain=org.kde.kate.desktop\n".write(to: config.appendingPathComponent("mimeapps.list"), atomically: true, encoding: .utf8)
        let runtime = world.bus.directory.appendingPathComponent("runtime").path
        mkdir(runtime, 0o700)
        let session = ["HOME": home.path, "XDG_CONFIG_HOME": config.path, "XDG_RUNTIME_DIR": runtime, "QT_QPA_PLATFORM": "offscreen",
                       "XDG_DATA_HOME": world.bus.dataHome]
        let exported = session.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        try world.bus.installService(name: "org.baton.RecentDocuments", exec: "/usr/bin/env \(exported) \(try Executables.built("baton")) serve-documents")
        let environment = world.bus.environment.merging(session) { $1 }.filter { !["DISPLAY", "WAYLAND_DISPLAY"].contains($0.key) }
        // Every Kate this test started goes at its end (they outlive the handler that started them).
        defer { _ = try? Subprocess("/usr/bin/pkill", ["-KILL", "-f", documents.path]) }
        _ = try await world.baton(["sources", "enable", "recent-documents"])

        let opened = try await world.run(opener, [document.path], environment: environment, timeout: .seconds(30))
        #expect(opened.status == 0, "\(opened)")
        let uri = "file://" + document.path.replacingOccurrences(of: " ", with: "%20")
        @Sendable func recorded() async throws -> [[String: DBusValue]] {
            let listed = try await world.call(Self.activities, "List", [.stringMap(["app_id": "org.baton.RecentDocuments"])]).first?.arrayValue ?? []
            return listed.compactMap { $0.stringKeyedValue?.mapValues(\.unwrapped) }
        }
        try await eventually("the document Kate opened is an activity", timeout: .seconds(15)) {
            try await recorded().contains { $0["target_content_id"]?.stringValue == uri }
        }
        // Both of KIO's files name it, and the links directory too: one activity, with Kate as its app.
        let links = try FileManager.default.contentsOfDirectory(atPath: world.bus.dataHome + "/RecentDocuments")
        #expect(links == ["meeting notes.txt.desktop"], "\(links)")
        let activities = try await recorded()
        #expect(activities.count == 1, "\(activities)")
        let activity = try #require(activities.first)
        #expect(activity["title"]?.stringValue == "meeting notes.txt")
        #expect(activity["payload"]?.stringValue?.contains("\"app\":\"org.kde.kate") == true, "\(activity)")

        // Kate closed; continuing opens the document in Kate again (the bus starts serve-documents).
        _ = try await world.run("/usr/bin/pkill", ["-KILL", "-f", documents.path])
        try await eventually("Kate closed", timeout: .seconds(10)) { !(try await kateOpens([document.path, uri], world)) }
        let id = try #require(activity["id"]?.stringValue)
        _ = try await world.call(Self.activities, "Continue", [.string(id), .stringMap([:])])
        try await eventually("Kate opened the document again", timeout: .seconds(20)) { try await kateOpens([document.path, uri], world) }
    }

    /// KDE's file dialog (plasma-integration, `QT_QPA_PLATFORMTHEME=kde`, as in Plasma): Kate
    /// under Xvfb, File › Open with Ctrl+O, the document's path typed and Return, with xdotool
    /// as a person's keys; then one activity of it, which continues in Kate.
    @Test func aDocumentOpenedThroughKDEsFileDialogIsAnActivity() async throws {
        _ = try Executables.require("kate", package: "kate")
        _ = try Executables.require("xdotool", package: "xdotool")
        guard FileManager.default.fileExists(atPath: "/usr/lib/x86_64-linux-gnu/qt5/plugins/platformthemes/KDEPlasmaPlatformTheme.so") else {
            throw TestSupportError("KDE's platform theme is missing: apt-get install plasma-integration (scripts/setup does)")
        }
        let world = try await BatonWorld.started()
        defer { world.close() }
        let display = try await VirtualDisplay(width: 1024, height: 768)
        defer { display.close() }
        let documents = URL(fileURLWithPath: "/var/tmp").appendingPathComponent("baton-kate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: documents, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: documents) }
        let document = documents.appendingPathComponent("plan.txt")
        try "steps\n".write(to: document, atomically: true, encoding: .utf8)
        let home = world.bus.directory.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: home.appendingPathComponent(".config"), withIntermediateDirectories: true)
        let runtime = world.bus.directory.appendingPathComponent("runtime").path
        mkdir(runtime, 0o700)
        let session = ["HOME": home.path, "XDG_CONFIG_HOME": home.path + "/.config", "XDG_RUNTIME_DIR": runtime, "DISPLAY": display.name,
                       "QT_QPA_PLATFORMTHEME": "kde", "XDG_DATA_HOME": world.bus.dataHome]
        let exported = session.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        try world.bus.installService(name: "org.baton.RecentDocuments", exec: "/usr/bin/env \(exported) \(try Executables.built("baton")) serve-documents")
        let environment = world.bus.environment.merging(session) { $1 }.filter { $0.key != "WAYLAND_DISPLAY" }
        defer { _ = try? Subprocess("/usr/bin/pkill", ["-KILL", "-x", "kate"]) }
        _ = try await world.baton(["sources", "enable", "recent-documents"])

        let kate = try Subprocess("/usr/bin/kate", ["-n"], environment: environment)
        defer { kate.kill(SIGKILL) }
        @Sendable func xdotool(_ arguments: [String]) async throws -> String {
            try await world.run("/usr/bin/xdotool", arguments, environment: environment).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        try await eventually("Kate's window", timeout: .seconds(30)) { !(try await xdotool(["search", "--onlyvisible", "--class", "kate"]).isEmpty) }
        let window = try await xdotool(["search", "--onlyvisible", "--class", "kate"]).split(separator: "\n").last.map(String.init) ?? ""
        // The pointer over Kate: without a window manager, the keyboard goes where the pointer is.
        _ = try await xdotool(["mousemove", "--window", window, "100", "100"])
        let pressed = Mutex(ContinuousClock.now - .seconds(2))
        try await eventually("KDE's file dialog", timeout: .seconds(30)) {
            // Ctrl+O again each second until the dialog shows: Kate may not take keys at once.
            if pressed.withLock({ last in ContinuousClock.now - last >= .seconds(1) ? { last = .now; return true }() : false }) {
                _ = try await xdotool(["key", "ctrl+o"])
            }
            return !(try await xdotool(["search", "--onlyvisible", "--name", "Open File"]).isEmpty)
        }
        _ = try await xdotool(["type", "--delay", "20", document.path])
        _ = try await xdotool(["key", "Return"])

        let uri = "file://" + document.path
        @Sendable func recorded() async throws -> [[String: DBusValue]] {
            let listed = try await world.call(Self.activities, "List", [.stringMap(["app_id": "org.baton.RecentDocuments"])]).first?.arrayValue ?? []
            return listed.compactMap { $0.stringKeyedValue?.mapValues(\.unwrapped) }
        }
        try await eventually("the document opened through the dialog is an activity", timeout: .seconds(15)) {
            try await recorded().contains { $0["target_content_id"]?.stringValue == uri }
        }
        let activities = try await recorded()
        #expect(activities.count == 1 && activities.first?["payload"]?.stringValue?.contains("\"app\":\"org.kde.kate") == true, "\(activities)")
        if let directory = ProcessInfo.processInfo.environment["BATON_SCREENSHOTS"] {
            let shot = try await world.run("/bin/sh", ["-c", "xwd -silent -id \(window) | xwdtopnm 2>/dev/null | pnmtopng > '\(directory)/kate-file-dialog.png'"],
                                           environment: environment)
            #expect(shot.status == 0, "\(shot)")
        }

        kate.kill(SIGKILL)
        _ = await kate.wait()
        let id = try #require(activities.first?["id"]?.stringValue)
        _ = try await world.call(Self.activities, "Continue", [.string(id), .stringMap([:])])
        try await eventually("Kate opened the document again", timeout: .seconds(20)) { try await kateOpens([document.path, uri], world) }
    }

    /// Whether a running Kate has the document among its arguments (its path or its URI).
    func kateOpens(_ names: [String], _ world: BatonWorld) async throws -> Bool {
        let found = try await world.run("/bin/sh", ["-c", "for p in $(pgrep -x kate); do tr '\\0' '\\n' < /proc/$p/cmdline; done"])
        return found.stdout.split(separator: "\n").contains { names.contains(String($0)) }
    }
}
