import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// `baton-browser-host` as a browser runs it: frames in on stdin, frames out on stdout,
/// against the real batond on a private bus.
@Suite(.serialized) struct BrowserHostTests {
    @Test func pagesBecomeActivitiesAndEndWithTheirTabOrTheBrowser() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let host = try BrowserHostProcess(on: world)
        defer { host.close() }

        #expect(try await host.exchange(#"{"kind":"hello"}"#) == #"{"kind":"hello","version":1}"#)
        let first = try await host.request(#"{"kind":"page","tab":7,"url":"http://127.0.0.1/one","title":"One","scroll":120}"#)
        let id = try #require(first["id"] as? String, "\(first)")
        #expect(first["kind"] as? String == "recorded" && first["tab"] as? Int == 7)
        var activity = try await world.call("org.baton.Handoff1.Activities", "Get", [.string(id)]).first?.stringKeyedValue ?? [:]
        #expect(activity["type"]?.unwrapped == .string("org.baton.web.page") && activity["app_id"]?.unwrapped == .string("org.baton.Web"))
        #expect(activity["title"]?.unwrapped == .string("One") && activity["webpage_url"]?.unwrapped == .string("http://127.0.0.1/one"))
        #expect(activity["payload"]?.unwrapped == .string(#"{"url":"http://127.0.0.1/one","scroll":120}"#))

        // Navigating: the same activity, now the new page, with the video's time.
        let second = try await host.request(#"{"kind":"page","tab":7,"url":"https://example.org/talk","title":"Talk","time":75.5}"#)
        #expect(second["id"] as? String == id)
        activity = try await world.call("org.baton.Handoff1.Activities", "Get", [.string(id)]).first?.stringKeyedValue ?? [:]
        #expect(activity["title"]?.unwrapped == .string("Talk") && activity["target_content_id"]?.unwrapped == .string("https://example.org/talk"))
        #expect(activity["payload"]?.unwrapped == .string(#"{"url":"https://example.org/talk","time":75.5}"#))

        // Another window's tab, closed: its activity ends; the first one's stays.
        let other = try #require(try await host.request(#"{"kind":"page","tab":"w2","url":"https://example.org/b"}"#)["id"] as? String)
        #expect(try await host.exchange(#"{"kind":"closed","tab":"w2"}"#) == #"{"kind":"ended","tab":"w2"}"#)
        await #expect(throws: DBusError.self) { try await world.call("org.baton.Handoff1.Activities", "Get", [.string(other)]) }
        _ = try await world.call("org.baton.Handoff1.Activities", "Get", [.string(id)])

        // The browser goes (stdin ends): every page it showed ends with it.
        host.endInput()
        #expect(await host.exitStatus() == 0)
        await #expect(throws: DBusError.self) { try await world.call("org.baton.Handoff1.Activities", "Get", [.string(id)]) }
        #expect(try await host.rest().isEmpty, "nothing but frames on stdout")
    }

    @Test func pagesObeyPauseBlockAndForgetting() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let host = try BrowserHostProcess(on: world)
        defer { host.close() }
        let recorded = try #require(try await host.request(#"{"kind":"page","tab":1,"url":"https://example.org/a","title":"A"}"#)["id"] as? String)

        // Forgetting the source's app removes what it recorded; the next page records again.
        _ = try await world.call("org.baton.Handoff1.Privacy", "ForgetApp", [.string("org.baton.Web")])
        await #expect(throws: DBusError.self) { try await world.call("org.baton.Handoff1.Activities", "Get", [.string(recorded)]) }
        #expect(try await world.call("org.baton.Handoff1.Archive", "History", [.stringMap([:])]).first?.arrayValue == [])
        let again = try await host.request(#"{"kind":"page","tab":1,"url":"https://example.org/b","title":"B"}"#)
        #expect(again["kind"] as? String == "recorded" && again["id"] as? String != recorded, "\(again)")

        // Paused: kept in memory only, gone at Resume with no trace in the history.
        _ = try await world.call("org.baton.Handoff1.Privacy", "Pause", [.uint64(0)])
        let paused = try #require(try await host.request(#"{"kind":"page","tab":3,"url":"https://example.org/p","title":"P"}"#)["id"] as? String)
        _ = try await world.call("org.baton.Handoff1.Privacy", "Resume", [])
        await #expect(throws: DBusError.self) { try await world.call("org.baton.Handoff1.Activities", "Get", [.string(paused)]) }
        #expect(try await world.call("org.baton.Handoff1.Archive", "History", [.stringMap([:])]).first?.arrayValue == [])

        // Blocked: refused with batond's error, nothing stored.
        _ = try await world.call("org.baton.Handoff1.Privacy", "BlockApp", [.string("org.baton.Web")])
        let refused = try await host.request(#"{"kind":"page","tab":2,"url":"https://example.org/c","title":"C"}"#)
        #expect(refused["error"] as? String == "org.baton.Handoff1.Error.Blocked" && refused["tab"] as? Int == 2, "\(refused)")
        let listed = try await world.call("org.baton.Handoff1.Activities", "List", [.stringMap([:])]).first?.arrayValue ?? []
        #expect(listed.count == 1, "only B, from before the block: \(listed)")
    }

    @Test func badFramesGetAnErrorFrameAndStoreNothing() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let host = try BrowserHostProcess(on: world)
        defer { host.close() }

        let refused: [(frame: [UInt8], error: String, says: String)] = [
            (Array("not json".utf8), "BadFrame", "not a JSON object"),
            (Array("[1,2]".utf8), "BadFrame", "not a JSON object"),
            (Array(#"{"kind":"bookmark","tab":1}"#.utf8), "BadFrame", "unknown kind 'bookmark'"),
            (Array(#"{"tab":1}"#.utf8), "BadFrame", "unknown kind (none)"),
            (Array(#"{"kind":"page","tab":1}"#.utf8), "BadFrame", "needs its tab and url"),
            (Array(#"{"kind":"page","tab":1,"url":"file:///etc/passwd"}"#.utf8), "org.baton.Handoff1.Error.InvalidArgument", "http or https URL"),
            (Array(#"{"kind":"page","tab":1,"url":"https://example.org/a b"}"#.utf8), "org.baton.Handoff1.Error.InvalidArgument", "webpage_url"),
            ([0x7B, 0xFF, 0xFE, 0x7D], "BadFrame", "not UTF-8"),
        ]
        for (frame, error, says) in refused {
            let reply = try await host.request(bytes: frame)
            #expect(reply["kind"] as? String == "error" && reply["error"] as? String == error, "\(reply)")
            #expect((reply["message"] as? String)?.contains(says) == true, "\(reply)")
        }
        // Larger than the host reads: answered, skipped, and the frames after it still read.
        host.send(frameOf: [UInt8](repeating: 0x20, count: (1 << 20) + 1))
        let oversized = try await host.receive()
        #expect(oversized["error"] as? String == "BadFrame" && (oversized["message"] as? String)?.contains("the limit is 1048576") == true)
        #expect(try await host.exchange(#"{"kind":"hello"}"#) == #"{"kind":"hello","version":1}"#)

        // Cut short: the frame claims 100 bytes, the input ends after 10.
        host.send(raw: withUnsafeBytes(of: UInt32(100)) { Array($0) } + Array(#"{"kind":"p"#.utf8))
        host.endInput()
        let truncated = try await host.receive()
        #expect(truncated["error"] as? String == "BadFrame" && (truncated["message"] as? String)?.contains("ended inside a frame") == true)
        #expect(await host.exitStatus() == 0)

        let listed = try await world.call("org.baton.Handoff1.Activities", "List", [.stringMap([:])]).first?.arrayValue
        #expect(listed == [], "nothing stored")
        let history = try await world.call("org.baton.Handoff1.Archive", "History", [.stringMap([:])]).first?.arrayValue
        #expect(history == [], "nothing in the history")
    }
}

/// The extension in `browser/` in a real headless Chromium, with the real host and batond
/// (Tests/Scripts/browser-check.py says what it checks).
@Suite(.serialized) struct BrowserExtensionTests {
    /// Runs `script` (Tests/Scripts) with the extension, the host (`baton` under the host's
    /// name) and a directory of its own, against a fresh batond; `browser` must be installed.
    /// Each of the script's checks fails within 30 s; a stuck browser is killed at 4 min.
    func check(_ script: String, in browser: String) async throws -> CommandResult {
        _ = try Executables.require(browser, package: browser)
        let world = try await BatonWorld.started()
        defer { world.close() }
        let directory = try TemporaryDirectory.make(prefix: "baton-\(browser)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let host = directory.appendingPathComponent("baton-browser-host").path
        try FileManager.default.createSymbolicLink(atPath: host, withDestinationPath: try Executables.built("baton"))
        return try await Executables.run("/usr/bin/python3", [
            Repository.root.appendingPathComponent("Tests/Scripts/\(script)").path,
            Repository.root.appendingPathComponent("browser").path, host, directory.path,
        ], environment: world.bus.environment.merging(["HOME": directory.path]) { $1 }, timeout: .seconds(240))
    }

    @Test func chromiumsTabsBecomeActivitiesButNotPrivateOnesNorListedSites() async throws {
        let result = try await check("browser-check.py", in: "chromium")
        #expect(result.status == 0, "\(result)")
    }

    /// The same extension in a real headless Firefox, installed unpacked over WebDriver BiDi
    /// (Tests/Scripts/firefox-check.py): the manifest works there too, and Firefox finds the host.
    @Test func firefoxsTabsBecomeActivitiesToo() async throws {
        let result = try await check("firefox-check.py", in: "firefox-esr")
        #expect(result.status == 0, "\(result)")
    }
}
