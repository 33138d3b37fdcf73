import Foundation
import Testing
import TestSupport

/// What git, gh and systemctl taught people to expect of a command line, against the real
/// batond: short forms of the everyday verbs, ids by their beginning, options before or after
/// the command, suggestions for typos, sentences that name commands, plurals.
@Suite(.serialized)
struct CommandLineShapeTests {
    static let type = "com.example.notes.document"

    func worldWithTwoActivities() async throws -> (BatonWorld, [String]) {
        let world = try await BatonWorld.started()
        _ = try await world.baton(["types", "register", Self.type, "--app", "com.example.notes"])
        var ids: [String] = []
        for title in ["Chapter 3", "Chapter 4"] {
            ids.append(try await world.baton(["activities", "advertise", Self.type, title, "{}", "--searchable"]).stdout
                .trimmingCharacters(in: .whitespacesAndNewlines))
        }
        return (world, ids)
    }

    /// The shortest beginning of `id` that no other id of `others` shares, and their longest common beginning.
    static func prefixes(_ id: String, _ other: String) -> (unique: String, shared: String) {
        let shared = String(zip(id, other).prefix { $0 == $1 }.map(\.0))
        return (String(id.prefix(shared.count + 1)), shared)
    }

    @Test func everydayVerbsAndGlobalOptionsAnywhere() async throws {
        let (world, ids) = try await worldWithTwoActivities()
        defer { world.close() }
        let long = try await world.baton(["activities", "list", "--json"])
        for shape in [["list", "--json"], ["--json", "list"], ["--json", "activities", "list"], ["activities", "--json", "list"]] {
            let short = try await world.baton(shape)
            #expect(short.status == 0 && short.stdout == long.stdout, "baton \(shape.joined(separator: " ")): \(short)")
        }
        #expect(try await world.baton(["search", "chapter"]).stdout.contains(ids[1]))
        #expect(try await world.baton(["--address", world.bus.address, "show", ids[0]]).stdout.contains("Chapter 3"))
        let continued = try await world.baton(["continue", ids[0]])
        #expect(continued.status == 0 && continued.stdout.hasPrefix("/org/baton/Handoff1/scene/"), "\(continued)")
        let help = try await world.baton(["--help"])
        #expect(help.stdout.contains("EVERYDAY SUBCOMMANDS") && help.stdout.contains("Ids can be shortened"), "\(help.stdout)")
    }

    @Test func idsByTheirBeginning() async throws {
        let (world, ids) = try await worldWithTwoActivities()
        defer { world.close() }
        let (unique, shared) = Self.prefixes(ids[0], ids[1])
        let shown = try await world.baton(["show", unique.uppercased()])
        #expect(shown.status == 0 && shown.stdout.contains("Chapter 3"), "\(shown)")

        let ambiguous = try await world.baton(["activities", "show", shared])
        #expect(ambiguous.status == 3 && ambiguous.stderr.contains("begins more than one activity id") && ambiguous.stderr.contains(ids[1]),
                "\(ambiguous)")
        let none = try await world.baton(["show", "ffff"])
        #expect(none.status == 2 && none.stderr.contains("no activity id begins with 'ffff'"), "\(none)")
        let notAnID = try await world.baton(["show", "zz"])
        #expect(notAnID.status == 3 && notAnID.stderr.contains("is not an activity id"), "\(notAnID)")

        // The same in every command that takes one: update, explain, invalidate; continue also in the history.
        #expect(try await world.baton(["activities", "update", unique, #"{"n": 1}"#]).status == 0)
        #expect(try await world.baton(["activities", "explain", unique]).status == 0)
        #expect(try await world.baton(["activities", "invalidate", unique]).status == 0)
        let fromHistory = try await world.baton(["continue", unique])
        #expect(fromHistory.status == 0, "an ended activity is continued from the history by its beginning too: \(fromHistory)")

        // Scenes: by the beginning of their id.
        let scene = fromHistory.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let sceneID = String(scene.split(separator: "/").last ?? "").replacingOccurrences(of: "_", with: "-")
        #expect(try await world.baton(["scenes", "set", String(sceneID.prefix(30)), "tab", "b2"]).stdout == "tab = b2 (string)\n")
        #expect(try await world.baton(["scenes", "get", scene, "tab"]).stdout == "b2\n")
    }

    /// What bash offers at TAB after `words` (the last one being completed), through the
    /// completion script baton generates, as bash-completion would load it.
    func bashCompletes(_ words: [String], in world: BatonWorld) async throws -> [String] {
        let baton = try Executables.built("baton")
        let line = ([baton] + words).joined(separator: " ")
        let script = """
            source <("$BATON" --generate-completion-script bash)
            COMP_WORDS=("$BATON" \(words.map { "'\($0)'" }.joined(separator: " ")))
            COMP_CWORD=\(words.count)
            COMP_LINE='\(line)'
            COMP_POINT=${#COMP_LINE}
            _baton
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let result = try await world.run("/bin/bash", ["-c", script], environment: ["BATON": baton])
        #expect(result.status == 0, "\(result)")
        return result.stdout.split(separator: "\n").map(String.init).filter { !$0.isEmpty }.sorted()
    }

    @Test func completionOffersWhatBatondHolds() async throws {
        let (world, ids) = try await worldWithTwoActivities()
        defer { world.close() }
        #expect(try await bashCompletes(["show", ""], in: world) == ids.sorted())
        #expect(try await bashCompletes(["activities", "explain", Self.prefixes(ids[0], ids[1]).unique], in: world) == [ids[0]])
        #expect(try await bashCompletes(["activities", "advertise", "com.ex"], in: world) == [Self.type])
        #expect(try await bashCompletes(["block", ""], in: world) == ["com.example.notes"])
        let scene = try await world.baton(["scenes", "open", "com.example.notes"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let sceneID = String(scene.split(separator: "/").last ?? "").replacingOccurrences(of: "_", with: "-")
        #expect(try await bashCompletes(["scenes", "get", ""], in: world) == [sceneID])
        // Without batond there is nothing to offer, and nothing is printed.
        await world.stopDaemon()
        #expect(try await bashCompletes(["show", ""], in: world) == [])
    }

    @Test func typosGetSuggestionsAndSentencesNameCommands() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        for (words, expected) in [
            (["activities", "serch", "x"], "'serch' is not a baton activities command; did you mean 'search'?"),
            (["lst"], "did you mean 'list'?"),
            (["--json", "scenes", "opn", "com.example.notes"], "'opn' is not a baton scenes command; did you mean 'open'?"),
            (["frobnicate"], "its commands are"),
        ] {
            let result = try await world.baton(words)
            #expect(result.status == 64 && result.stderr.contains(expected), "baton \(words.joined(separator: " ")): \(result)")
        }
        // batond's sentence names RegisterActivityType; baton's names the command to type.
        let unknown = try await world.baton(["activities", "advertise", "com.example.nope", "x"])
        #expect(unknown.status == 3 && unknown.stderr.contains("register it with baton types register first"), "\(unknown)")
        #expect(!unknown.stderr.contains("RegisterActivityType"))

        _ = try await world.baton(["types", "register", Self.type, "--app", "com.example.notes"])
        let one = try await world.baton(["status"])
        #expect(one.stdout.contains("1 activity type, 0 live activities, 0 scenes"), "\(one)")
        _ = try await world.baton(["activities", "advertise", Self.type, "x"])
        #expect(try await world.baton(["status"]).stdout.contains("1 activity type, 1 live activity, 0 scenes"))
    }
}
