import BatonCore
import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// A track played on the desktop, continued on the laptop through a PostgreSQL server: once it
/// stops on the desktop the laptop offers it in a notification that says where; a stream plays
/// on at its position; a file the laptop does not have is refused, with the reason.
@Suite(.serialized) struct MediaAcrossMachinesTests {
    /// Serves `directory` over HTTP on a free port of 127.0.0.1, as a radio or podcast host would
    /// (Python's server, which answers the range requests a player seeks with); returns its URL.
    static func serve(_ directory: URL, in world: BatonWorld) async throws -> (server: Subprocess, url: String) {
        let portFile = world.bus.directory.appendingPathComponent("http.port")
        let script = """
            import functools, http.server, sys
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1]))
            open(sys.argv[2] + ".tmp", "w").write(str(server.server_address[1]))
            __import__("os").rename(sys.argv[2] + ".tmp", sys.argv[2])
            server.serve_forever()
            """
        let server = try Subprocess("/usr/bin/python3", ["-c", script, directory.path, portFile.path], stderr: open("/dev/null", O_WRONLY))
        try await eventually("the web server listens") { FileManager.default.fileExists(atPath: portFile.path) }
        let port = try String(contentsOf: portFile, encoding: .utf8)
        return (server, "http://127.0.0.1:\(port)")
    }

    @Test func aStreamContinuesOnTheOtherMachineWhereItStoppedAndAFileItLacksIsRefused() async throws {
        let desktop = try await BatonWorld.started(), laptop = try await BatonWorld.started()
        defer { desktop.close(); laptop.close() }
        let here = try await MediaStage.prepare(desktop), there = try await MediaStage.prepare(laptop)
        defer { here.stopStartedPlayers(); there.stopStartedPlayers() }
        let notifications = try await laptop.startNotificationServer()
        defer { notifications.kill(SIGKILL) }
        let (place, _) = try await MachinesMeet.server.join([desktop, laptop], names: ["desktop", "laptop"])
        defer { place.close() }
        _ = try await desktop.call("org.baton.Handoff1.Status", "EnableSource", [.string("media")])
        let web = try await Self.serve(here.track.deletingLastPathComponent(), in: desktop)
        defer { web.server.kill(SIGKILL) }

        // A stream plays on the desktop, paused at 0:42.
        let stream = web.url + "/a%20tone.wav"
        let player = try here.play(stream)
        defer { player.kill(SIGKILL) }
        try await eventually("the stream is an activity", timeout: .seconds(20)) { try await !here.tracks().isEmpty }
        // Played a moment first: paused at 0:00 (seen under the suite's load), its offer would say
        // no position, as a track that never played has none to continue from.
        try await eventually("the stream plays") { try await here.playerPosition() > 0 }
        _ = try await here.playerctl(["pause"])
        _ = try await here.playerctl(["position", "42"])
        try await eventually("the desktop recorded the pause at 0:42") { try await (here.recorded("position_us") ?? 0) > 41_000_000 }
        let stopped = try #require(try await here.recorded("position_us"))
        let track = try #require(try await here.tracks().first)
        let id = try #require(track["id"]?.stringValue)
        #expect(track["webpage_url"] == .string(stream) && track["target_content_id"] == .string(stream), "\(track)")

        // On the laptop, where it stopped; continued there, the laptop's player plays it from there.
        try await eventually("the laptop has the track at 0:42", timeout: .seconds(15)) {
            let got = try? await laptop.call("org.baton.Handoff1.Activities", "Get", [.string(id)]).first?.stringKeyedValue?.mapValues(\.unwrapped)
            return got.flatMap(MediaStage.position) == stopped
        }
        // Offered on the laptop once it stopped on the desktop (not while it played), where it stopped.
        try await eventually("the laptop offers the track") { try await !laptop.notified().isEmpty }
        try await eventually("the offer says where it stopped") {
            try await laptop.notified().last?.body.hasSuffix(" on desktop, stopped at \(MediaTrack.clockText(stopped))") ?? false
        }
        // Shown as its player's; the first offer replaced none (nothing was offered while it played).
        let offers = try await laptop.notified()
        #expect(offers.allSatisfy { $0.summary == "a tone.wav" && $0.body.hasPrefix("mpv Media Player on desktop, stopped at ") }
                && offers.first?.replaces == 0, "\(offers)")
        let asked = ContinuousClock.now
        let continued = try await laptop.call("org.baton.Handoff1.Activities", "Continue", [.string(id), .stringMap([:])])
        #expect(continued == [.objectPath("/")])
        #expect(try await there.playerctl(["metadata", "xesam:url"]) == stream)
        let resumed = try await there.playerPosition()
        #expect(MediaStage.position(resumed, isNear: stopped, playingSince: asked), "the laptop plays from \(resumed), the desktop stopped at \(stopped)")
        #expect(there.started() == 1)

        // A file that only the desktop has: the laptop refuses it and says why.
        let file = desktop.bus.directory.appendingPathComponent("only on the desktop.wav")
        try FileManager.default.copyItem(at: here.track, to: file)
        _ = try await here.playerctl(["open", file.absoluteString])
        _ = try await here.playerctl(["play"])  // mpv keeps the pause it was in
        try await eventually("the file is an activity") { try await here.tracks().count == 2 }
        let fileID = try #require(try await here.tracks().first { $0["target_content_id"] == .string(file.absoluteString) }?["id"]?.stringValue)
        try await eventually("the laptop has it", timeout: .seconds(15)) {
            (try? await laptop.call("org.baton.Handoff1.Activities", "Get", [.string(fileID)])) != nil
        }
        // Both machines share this test's disk: the file leaves it, as it is not on a laptop that never had it.
        player.kill(SIGKILL)
        try FileManager.default.removeItem(at: file)
        let refused = await #expect(throws: DBusError.self) {
            try await laptop.call("org.baton.Handoff1.Activities", "Continue", [.string(fileID), .stringMap([:])])
        }
        #expect(refused?.name == "org.baton.Handoff1.Error.NotEligible"
                && refused?.message.contains("the file \(file.path) is not on this machine") == true, "\(String(describing: refused))")
        let explained = try await laptop.baton(["activities", "explain", fileID])
        #expect(explained.stdout.contains("a track that cannot be played here: the file \(file.path) is not on this machine"), "\(explained)")
    }
}
