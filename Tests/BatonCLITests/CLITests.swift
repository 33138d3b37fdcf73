import Foundation
import Glibc
import Testing
import TestSupport

/// The built `baton` against the real batond on a private bus: output, JSON, exit statuses.
@Suite(.serialized)
struct CLITests {
    static let snapshots = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Snapshots")

    @Test func typesActivitiesAndScenesFromTheShell() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let type = "com.example.notes.document"
        var result = try await world.baton(["types", "register", type, "--app", "com.example.notes", "--required-keys", "id"])
        #expect(result.status == 0 && result.stdout == "registered \(type) for com.example.notes\n", "\(result)")

        result = try await world.baton(["activities", "advertise", type, "Chapter 3", #"{"id": "c3", "words": 1200}"#,
                                        "--keyword", "draft", "--keyword", "novel", "--searchable", "--expires-in", "3600"])
        #expect(result.status == 0, "\(result)")
        let id = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let listed = try #require(try await world.json(["activities", "list"]) as? [[String: Any]])
        #expect(listed.count == 1)
        #expect(listed.first?["id"] as? String == id)
        #expect((listed.first?["payload"] as? [String: Any])?["words"] as? Int == 1200, "payloads come out as JSON, not strings")
        #expect(listed.first?["keywords"] as? [String] == ["draft", "novel"])

        let table = try await world.baton(["activities", "list"])
        #expect(table.stdout.hasPrefix("ID  "), "\(table)")
        #expect(table.stdout.contains("\(id)  \(type)  Chapter 3  just now"), "\(table.stdout)")
        #expect(try await world.baton(["activities", "search", "nov"]).stdout.contains(id))
        #expect(try await world.baton(["activities", "show", id]).stdout.contains("expires_at          in 59 min"))

        // Payloads from a file and from standard input.
        let file = world.bus.directory.appendingPathComponent("payload.json")
        try #"{"id": "from-file"}"#.write(to: file, atomically: true, encoding: .utf8)
        #expect(try await world.baton(["activities", "advertise", type, "File", "@\(file.path)"]).status == 0)
        #expect(try await world.baton(["activities", "advertise", type, "Stdin", "-"], stdin: #"{"id": "from-stdin"}"#).status == 0)
        #expect(try await world.baton(["activities", "update", id, #"{"words": 1300}"#, "--title", "Chapter 3, revised"]).status == 0)
        let shown = try #require(try await world.json(["activities", "show", id]) as? [String: Any])
        #expect(shown["title"] as? String == "Chapter 3, revised")
        #expect((shown["payload"] as? [String: Any])?["words"] as? Int == 1300)

        // Continue, then scene storage: text unless --type or the key's kind says otherwise.
        let continued = try #require(try await world.json(["activities", "continue", id]) as? [String: Any])
        let scene = try #require(continued["scene"] as? String)
        for (key, value, extra, expected) in [
            ("tab", "b3", [String](), "tab = b3 (string)"), ("count", "42", ["--type", "int"], "count = 42 (int)"),
            ("count", "43", [], "count = 43 (int)"), ("ratio", "0.5", ["--type", "auto"], "ratio = 0.5 (double)"),
            ("flag", "true", ["--type", "bool"], "flag = true (bool)"), ("raw", "42", [], "raw = 42 (string)"),
            ("draft", "007", [], "draft = 007 (string)"), ("offset", "-3", ["--type", "int"], "offset = -3 (int)"),
            ("blob", "00ff", ["--type", "bytes"], "blob = 00ff (bytes)"),
        ] {
            let set = try await world.baton(["scenes", "set", scene, key, value] + extra)
            #expect(set.status == 0 && set.stdout == expected + "\n", "\(set)")
        }
        let storage = try #require(try await world.json(["scenes", "show", scene]) as? [String: Any])
        let values = try #require(storage["storage"] as? [String: Any])
        #expect(values["count"] as? Int == 43 && values["raw"] as? String == "42" && values["flag"] as? Bool == true)
        #expect(values["draft"] as? String == "007" && values["offset"] as? Int == -3)
        #expect((storage["properties"] as? [String: Any])?["ActivityId"] as? String == id)
        #expect(try await world.baton(["scenes", "get", scene, "tab"]).stdout == "b3\n")
        #expect(try await world.json(["scenes", "remove", scene, "tab"]) as? [String: String] == ["removed": "tab"])
        #expect(try await world.baton(["scenes", "get", scene, "tab"]).status == 2)
        #expect(try await world.baton(["scenes", "list"]).stdout.contains("com.example.notes"))
        #expect(try await world.baton(["scenes", "close", scene]).status == 0)

        let status = try #require(try await world.json(["status"]) as? [String: Any])
        #expect(status["activities"] as? Int == 3 && status["types"] as? Int == 1 && status["scenes"] as? Int == 0)
        #expect(status["database"] as? String == world.daemon?.database && (status["database_bytes"] as? Int ?? 0) > 0)
        #expect(status["contract"] as? Int == 1 && (status["started_at"] as? Int ?? 0) > 0)
        #expect(status["notifications"] as? Bool == true && status["sources_on"] as? [String] == [], "\(status)")
        let human = try await world.baton(["status"])
        #expect(human.stdout.contains("database \(world.daemon?.database ?? "?")"), "\(human)")
        #expect(human.stdout.contains("notifications of other machines' activities on (baton notifications); recent documents not recorded"), "\(human)")
    }

    @Test func errorsAreSentencesWithDistinctStatuses() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        _ = try await world.baton(["types", "register", "com.example.t", "--app", "com.example.app", "--required-keys", "id"])
        let cases: [([String], Int32, String)] = [
            (["activities", "show", "3c9ad3b5-2f1f-4b0e-9a51-3f1d2a6b8c01"], 2, "no activity 3c9ad3b5-2f1f-4b0e-9a51-3f1d2a6b8c01. See what exists with"),
            (["activities", "show", "not-an-id"], 3, "'not-an-id' is not an activity id nor the beginning of one"),
            (["activities", "advertise", "com.example.t", "x", #"{"no": "id"}"#], 3, "the payload was refused"),
            (["activities", "advertise", "com.example.t", "x", #"{"id": NaN}"#], 3, "NaN and Infinity"),
            (["activities", "advertise", "com.example.unknown", "x", "{}"], 3, "register it with baton types register first"),
            (["activities", "advertise", "com.example.t", "x", "@/no/such/file"], 3, "cannot read /no/such/file"),
            (["scenes", "set", "/org/baton/Handoff1/scene/3c9ad3b5_2f1f_4b0e_9a51_3f1d2a6b8c01", "k", "v"], 2, "no such scene"),
            (["scenes", "set", "3c9ad3b5-2f1f-4b0e-9a51-3f1d2a6b8c01", "k", "x", "--type", "int"], 3, "'x' is not a whole number"),
            (["activities", "delete-saved"], 64, "give persistent ids, or --app APP"),
            (["activities", "frobnicate"], 64, "Unexpected argument 'frobnicate'"),
        ]
        for (arguments, status, message) in cases {
            let result = try await world.baton(arguments)
            #expect(result.status == status, "\(arguments): \(result)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }

        let noDaemon = try BatonWorld()
        defer { noDaemon.close() }
        let result = try await noDaemon.baton(["status"])
        #expect(result.status == 4)
        #expect(result.stderr == "baton: batond is not running and the bus cannot start it. Start it with: systemctl --user start batond (or run batond).\n")
    }

    @Test func helpMatchesItsSnapshot() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        for command in [[], ["activities", "advertise"], ["scenes", "set"], ["sync"], ["history"], ["history", "clear"], ["export"], ["import"],
                        ["pause"], ["forget"]] {
            let result = try await world.baton(command + ["--help"])
            #expect(result.status == 0)
            let name = (["baton"] + command).joined(separator: "-") + ".txt"
            let snapshot = Self.snapshots.appendingPathComponent(name)
            if ProcessInfo.processInfo.environment["BATON_UPDATE_SNAPSHOTS"] == "1" {
                try FileManager.default.createDirectory(at: Self.snapshots, withIntermediateDirectories: true)
                try result.stdout.write(to: snapshot, atomically: true, encoding: .utf8)
            }
            let expected = try String(contentsOf: snapshot, encoding: .utf8)
            #expect(result.stdout == expected, "\(name) changed; if that was meant, rerun with BATON_UPDATE_SNAPSHOTS=1")
        }
    }
}

extension CLITests {
    @Test func watchStreamsEventsAsTheyHappen() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let watcher = try await Watcher(world)

        _ = try await world.baton(["types", "register", "com.example.t", "--app", "com.example.app"])
        let id = try await world.baton(["activities", "advertise", "com.example.t", "Watched", "{}"]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let scene = try await world.baton(["activities", "continue", id]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try await world.baton(["scenes", "set", scene, "k", "v"])
        _ = try await world.baton(["scenes", "close", scene])
        _ = try await world.baton(["activities", "invalidate", id])
        _ = try await world.baton(["block", "com.example.app"])
        _ = try await world.baton(["pause"])

        try await eventually("the pause was printed") { watcher.output.contains("\"Paused\":true") }
        let events = try watcher.events()
        #expect(events.map { $0["event"] as? String ?? "" }
            == ["advertised", "scene-opened", "continued", "storage-changed", "scene-closed", "invalidated", "privacy-changed", "privacy-changed"])
        #expect((events[6]["properties"] as? [String: Any])?["BlockedApps"] as? [String] == ["com.example.app"])
        #expect(events[0]["title"] as? String == "Watched" && events[2]["scene"] as? String == scene)
        #expect(events[2]["created"] as? Bool == true)
        #expect(events[3]["changed"] as? [String] == ["k"])
        await watcher.stop()
    }
}

extension CLITests {
    static let repository = Repository.root

    @Test func doctorFindsWhatIsMissingAndPassesOnceInstalled() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let home = world.bus.directory.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        var environment = world.bus.environment
        environment["HOME"] = home.path
        environment["NO_COLOR"] = "1"
        for key in ["XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "BINDIR"] { environment[key] = nil }
        let baton = try Executables.built("baton")

        let before = try await Executables.run(baton, ["doctor"], environment: environment)
        #expect(before.status == 1, "\(before)")
        #expect(before.stdout.contains("ok   session bus: reachable"))
        #expect(before.stdout.contains("ok   batond: running as :"))
        #expect(before.stdout.contains("FAIL systemd unit: \(home.path)/.config/systemd/user/batond.service is missing"))
        #expect(before.stdout.contains("fix: run scripts/install from the Baton repository"))

        let directory = String(baton[..<(baton.lastIndex(of: "/") ?? baton.endIndex)])
        let install = try await Executables.run(Self.repository.appendingPathComponent("scripts/install").path, ["--from", directory],
                                                environment: environment, timeout: .seconds(120))
        #expect(install.status == 0, "\(install)")
        let after = try await Executables.run(baton, ["doctor", "--json"], environment: environment)
        #expect(after.status == 0, "\(after)")
        let checks = try #require(try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [[String: Any]])
        #expect(checks.count == 7 && checks.allSatisfy { $0["ok"] as? Bool == true }, "\(after.stdout)")
        #expect(after.stdout.contains("nothing quarantined") && after.stdout.contains("off (baton sync init URL sets it up)"))

        chmod(home.appendingPathComponent(".local/state/baton").path, 0o755)
        let open = try await Executables.run(baton, ["doctor"], environment: environment)
        #expect(open.status == 1 && open.stdout.contains("fix: chmod 700 \(home.path)/.local/state/baton"), "\(open)")
    }
}

extension BatonWorld {
    /// `baton ARGUMENTS --json`, which must succeed, parsed.
    func json(_ arguments: [String]) async throws -> Any {
        let result = try await baton(arguments + ["--json"])
        #expect(result.status == 0, "\(result)")
        return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8), options: [.fragmentsAllowed])
    }
}

extension CLITests {
    @Test func updateChangesOnlyWhatItIsGiven() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let type = "com.example.notes.document"
        #expect(try await world.baton(["types", "register", type, "--app", "com.example.notes"]).status == 0)
        let id = try await world.baton(["activities", "advertise", type, "Draft", #"{"id": "d1", "words": 10}"#, "--no-handoff", "--searchable"])
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let refused = try await world.baton(["activities", "continue", id])
        #expect(refused.status != 0 && refused.stderr.contains("eligible_for_handoff=false"), "\(refused)")

        #expect(try await world.baton(["activities", "update", id, "--handoff"]).status == 0)
        var shown = try #require(try await world.json(["activities", "show", id]) as? [String: Any])
        #expect(shown["eligible_for_handoff"] as? Bool == true)
        #expect(shown["eligible_for_search"] as? Bool == true, "not given, so unchanged")
        #expect(try await world.baton(["activities", "update", id, "--no-searchable"]).status == 0)
        shown = try #require(try await world.json(["activities", "show", id]) as? [String: Any])
        #expect(shown["eligible_for_search"] as? Bool == false && shown["eligible_for_handoff"] as? Bool == true)
        // Any option field by its record name; a --field wins over its named option.
        let fielded = try await world.baton(["activities", "update", id, "--field", "target_content_id=c1", "--field", "eligible_for_search=true",
                                             "--no-searchable"])
        #expect(fielded.status == 0, "\(fielded)")
        shown = try #require(try await world.json(["activities", "show", id]) as? [String: Any])
        #expect(shown["target_content_id"] as? String == "c1" && shown["eligible_for_search"] as? Bool == true)
        let unknown = try await world.baton(["activities", "update", id, "--field", "colour=red"])
        #expect(unknown.status == 3 && unknown.stderr.contains("--field takes NAME=VALUE"), "\(unknown)")

        // --replace-payload drops the keys it does not give; --scene and --resign move it.
        #expect(try await world.baton(["activities", "update", id, #"{"id": "d1"}"#, "--replace-payload"]).status == 0)
        shown = try #require(try await world.json(["activities", "show", id]) as? [String: Any])
        #expect((shown["payload"] as? [String: Any])?.keys.sorted() == ["id"])
        let scene = try #require(try await world.json(["scenes", "open", "com.example.notes"]) as? [String: Any])["scene"] as? String
        #expect(try await world.baton(["activities", "update", id, "--scene", try #require(scene)]).status == 0)
        #expect(try await world.baton(["scenes", "show", try #require(scene)]).stdout.contains(id))
        #expect(try await world.baton(["activities", "update", id, "--resign"]).status == 0)
        #expect(try await !world.baton(["scenes", "show", try #require(scene)]).stdout.contains(id))
        let both = try await world.baton(["activities", "update", id, "--resign", "--scene", try #require(scene)])
        #expect(both.status == 64 && both.stderr.contains("contradict"), "\(both)")
    }

    @Test func continueGoesToTheSceneThatHandlesTheContent() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let type = "com.example.notes.document"
        #expect(try await world.baton(["types", "register", type, "--app", "com.example.notes"]).status == 0)
        let id = try await world.baton(["activities", "advertise", type, "Chapter 3", #"{"id": "c3"}"#, "--target-content-id", "c3"])
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let scene = try await world.baton(["scenes", "open", "com.example.notes"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let handles = try await world.baton(["scenes", "handles", scene, "c3", "c4"])
        #expect(handles.status == 0 && handles.stdout == "\(scene) handles c3, c4\n", "\(handles)")
        #expect(try await world.baton(["scenes", "show", scene]).stdout.contains("HandlesContent c3, c4"))
        #expect(try await world.baton(["activities", "continue", id]).stdout == scene + "\n")
        let fresh = try await world.baton(["activities", "continue", id, "--new-scene"]).stdout
        #expect(fresh.hasPrefix("/org/baton/Handoff1/scene/") && fresh != scene + "\n")
        let both = try await world.baton(["activities", "continue", id, "--new-scene", "--scene", scene])
        #expect(both.status == 64 && both.stderr.contains("contradict"), "\(both)")
        #expect(try await world.baton(["scenes", "handles", scene]).stdout == "\(scene) handles no content\n")
        let unwaited = try await world.baton(["activities", "continue", id, "--no-wait", "--new-scene"]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        try await eventually("the scene is ready") { try await world.baton(["scenes", "show", unwaited]).stdout.contains("State         ready") }
    }

    @Test func scenesRestoreSaysWhyEachSceneComesBack() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        #expect(try await world.baton(["scenes", "restore", "com.example.notes"]).stdout == "com.example.notes has no scenes\n")
        let scene = try await world.baton(["scenes", "open", "com.example.notes"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await world.baton(["scenes", "restore", "com.example.notes"]).stdout == "\(scene)  launch\n")
        // baton detaches after restoring: a clean run, so the next one says restore.
        let again = try #require(try await world.json(["scenes", "restore", "com.example.notes"]) as? [[String: Any]])
        #expect(again.count == 1 && again.first?["scene"] as? String == scene && again.first?["reason"] as? String == "restore")
        #expect(try await world.baton(["scenes", "show", scene]).stdout.contains("RestoreReason restore"))
    }

    @Test func explainSaysWhy() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let type = "com.example.notes.document"
        #expect(try await world.baton(["types", "register", type, "--app", "com.example.notes"]).status == 0)
        let id = try await world.baton(["activities", "advertise", type, "Draft", #"{"id": "d1"}"#, "--no-handoff"])
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let live = try await world.baton(["activities", "explain", id])
        #expect(live.status == 0 && live.stdout.contains("state         live") && live.stdout.contains("continuable   no"), "\(live)")
        #expect(live.stdout.contains("  - advertised with eligible_for_handoff=false"))
        _ = try await world.baton(["activities", "invalidate", id])
        let gone = try #require(try await world.json(["activities", "explain", id]) as? [String: Any])
        #expect(gone["state"] as? String == "invalidated" && gone["continuable"] as? Bool == false)
    }
}
