import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// The media source against a real player: mpv with Debian's mpv-mpris, playing a file sox
/// made, headless (`--vo=null --ao=null`); `playerctl` (a client nobody here wrote) plays,
/// pauses and seeks it; the real handler `baton serve-media`, started by the bus, plays a
/// continued track in mpv started from its desktop entry.
@Suite(.serialized) struct MediaTests {
    /// A player to follow: mpv with the MPRIS script, which Debian loads from /etc/mpv/scripts
    /// unless `--no-config` (taken here so no user setting plays a part).
    static let mpv = ["--no-config", "--script=/usr/lib/mpv-mpris/mpris.so", "--vo=null", "--ao=null"]

    struct Stage {
        let world: BatonWorld
        let track: URL
        /// Where the mpv processes the handler starts write their pids, to be stopped after the test.
        let pids: URL

        /// mpv's desktop entry for this world (headless, its pid written down), the handler's
        /// D-Bus service, and a two-minute tone whose name needs percent-encoding.
        static func prepare(_ world: BatonWorld) async throws -> Stage {
            _ = try Executables.require("mpv", package: "mpv")
            _ = try Executables.require("playerctl", package: "playerctl")
            guard FileManager.default.fileExists(atPath: "/usr/lib/mpv-mpris/mpris.so") else {
                throw TestSupportError("mpv's MPRIS script is missing: apt-get install mpv-mpris (scripts/setup does)")
            }
            let track = world.bus.directory.appendingPathComponent("a tone.wav")
            let made = try await world.run(try Executables.require("sox", package: "sox"),
                                           ["-n", "-r", "8000", "-c", "1", track.path, "synth", "120", "sine", "440"])
            #expect(made.status == 0, "\(made)")
            let applications = URL(fileURLWithPath: world.bus.dataHome).appendingPathComponent("applications")
            try FileManager.default.createDirectory(at: applications, withIntermediateDirectories: true)
            let pids = world.bus.directory.appendingPathComponent("mpv.pids")
            let launcher = world.bus.directory.appendingPathComponent("mpv.sh")
            try "#!/bin/sh\necho $$ >> '\(pids.path)'\nexec mpv \(mpv.joined(separator: " ")) \"$@\"\n".write(to: launcher, atomically: true, encoding: .utf8)
            // The id mpv names in DesktopEntry; run by /bin/sh (see RecentDocumentsTests.prepare).
            try "[Desktop Entry]\nType=Application\nName=mpv Media Player\nExec=/bin/sh \"\(launcher.path)\" -- %U\nMimeType=audio/x-wav;video/mp4;\n"
                .write(to: applications.appendingPathComponent("mpv.desktop"), atomically: true, encoding: .utf8)
            try world.bus.installService(name: "org.baton.Media",
                                         exec: "/usr/bin/env XDG_DATA_HOME=\(world.bus.dataHome) \(try Executables.built("baton")) serve-media")
            return Stage(world: world, track: track, pids: pids)
        }

        /// Starts mpv playing `track`, as a user would.
        func play() throws -> Subprocess {
            try Subprocess("/usr/bin/mpv", MediaTests.mpv + [track.path], environment: world.bus.environment, ownGroup: true)
        }

        /// What playerctl prints; it fails (and this throws) while no mpv is on the bus.
        func playerctl(_ arguments: [String]) async throws -> String {
            let result = try await world.run("playerctl", ["--player=mpv"] + arguments)
            guard result.status == 0 else { throw TestSupportError("playerctl \(arguments): \(result)") }
            return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// The player's position, in microseconds, as playerctl reads it.
        func playerPosition() async throws -> Int64 {
            Int64((Double(try await playerctl(["position"])) ?? -1) * 1_000_000)
        }

        func tracks() async throws -> [[String: DBusValue]] {
            let listed = try await world.call("org.baton.Handoff1.Activities", "List", [.stringMap(["app_id": "org.baton.Media"])])
            return (listed.first?.arrayValue ?? []).compactMap { $0.stringKeyedValue?.mapValues(\.unwrapped) }
        }

        /// The one track's payload member `key` as a number.
        func recorded(_ key: String) async throws -> Int64? {
            guard let payload = try await tracks().first?["payload"]?.stringValue,
                  let object = try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any] else { return nil }
            return (object[key] as? NSNumber)?.int64Value
        }

        func stopStartedPlayers() {
            let written = (try? String(contentsOf: pids, encoding: .utf8)) ?? ""
            for pid in written.split(separator: "\n").compactMap({ pid_t($0) }) { Glibc.kill(pid, SIGKILL) }
        }
    }

    @Test func aTrackPlayedIsAnActivityAtItsPositionThatContinuesThere() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        let stage = try await Stage.prepare(world)
        defer { stage.stopStartedPlayers() }
        let player = try stage.play()
        defer { player.kill(SIGKILL) }

        // Off until the user turns it on: a track playing before is not recorded.
        try await eventually("mpv plays", timeout: .seconds(20)) { (try? await stage.playerctl(["status"])) == "Playing" }
        #expect(try await world.baton(["sources"]).stdout.contains("media"))
        #expect(try await stage.tracks().isEmpty)
        let enabled = try await world.baton(["sources", "enable", "media"])
        #expect(enabled.status == 0 && enabled.stdout == "media: on\n", "\(enabled)")

        // On: the track playing now is an activity, titled by its name.
        try await eventually("the track playing is an activity", timeout: .seconds(20)) { try await !stage.tracks().isEmpty }
        let track = try #require(try await stage.tracks().first)
        let url = try await stage.playerctl(["metadata", "xesam:url"])
        #expect(url.hasSuffix("/a%20tone.wav"))
        #expect(track["type"] == .string("org.baton.media.track") && track["title"] == .string("a tone.wav"), "\(track)")
        #expect(track["target_content_id"] == .string(url) && (track["webpage_url"] ?? .string("")) == .string(""), "a file has no web page: \(track)")
        let payload = try #require(track["payload"]?.stringValue)
        #expect(payload.contains("\"url\":\"\(url)\"") && payload.contains("\"length_us\":120000000") && payload.contains("\"player\":\"mpv\""), "\(payload)")
        let id = try #require(track["id"]?.stringValue)

        // Paused, then sought while paused: the activity is where the player is (playerctl reads it).
        _ = try await stage.playerctl(["pause"])
        _ = try await stage.playerctl(["position", "42"])
        try await eventually("the seek is recorded") { try await (stage.recorded("position_us") ?? 0) > 40_000_000 }
        let paused = try await stage.playerPosition()
        #expect(abs((try await stage.recorded("position_us") ?? 0) - paused) < 1_000_000, "player at \(paused)")

        // Played a little, then the player quits: the track keeps the position it reached.
        _ = try await stage.playerctl(["play"])
        try await eventually("the player plays on past 43 s") { try await stage.playerPosition() > 43_000_000 }
        let beforeQuit = try await stage.playerPosition()
        _ = try await world.run("busctl", ["--user", "call", "org.mpris.MediaPlayer2.mpv", "/org/mpris/MediaPlayer2", "org.mpris.MediaPlayer2", "Quit"])
        #expect(await player.wait() == 0)
        try await eventually("the position it reached is recorded") { try await (stage.recorded("position_us") ?? 0) >= beforeQuit - 300_000 }
        let kept = try await stage.recorded("position_us") ?? 0
        #expect(kept - beforeQuit < 2_000_000, "kept \(kept), the player was at \(beforeQuit) just before it quit")
        #expect(try await stage.tracks().count == 1, "one activity per track")
        let listed = try await world.baton(["activities"])
        #expect(listed.stdout.contains("a tone.wav (at 0:4") && listed.stdout.contains(" of 2:00)"), "\(listed)")

        // Continued: the handler starts mpv (from its desktop entry) on the track, at the position.
        let explained = try await world.baton(["activities", "explain", id])
        #expect(explained.stdout.contains("a track: continuing plays it from 0:4") && explained.stdout.contains("mpv Media Player"), "\(explained)")
        let continued = try await world.call("org.baton.Handoff1.Activities", "Continue", [.string(id), .stringMap([:])])
        #expect(continued == [.objectPath("/")])
        #expect(try await stage.playerctl(["metadata", "xesam:url"]) == url)
        let resumed = try await stage.playerPosition()
        #expect(abs(resumed - kept) < 1_500_000, "continued at \(resumed), stopped at \(kept)")

        // The file gone: NotEligible, and Explain says why.
        try FileManager.default.removeItem(at: stage.track)
        let refused = await #expect(throws: DBusError.self) {
            try await world.call("org.baton.Handoff1.Activities", "Continue", [.string(id), .stringMap([:])])
        }
        #expect(refused?.name == "org.baton.Handoff1.Error.NotEligible" && refused?.message.contains("is not on this machine") == true,
                "\(String(describing: refused))")
    }
}
