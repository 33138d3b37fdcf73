import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// The desktop's search, called as GNOME Shell and KRunner call it, on a private bus with
/// the real batond and the real Hawk Notes: terms → ids → metas → activation → the scene
/// Hawk Notes filled.
@Suite(.serialized)
struct DesktopSearchTests {
    static let provider = "org.gnome.Shell.SearchProvider2"
    static let providerPath: ObjectPath = "/org/baton/Handoff1/SearchProvider"
    static let runner = "org.kde.krunner1"
    static let runnerPath: ObjectPath = "/org/baton/Handoff1/KRunner"
    static let agathaPayload = #"{"id": "0edb89dd-1bdb-4aad-b0b3-c2e9b397f2d5", "name": "Agatha"}"#

    /// A world with Hawk Notes serving, its desktop entry installed, and Agatha advertised
    /// (keyword "witch", content "agatha") beside an activity that does not match.
    static func agathaAdvertised() async throws -> (world: BatonWorld, hawkNotes: Subprocess, agatha: String) {
        let world = try await BatonWorld.startedInProcess()
        let applications = URL(fileURLWithPath: world.bus.dataHome).appendingPathComponent("applications")
        try FileManager.default.createDirectory(at: applications, withIntermediateDirectories: true)
        try "[Desktop Entry]\nType=Application\nName=Hawk Notes\nIcon=hawk-notes\nExec=hawk-notes serve\n"
            .write(to: applications.appendingPathComponent("com.raywenderlich.hawknotes.desktop"), atomically: true, encoding: .utf8)
        let hawkNotes = try Subprocess(try Executables.built("hawk-notes"), ["serve"], environment: world.bus.environment)
        try await world.client.waitForName("com.raywenderlich.hawknotes", timeout: .seconds(15))
        try await eventually("Hawk Notes registered its type") {
            try await world.baton(["types", "list", "--json"]).stdout.contains("characterDetail")
        }
        let type = "com.raywenderlich.hawknotes.staterestore.characterDetail"
        let agatha = try await world.baton(["activities", "advertise", type, "Agatha", Self.agathaPayload, "--keyword", "witch", "--searchable", "--target-content-id", "agatha"])
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try await world.baton(["activities", "advertise", type, "Jamie", #"{"id": "a", "name": "Jamie"}"#, "--searchable"])
        #expect(!agatha.isEmpty)
        return (world, hawkNotes, agatha)
    }

    func scenes(_ world: BatonWorld) async throws -> [ObjectPath] {
        try await world.call("org.baton.Handoff1.Scenes", "ListScenes", [.string("com.raywenderlich.hawknotes")])
            .first?.arrayValue?.compactMap(\.objectPathValue) ?? []
    }

    @Test func gnomeShellFindsAnActivityAndContinuesItInHawkNotes() async throws {
        let (world, hawkNotes, agatha) = try await Self.agathaAdvertised()
        defer { hawkNotes.kill(SIGKILL); world.close() }

        // Terms as the Shell sends them, from gdbus: word prefixes, ANDed, over title and keywords.
        let found = try await world.run("gdbus", [
            "call", "--session", "--dest", "org.baton.Handoff1", "--object-path", Self.providerPath.text,
            "--method", "\(Self.provider).GetInitialResultSet", "['aga']",
        ])
        #expect(found.status == 0 && found.stdout.contains(agatha) && !found.stdout.contains("Jamie"), "\(found)")
        func results(_ member: String, _ arguments: [DBusValue]) async throws -> [String] {
            try await world.call(Self.provider, member, arguments, path: Self.providerPath).first?.arrayValue?.compactMap(\.stringValue) ?? []
        }
        #expect(try await results("GetInitialResultSet", [.strings(["wit"])]) == [agatha], "a keyword's prefix")
        #expect(try await results("GetInitialResultSet", [.strings(["agatha", "witch"])]) == [agatha], "terms are ANDed")
        #expect(try await results("GetSubsearchResultSet", [.strings([agatha]), .strings(["agatha", "jam"])]).isEmpty)
        #expect(try await results("GetInitialResultSet", [.strings(["zzz"])]).isEmpty)

        // Metas: the title, the app's name from its desktop entry, where and when, its icon.
        let metas = try #require(try await world.call(Self.provider, "GetResultMetas", [.strings([agatha, "no-such-id"])], path: Self.providerPath)
            .first?.arrayValue)
        #expect(metas.count == 1, "an id that is not a live activity has no meta")
        let meta = try #require(metas.first?.stringKeyedValue)
        #expect(meta["id"]?.unwrapped == .string(agatha) && meta["name"]?.unwrapped == .string("Agatha"))
        #expect(meta["description"]?.unwrapped.stringValue?.hasPrefix("Hawk Notes · this machine · ") == true, "\(meta)")
        #expect(meta["clipboardText"] == nil, "the Shell copies clipboardText on activation, replacing the user's clipboard")
        #expect(meta["icon"]?.unwrapped == .structure([
            .string("themed"), .variant(.strings(["hawk-notes"])),
        ]))

        // Activated: continued in a new scene, which Hawk Notes fills with Agatha.
        #expect(try await scenes(world).isEmpty)
        _ = try await world.call(Self.provider, "ActivateResult", [.string(agatha), .strings(["aga"]), .uint32(0)], path: Self.providerPath)
        try await eventually("a scene of Hawk Notes shows Agatha") {
            guard let scene = try await scenes(world).first else { return false }
            return try await world.run(try Executables.built("hawk-notes"), ["show", scene.text]).stdout.contains("Agatha")
        }

        // An app with no desktop entry here is named in words, not by its reverse-DNS id.
        _ = try await world.baton(["types", "register", "org.example.FieldGuide.page", "--app", "org.example.FieldGuide"])
        let page = try await world.baton(["activities", "advertise", "org.example.FieldGuide.page", "Hawks of the moor", "{}", "--searchable"])
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let guide = try await world.call(Self.provider, "GetResultMetas", [.strings([page])], path: Self.providerPath).first?.arrayValue?.first
        #expect(guide?.stringKeyedValue?["description"]?.unwrapped.stringValue?.hasPrefix("Field Guide · this machine · ") == true, "\(String(describing: guide))")
    }

    @Test func krunnerMatchesAndRunsItsActions() async throws {
        let (world, hawkNotes, agatha) = try await Self.agathaAdvertised()
        defer { hawkNotes.kill(SIGKILL); world.close() }

        // Match as KRunner calls it, from busctl: one match, with its subtext and actions.
        let matched = try await world.run("busctl", [
            "--user", "--json=short", "call", "org.baton.Handoff1", Self.runnerPath.text, Self.runner, "Match", "s", "aga",
        ])
        #expect(matched.status == 0 && matched.stdout.contains(agatha) && matched.stdout.contains("Hawk Notes · this machine"), "\(matched)")
        let matches = try #require(try await world.call(Self.runner, "Match", [.string("witch")], path: Self.runnerPath).first?.arrayValue)
        let match = try #require(matches.first?.structureValue)
        #expect(matches.count == 1 && match.count == 6)
        #expect(match[0] == .string(agatha) && match[1] == .string("Agatha") && match[2] == .string("hawk-notes"))
        #expect(match[3] == .int32(30), "a keyword match is a possible match, not an exact one")
        func ranked(_ query: String) async throws -> (type: Int32?, relevance: Double?) {
            let first = try await world.call(Self.runner, "Match", [.string(query)], path: Self.runnerPath).first?.arrayValue?.first?.structureValue
            return (first?[3].int32Value, first?[4].doubleValue)
        }
        let exact = try await ranked("agatha"), begun = try await ranked("aga"), keyword = try await ranked("witch")
        #expect(exact.type == 100 && exact.relevance == 1, "the whole title is an exact match: \(exact)")
        #expect(begun.type == 30, "a title that only begins with the query is not exact, as KRunner's own runners rank: \(begun)")
        #expect((keyword.relevance ?? 1) < (begun.relevance ?? 0) && (begun.relevance ?? 1) < 1, "\(keyword) \(begun)")
        let actions = try #require(try await world.call(Self.runner, "Actions", path: Self.runnerPath).first?.arrayValue)
        #expect(actions.compactMap { $0.structureValue?.first?.stringValue } == ["continue", "new-scene", "on-device"])
        let config = try await world.call(Self.runner, "Config", path: Self.runnerPath).first?.stringKeyedValue
        #expect(config?["MinLetterCount"]?.unwrapped == .int32(2))

        // Run: continue (a scene), then new-scene (a second one, although the first shows Agatha).
        _ = try await world.call(Self.runner, "Run", [.string(agatha), .string("continue")], path: Self.runnerPath)
        try await eventually("one scene") { try await scenes(world).count == 1 }
        _ = try await world.call(Self.runner, "Run", [.string(agatha), .string("continue")], path: Self.runnerPath)
        #expect(try await scenes(world).count == 1, "continue goes to the scene that shows Agatha")
        _ = try await world.call(Self.runner, "Run", [.string(agatha), .string("new-scene")], path: Self.runnerPath)
        try await eventually("a second scene, for new-scene") { try await scenes(world).count == 2 }
        _ = try await world.call(Self.runner, "Teardown", path: Self.runnerPath)
    }

    /// LaunchSearch opens the Baton window on the terms: its `search` action, through
    /// org.freedesktop.Application, the window started by the bus if it is not running.
    @Test func launchSearchOpensTheBatonWindowOnTheTerms() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        let log = world.bus.directory.appendingPathComponent("window.log")
        let script = world.bus.directory.appendingPathComponent("window.py")
        try """
            import dbus, dbus.service, dbus.mainloop.glib
            from gi.repository import GLib
            dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
            class Application(dbus.service.Object):
                @dbus.service.method("org.freedesktop.Application", in_signature="sava{sv}", out_signature="")
                def ActivateAction(self, name, parameter, platform_data):
                    with open("\(log.path)", "a") as out:
                        out.write("%s %s\\n" % (name, " ".join(str(p) for p in parameter)))
            bus = dbus.SessionBus()
            keep = (dbus.service.BusName("org.baton.Baton", bus), Application(bus, "/org/baton/Baton"))
            GLib.timeout_add_seconds(20, GLib.MainLoop.quit, GLib.MainLoop())
            GLib.MainLoop().run()
            """.write(to: script, atomically: true, encoding: .utf8)
        try world.bus.installService(name: "org.baton.Baton", exec: "/usr/bin/python3 \(script.path)")
        _ = try await InProcessBatond(on: world)
        _ = try await world.call(Self.provider, "LaunchSearch", [.strings(["field", "walk"]), .uint32(7)], path: Self.providerPath)
        #expect(try String(contentsOf: log, encoding: .utf8) == "search field walk\n")
    }

    /// A result whose app cannot start, or that cannot be continued, activated from the Shell:
    /// the person waiting for a window is told why, in a notification (python3-dbusmock's
    /// notification server), instead of an empty scene and a line in the log.
    @Test func aResultThatCannotOpenSaysWhyInANotification() async throws {
        let world = try await BatonWorld.startedInProcess { $0.handlerTimeout = .seconds(2) }
        defer { world.close() }
        let mock = try Subprocess("/usr/bin/python3", ["-m", "dbusmock", "--template", "notification_daemon",
                                                        "-p", #"{"capabilities": "body actions"}"#], environment: world.bus.environment)
        defer { mock.kill(SIGKILL) }
        try await world.client.waitForName("org.freedesktop.Notifications", timeout: .seconds(15))
        @Sendable func notified() async throws -> [(summary: String, body: String)] {
            let calls = try await world.client.call("org.freedesktop.Notifications", "/org/freedesktop/Notifications", "org.freedesktop.DBus.Mock",
                                                    "GetMethodCalls", [.string("Notify")])
            return (calls.first?.arrayValue ?? []).compactMap { call in
                guard let arguments = call.structureValue?.last?.arrayValue?.map(\.unwrapped), arguments.count == 8 else { return nil }
                return (arguments[3].stringValue ?? "", arguments[4].stringValue ?? "")
            }
        }
        _ = try await world.baton(["types", "register", "org.example.Field.page", "--app", "org.example.Field", "--handler", "org.example.Field"])
        func advertise(_ title: String, _ extra: [String]) async throws -> String {
            try await world.baton(["activities", "advertise", "org.example.Field.page", title, "{}", "--searchable"] + extra)
                .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let sigrid = try await advertise("Sigrid", []), private_ = try await advertise("Private page", ["--no-handoff"])

        // The app is neither running nor activatable: its scene waits, and the notification says so.
        let activated = try await world.run("gdbus", [
            "call", "--session", "--dest", "org.baton.Handoff1", "--object-path", Self.providerPath.text,
            "--method", "\(Self.provider).ActivateResult", sigrid, "['sig']", "0",
        ])
        #expect(activated.status == 0, "\(activated)")
        try await eventually("a notification says why") { try await !notified().isEmpty }
        let waiting = try #require(try await notified().first)
        #expect(waiting.summary == "Could not continue “Sigrid”", "\(waiting)")
        #expect(waiting.body == "Field did not start. It opens there when Field starts again.", "\(waiting)")

        // Not for handoff: said as batond says it.
        _ = try await world.call(Self.provider, "ActivateResult", [.string(private_), .strings(["priv"]), .uint32(0)], path: Self.providerPath)
        try await eventually("a second notification") { try await notified().count == 2 }
        let refused = try #require(try await notified().last)
        #expect(refused.summary == "Could not continue “Private page”" && refused.body.contains("eligible_for_handoff=false"), "\(refused)")
    }
}

/// The desktop's search in the programs people run: Debian's GNOME Shell 43, headless, typed
/// into from outside; KDE Frameworks' runner model (what KRunner and Plasma's search load) in
/// qmlscene offscreen. Each with the real batond and Hawk Notes on a private bus.
@Suite(.serialized)
struct RealShellTests {
    /// What the Shell and KRunner read, laid out as the package installs it (the programs run
    /// from this checkout); Hawk Notes' real entry for batond as well.
    static func installDesktopFiles(_ world: BatonWorld) throws -> URL {
        let fm = FileManager.default, repository = Repository.root
        let data = world.bus.directory.appendingPathComponent("system-data")
        for directory in ["gnome-shell/search-providers", "krunner/dbusplugins", "applications", "icons"] {
            try fm.createDirectory(at: data.appendingPathComponent(directory), withIntermediateDirectories: true)
        }
        for file in ["gnome-shell/search-providers/org.baton.Handoff1.search-provider.ini", "krunner/dbusplugins/org.baton.Handoff1.desktop"] {
            try fm.copyItem(at: repository.appendingPathComponent("share/" + file), to: data.appendingPathComponent(file))
        }
        try fm.copyItem(at: repository.appendingPathComponent("share/icons/hicolor"), to: data.appendingPathComponent("icons/hicolor"))
        for (entry, app) in [("org.baton.Baton", "baton-gtk"), ("com.raywenderlich.hawknotes", "hawk-notes-gtk")] {
            let text = try String(contentsOf: repository.appendingPathComponent("share/applications/\(entry).desktop"), encoding: .utf8)
                .replacing("@BINDIR@", with: repository.appendingPathComponent("apps/\(app)").path)
            try text.write(to: data.appendingPathComponent("applications/\(entry).desktop"), atomically: true, encoding: .utf8)
            if entry == "com.raywenderlich.hawknotes" {
                try text.write(toFile: world.bus.dataHome + "/applications/\(entry).desktop", atomically: true, encoding: .utf8)
            }
        }
        return data
    }

    /// A second Agatha, not for search: neither the Shell nor KRunner may show it.
    static func advertisePrivate(_ world: BatonWorld) async throws {
        let type = "com.raywenderlich.hawknotes.staterestore.characterDetail"
        let advertised = try await world.baton(["activities", "advertise", type, "Agatha's diary", DesktopSearchTests.agathaPayload, "--no-searchable"])
        #expect(advertised.status == 0, "\(advertised)")
    }

    func scenes(_ world: BatonWorld) async throws -> [ObjectPath] {
        try await world.call("org.baton.Handoff1.Scenes", "ListScenes", [.string("com.raywenderlich.hawknotes")])
            .first?.arrayValue?.compactMap(\.objectPathValue) ?? []
    }

    @Test func gnomeShellShowsBatonsResultsAndEnterContinuesOne() async throws {
        _ = try Executables.require("gnome-shell", package: "gnome-shell")
        let (world, hawkNotes, agatha) = try await DesktopSearchTests.agathaAdvertised()
        defer { hawkNotes.kill(SIGKILL); world.close() }
        let data = try Self.installDesktopFiles(world)
        try await Self.advertisePrivate(world)

        var arguments = [Repository.root.appendingPathComponent("Tests/Scripts/gnome-shell-search.py").path, data.path, "aga", "--activate"]
        if let directory = ProcessInfo.processInfo.environment["BATON_SCREENSHOTS"] { arguments += ["--screenshot", directory + "/gnome-shell-search.png"] }
        // Longer than the script's own deadline (100 s), which names the step that did not happen.
        let searched = try await Executables.run("/usr/bin/python3", arguments, environment: world.bus.environment, timeout: .seconds(130))
        try #require(searched.status == 0, "\(searched)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(searched.stdout.utf8)) as? [String: Any], "\(searched)")
        // Baton's section (by its desktop entry) lists Agatha, as Hawk Notes', and not the private one.
        #expect((report["sections"] as? [String])?.contains("org.baton.Baton.desktop") == true, "\(report)")
        let shown = try #require((report["results"] as? [String: Any])?["org.baton.Baton.desktop"] as? [[String: String]], "\(report)")
        #expect(shown.map { $0["id"] } == [agatha], "\(shown)")
        #expect(shown.first?["name"] == "Agatha" && shown.first?["description"]?.hasPrefix("Hawk Notes · this machine · ") == true, "\(shown)")
        // Enter continued it into a scene of Hawk Notes, and left the user's clipboard alone.
        #expect(report["clipboard"] as? String == "what the user had copied", "\(report)")
        try await eventually("a scene of Hawk Notes shows Agatha") {
            guard let scene = try await scenes(world).first else { return false }
            return try await world.run(try Executables.built("hawk-notes"), ["show", scene.text]).stdout.contains("Agatha")
        }
    }

    @Test func krunnersRunnerModelMatchesAndRunsBaton() async throws {
        let qmlscene = try Executables.require("qmlscene", package: "qmlscene qml-module-org-kde-runnermodel qml-module-qtqml-models2")
        let (world, hawkNotes, _) = try await DesktopSearchTests.agathaAdvertised()
        defer { hawkNotes.kill(SIGKILL); world.close() }
        let data = try Self.installDesktopFiles(world)
        try await Self.advertisePrivate(world)

        var environment = world.bus.environment
        environment["XDG_DATA_DIRS"] = data.path + ":/usr/local/share:/usr/share"
        environment["QT_QPA_PLATFORM"] = "offscreen"
        // The scene and the query it reads beside it.
        let scene = world.bus.directory.appendingPathComponent("krunner-query.qml")
        try FileManager.default.copyItem(at: Repository.root.appendingPathComponent("Tests/Scripts/krunner-query.qml"), to: scene)
        try #"var query = "aga"; var run = true;"#.write(to: world.bus.directory.appendingPathComponent("query.js"), atomically: true, encoding: .utf8)
        let query = try await Executables.run(qmlscene, [scene.path], environment: environment, timeout: .seconds(60))
        let matches = query.stderr.split(separator: "\n").compactMap { line -> [String: Any]? in
            guard let start = line.range(of: "match ")?.upperBound else { return nil }
            return try? JSONSerialization.jsonObject(with: Data(line[start...].utf8)) as? [String: Any]
        }
        let baton = matches.filter { $0["runner"] as? String == "org.baton.Handoff1" }
        #expect(baton.map { $0["text"] as? String } == ["Agatha"], "\(query)")
        // A title that only begins with the query is a possible match, not an exact one.
        #expect(baton.first?["type"] as? Int == 30, "\(baton)")
        #expect(query.stderr.contains("ran 0"), "\(query)")
        try await eventually("a scene of Hawk Notes shows Agatha") {
            guard let scene = try await scenes(world).first else { return false }
            return try await world.run(try Executables.built("hawk-notes"), ["show", scene.text]).stdout.contains("Agatha")
        }
    }
}
