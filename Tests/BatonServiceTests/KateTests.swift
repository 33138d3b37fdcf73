import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// Kate, as Debian ships it, records a document the way KDE does (KIO's launcher, `kde-open5`:
/// `recently-used.xbel` and `RecentDocuments/NAME.desktop` both), and the recent-documents source
/// makes one activity of it, which continuing opens in Kate again. Kate runs on Qt's offscreen
/// platform: it needs no display to open a file.
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

    /// Whether a running Kate has the document among its arguments (its path or its URI).
    func kateOpens(_ names: [String], _ world: BatonWorld) async throws -> Bool {
        let found = try await world.run("/bin/sh", ["-c", "for p in $(pgrep -x kate); do tr '\\0' '\\n' < /proc/$p/cmdline; done"])
        return found.stdout.split(separator: "\n").contains { names.contains(String($0)) }
    }
}
