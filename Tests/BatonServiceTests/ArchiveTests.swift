import BatonCore
import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// Export and import through the real daemon and `baton`: a round trip through a fresh
/// daemon gives the same document; importing again changes nothing; a document wrong in
/// one place is refused whole.
@Suite(.serialized)
struct ArchiveTests {
    static let activities = "org.baton.Handoff1.Activities"

    /// Types, live and past activities, and a scene holding a value of every kind.
    func fill(_ world: BatonWorld) async throws {
        try await world.register()
        _ = try await world.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
            .string("com.example.maps.place"), .string("com.example.maps"), .stringMap(["title": "Place", "payload_type": "Place"]),
        ])
        let agatha = try await world.advertise("Agatha", options: [
            "keywords": "witch,mentor", "eligible_for_search": "true", "target_content_id": "agatha", "persistent_id": "p-agatha",
            "webpage_url": "https://example.org/agatha", "expires_in": "86400",
        ])
        _ = try await world.call(Self.activities, "Advertise", [
            .string("com.example.maps.place"), .string("Bergen — «Bryggen»"), .string(#"{"lat": 60.397, "lon": 5.324, "tags": ["wharf"]}"#),
            .stringMap(["eligible_for_handoff": "false"]),
        ])
        let ended = try await world.advertise("Jamie", payload: #"{"id":"jamie","notes":"\u00e9t\u00e9"}"#)
        _ = try await world.call(Self.activities, "Invalidate", [.string(ended)])
        let scene = try #require(try await world.call("org.baton.Handoff1.Scenes", "OpenScene", [
            .string(BatonWorld.app), .stringMap(["title": "The Good Hawk"]),
        ]).first?.objectPathValue)
        for (key, value) in [("flag", DBusValue.boolean(true)), ("count", .int64(-42)), ("ratio", .double(0.25)), ("draft", .string("007")),
                             ("blob", .array(.byte, [0, 1, 255].map { DBusValue.byte($0) })), ("empty", .array(.byte, []))] {
            _ = try await world.call("org.baton.Handoff1.Scene", "Set", [.string(key), .variant(value)], path: scene)
        }
        _ = agatha
    }

    @Test func aRoundTripThroughAFreshDaemonGivesTheSameDocumentAndAgainChangesNothing() async throws {
        let here = try await BatonWorld.startedInProcess(), there = try await BatonWorld.startedInProcess()
        defer { here.close(); there.close() }
        try await fill(here)
        let directory = try TemporaryDirectory.make(prefix: "baton-export")
        let file = directory.appendingPathComponent("export.json").path
        let exported = try await here.baton(["export", "-o", file])
        #expect(exported.status == 0 && exported.stderr.contains("exported"), "\(exported)")
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int == 0o600)
        let document = try String(contentsOfFile: file, encoding: .utf8)
        #expect(document.contains(#""format" : "org.baton.Handoff1.export""#) && document.contains("Bryggen"))

        let imported = try await there.baton(["import", file])
        #expect(imported.status == 0, "\(imported)")
        #expect(imported.stdout == "imported 2 types, 2 activities, 1 past activity, 1 scene\n", "\(imported.stdout)")
        #expect(try await there.baton(["export"]).stdout == document, "the same document from the fresh daemon")
        // What came in works as if made there: its types take activities, it is found, storage is typed.
        _ = try await there.call(Self.activities, "Advertise", [
            .string("com.example.maps.place"), .string("Oslo"), .string("{}"), .stringMap([:]),
        ])
        #expect(try await there.call(Self.activities, "Search", [.string("witch"), .uint32(5)]).first?.arrayValue?.count == 1)
        let scenes = try #require(try await there.call("org.baton.Handoff1.Scenes", "ListScenes", [.string(BatonWorld.app)]).first?.arrayValue)
        let scene = try #require(scenes.first?.objectPathValue)
        #expect(try await there.call("org.baton.Handoff1.Scene", "Get", [.string("count")], path: scene).first?.unwrapped == .int64(-42))
        #expect(try await there.call("org.baton.Handoff1.Scene", "Get", [.string("draft")], path: scene).first?.unwrapped == .string("007"))

        // Again, from standard input and as JSON: everything is there already.
        let again = try await there.baton(["import", "-", "--json"], stdin: document)
        #expect(again.stdout == #"{"activities":0,"history":0,"scenes":0,"types":0,"unchanged":6}"# + "\n", "\(again)")
        #expect(try await there.baton(["export"]).stdout.contains("Oslo"), "what was made there since is exported too")
        // One app's only.
        let maps = try await here.baton(["export", "--app", "com.example.maps"])
        #expect(maps.stdout.contains("Bryggen") && !maps.stdout.contains("Agatha"))
    }

    /// `ExportTo` writes Export's document to a descriptor the caller passes: from python3-dbus
    /// into a file, and from `baton export` through a pipe. A descriptor it cannot write to
    /// is refused, and a reader that went away ends the export, not batond.
    @Test func exportToWritesTheSameDocumentToAFileDescriptor() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        try await fill(world)
        let document = try #require(try await world.call("org.baton.Handoff1.Archive", "Export", [.stringMap([:])]).first?.stringValue)
        let directory = try TemporaryDirectory.make(prefix: "baton-export-to")
        defer { try? FileManager.default.removeItem(at: directory) }

        let file = directory.appendingPathComponent("from-python.json").path
        let python = try Executables.require("/usr/bin/python3", package: "python3-dbus")
        let script = """
            import dbus, sys
            archive = dbus.Interface(dbus.SessionBus().get_object("org.baton.Handoff1", "/org/baton/Handoff1"), "org.baton.Handoff1.Archive")
            with open(sys.argv[1], "w") as out:
                archive.ExportTo(dbus.types.UnixFd(out), {"app_id": sys.argv[2]} if len(sys.argv) > 2 else {})
            """
        let fromPython = try await world.run(python, ["-c", script, file])
        #expect(fromPython.status == 0, "\(fromPython)")
        #expect(try String(contentsOfFile: file, encoding: .utf8) == document)
        let maps = try await world.run(python, ["-c", script, file, "com.example.maps"])
        #expect(maps.status == 0, "\(maps)")
        let mapsOnly = try String(contentsOfFile: file, encoding: .utf8)
        #expect(mapsOnly.contains("Bryggen") && !mapsOnly.contains("Agatha"))

        let shell = try await world.run("/bin/sh", ["-c", "\"$0\" export | cat > \"$1\"", try Executables.built("baton"), file])
        #expect(shell.status == 0, "\(shell)")
        #expect(try String(contentsOfFile: file, encoding: .utf8) == document, "baton export through a pipe")

        // Open for reading only: refused before anything is read.
        let readOnly = FileDescriptor(owning: open(file, O_RDONLY | O_CLOEXEC))
        await #expect(throws: DBusError.self) {
            do {
                _ = try await world.call("org.baton.Handoff1.Archive", "ExportTo", [.unixFD(readOnly), .stringMap([:])])
            } catch let error as DBusError {
                #expect(error.name == "org.baton.Handoff1.Error.InvalidArgument" && error.message.contains("not open for writing"), "\(error)")
                throw error
            }
        }
        // A pipe whose reader is gone: the export ends with a named error, batond serves on.
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        close(ends[0])
        let orphan = FileDescriptor(owning: ends[1])
        do {
            _ = try await world.call("org.baton.Handoff1.Archive", "ExportTo", [.unixFD(orphan), .stringMap([:])])
            Issue.record("an export to a pipe nobody reads succeeded")
        } catch let error as DBusError {
            #expect(error.name == "org.baton.Handoff1.Error.InvalidArgument" && error.message.contains("reader closed it"), "\(error)")
        }
        #expect(try await world.activityCount() == 2)
    }

    @Test func aDocumentWrongInOnePlaceIsRefusedWholeAndSaysWhere() async throws {
        let here = try await BatonWorld.startedInProcess(), there = try await BatonWorld.startedInProcess()
        defer { here.close(); there.close() }
        try await fill(here)
        let document = try #require(try await here.call("org.baton.Handoff1.Archive", "Export", [.stringMap([:])]).first?.stringValue)
        // Each spoils one thing, after things that are fine.
        let spoiled = [
            ("a payload with a duplicate key", #""payload" : "{\"lat\": 60.397"#, #""payload" : "{\"lat\": 1, \"lat\": 60.397"#, "InvalidPayload", "activities["),
            ("an id that is not one", #""id" : "0"#, #""id" : "not-an-id-0"#, "InvalidArgument", "activities[0]: id"),
            ("a value of no kind", #""int" : -42"#, #""int" : -42, "string" : "x""#, "InvalidArgument", "scenes[0]"),
            ("a newer version", #""version" : 1"#, #""version" : 2"#, "InvalidArgument", "version 2"),
            ("a duplicate key in the document", #""format" : "org.baton.Handoff1.export","#,
             #""format" : "org.baton.Handoff1.export", "format" : "org.baton.Handoff1.export","#, "InvalidArgument", "duplicate key \"format\""),
        ]
        for (what, original, replacement, error, place) in spoiled {
            #expect(document.contains(original), "\(what): the export changed shape")
            guard let range = document.range(of: original) else { continue }
            let bad = document.replacingCharacters(in: range, with: replacement)
            do {
                _ = try await there.call("org.baton.Handoff1.Archive", "Import", [.string(bad), .stringMap([:])])
                Issue.record("\(what) was imported")
            } catch let refused as DBusError {
                #expect(refused.name == "org.baton.Handoff1.Error.\(error)" && refused.message.contains(place), "\(what): \(refused)")
            }
        }
        // Nothing of it was written.
        #expect(try await there.call("org.baton.Handoff1.Registry", "ListActivityTypes").first?.arrayValue?.isEmpty == true)
        #expect(try await there.activityCount() == 0)
        #expect(try await there.call("org.baton.Handoff1.Archive", "History", [.stringMap([:])]).first?.arrayValue?.isEmpty == true)
        // Not a document at all: a sentence, from the command line.
        let notOne = try await there.baton(["import", "-"], stdin: #"{"hello": "world"}"#)
        #expect(notOne.status == 3 && notOne.stderr.contains("not a Baton export"), "\(notOne)")
    }
}
