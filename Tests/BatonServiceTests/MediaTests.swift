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
    @Test func aTrackPlayedIsAnActivityAtItsPositionThatContinuesThere() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        let stage = try await MediaStage.prepare(world)
        defer { stage.stopStartedPlayers() }
        let player = try stage.play()
        defer { player.kill(SIGKILL) }

        // Off until the user turns it on: a track playing before is not recorded.
        try await eventually("mpv plays", timeout: .seconds(20)) { (try? await stage.playerctl(["status"])) == "Playing" }
        #expect(try await world.baton(["sources"]).stdout.contains("media"))
        let sources = try await world.call("org.freedesktop.DBus.Properties", "Get", [.string("org.baton.Handoff1.Status"), .string("Sources")])
        #expect(sources.first?.unwrapped == .array(.string, []), "off by default: \(sources)")
        #expect(try await stage.tracks().isEmpty)
        let enabled = try await world.baton(["sources", "enable", "media"])
        #expect(enabled.status == 0 && enabled.stdout == "media: on\n", "\(enabled)")
        #expect(try await world.baton(["status"]).stdout.contains("media recorded (baton sources)"))

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
        let readBeforeQuit = ContinuousClock.now
        let beforeQuit = try await stage.playerPosition()
        _ = try await world.run("busctl", ["--user", "call", "org.mpris.MediaPlayer2.mpv", "/org/mpris/MediaPlayer2", "org.mpris.MediaPlayer2", "Quit"])
        #expect(await player.wait() == 0)
        try await eventually("the position it reached is recorded") { try await (stage.recorded("position_us") ?? 0) >= beforeQuit - 300_000 }
        let kept = try await stage.recorded("position_us") ?? 0
        #expect(MediaStage.position(kept, isNear: beforeQuit, playingSince: readBeforeQuit), "kept \(kept), the player was at \(beforeQuit) just before it quit")
        #expect(try await stage.tracks().count == 1, "one activity per track")
        let listed = try await world.baton(["activities"])
        #expect(listed.stdout.contains("a tone.wav (at 0:4") && listed.stdout.contains(" of 2:00)"), "\(listed)")

        // Continued: the handler starts mpv (from its desktop entry) on the track, at the position.
        let explained = try await world.baton(["activities", "explain", id])
        #expect(explained.stdout.contains("a track: continuing plays it from 0:4") && explained.stdout.contains("mpv Media Player"), "\(explained)")
        let asked = ContinuousClock.now
        let continued = try await world.call("org.baton.Handoff1.Activities", "Continue", [.string(id), .stringMap([:])])
        #expect(continued == [.objectPath("/")])
        #expect(try await stage.playerctl(["metadata", "xesam:url"]) == url)
        let resumed = try await stage.playerPosition()
        #expect(MediaStage.position(resumed, isNear: kept, playingSince: asked), "continued at \(resumed), stopped at \(kept)")

        #expect(stage.started() == 1)

        // The running player moves on to another track (a second activity; the first keeps
        // where that player left it); continued again, the first goes into that player (OpenUri).
        let other = world.bus.directory.appendingPathComponent("b tone.wav")
        try FileManager.default.copyItem(at: stage.track, to: other)
        _ = try await stage.playerctl(["open", other.absoluteString])
        try await eventually("the other track is an activity too") { try await stage.tracks().count == 2 }
        try await eventually("the first track's position is where the player left it") {
            try await stage.tracks().first { $0["id"] == .string(id) }.flatMap { MediaStage.position(in: $0) }.map { $0 > kept } ?? false
        }
        let left = try #require(try await stage.tracks().first { $0["id"] == .string(id) }.flatMap(MediaStage.position))
        let askedAgain = ContinuousClock.now
        _ = try await world.call("org.baton.Handoff1.Activities", "Continue", [.string(id), .stringMap([:])])
        #expect(try await stage.playerctl(["metadata", "xesam:url"]) == url)
        let again = try await stage.playerPosition()
        #expect(MediaStage.position(again, isNear: left, playingSince: askedAgain), "continued at \(again), left at \(left)")
        #expect(stage.started() == 1, "the running player took it; no second one started")

        // The file gone: NotEligible, and Explain says why.
        try FileManager.default.removeItem(at: stage.track)
        let refused = await #expect(throws: DBusError.self) {
            try await world.call("org.baton.Handoff1.Activities", "Continue", [.string(id), .stringMap([:])])
        }
        #expect(refused?.name == "org.baton.Handoff1.Error.NotEligible" && refused?.message.contains("is not on this machine") == true,
                "\(String(describing: refused))")
    }

    /// Totem (GNOME Videos), a real GTK player under Xvfb, says no URL and no track id: its track
    /// is the file it recorded as a recent document. Sought with playerctl (a relative seek, the
    /// only one Totem takes without a track id), paused, quit: the activity keeps its position;
    /// continued, Totem is started by the bus (its desktop entry is D-Bus activatable) and the
    /// handler seeks it there by the distance.
    @Test func aTrackTotemPlaysIsTheFileItRecordedAndContinuesThere() async throws {
        let totem = try Executables.require("totem", package: "totem")
        let display = try await VirtualDisplay(width: 800, height: 600)
        defer { display.close() }
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        let stage = try await MediaStage.prepare(world)
        let desktop = ["DISPLAY": display.name, "GSETTINGS_BACKEND": "memory", "NO_AT_BRIDGE": "1"]
        let environment = desktop.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ")
        try world.bus.installService(name: "org.gnome.Totem",
                                     exec: "/usr/bin/env \(environment) XDG_DATA_HOME=\(world.bus.dataHome) \(totem) --gapplication-service")
        func quitTotem() async {
            // Totem leaves the bus without answering Quit.
            _ = try? await world.run("busctl", ["--user", "call", "org.mpris.MediaPlayer2.totem", "/org/mpris/MediaPlayer2", "org.mpris.MediaPlayer2", "Quit"])
        }
        @Sendable func totemctl(_ arguments: [String]) async throws -> String {
            let result = try await world.run("playerctl", ["--player=totem"] + arguments)
            guard result.status == 0 else { throw TestSupportError("playerctl \(arguments): \(result)") }
            return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        @Sendable func position() async throws -> Int64 { Int64((Double(try await totemctl(["position"])) ?? -1) * 1_000_000) }
        _ = try await world.call("org.baton.Handoff1.Status", "EnableSource", [.string("media")])

        let player = try Subprocess(totem, [stage.track.path], environment: world.bus.environment.merging(desktop) { $1 }, ownGroup: true)
        defer { player.kill(SIGKILL) }
        try await eventually("Totem plays", timeout: .seconds(30)) { (try? await totemctl(["status"])) == "Playing" }
        #expect(try await totemctl(["metadata"]).contains("xesam:url") == false, "Totem says no URL (else this test tests nothing new)")
        try await eventually("the track Totem plays is an activity", timeout: .seconds(20)) { try await !stage.tracks().isEmpty }
        let track = try #require(try await stage.tracks().first)
        #expect(track["target_content_id"] == .string(stage.track.absoluteString) && track["title"] == .string("a tone.wav"), "\(track)")
        let payload = try #require(track["payload"]?.stringValue)
        #expect(payload.contains(#""player":"org.gnome.Totem""#), "\(payload)")
        let id = try #require(track["id"]?.stringValue)

        _ = try await totemctl(["position", "40+"])
        _ = try await totemctl(["pause"])
        try await eventually("the seek and the pause are recorded") {
            let newest = try await stage.tracks().first ?? [:]
            return (MediaStage.position(in: newest) ?? 0) > 39_000_000 && MediaStage.number("playing", in: newest) == 0
        }
        let paused = try await position()
        #expect(abs((try await stage.recorded("position_us") ?? 0) - paused) < 1_000_000, "Totem at \(paused)")
        // Totem says the length once the file is open, which may be after the track was first written.
        #expect(try await stage.recorded("length_us") == 120_000_000)
        await quitTotem()
        #expect(await player.wait() == 0)
        let kept = try #require(try await stage.recorded("position_us"))
        #expect(try await stage.tracks().count == 1, "one activity per track")

        let asked = ContinuousClock.now
        let continued = try await world.call("org.baton.Handoff1.Activities", "Continue", [.string(id), .stringMap([:])])
        #expect(continued == [.objectPath("/")])
        let started = try await world.client.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionUnixProcessID",
                                                  [.string("org.mpris.MediaPlayer2.totem")]).first?.uint32Value
        defer { if let started { Glibc.kill(pid_t(started), SIGKILL) } }
        let resumed = try await position()
        #expect(MediaStage.position(resumed, isNear: kept, playingSince: asked), "continued at \(resumed), stopped at \(kept)")
        await quitTotem()
    }

    /// The source obeys the user as every app's Advertise does: while recording is paused a
    /// track is kept in memory only (its name never reaches the database), nothing of a
    /// blocked org.baton.Media is recorded (the first track after the block is newer than it),
    /// and forgetting it removes every track while the source goes on recording.
    @Test func whilePausedOrBlockedATrackIsNotWritten() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        let stage = try await MediaStage.prepare(world)
        _ = try await world.call("org.baton.Handoff1.Status", "EnableSource", [.string("media")])
        #expect(try await world.baton(["pause"]).status == 0)
        let player = try stage.play()
        defer { player.kill(SIGKILL) }
        try await eventually("the track is kept while paused", timeout: .seconds(20)) { try await !stage.tracks().isEmpty }
        let id = try #require(try await stage.tracks().first?["id"]?.stringValue)
        let explained = try await world.baton(["activities", "explain", id])
        #expect(explained.stdout.contains("advertised while recording was paused: kept in memory only"), "\(explained)")
        _ = try await stage.playerctl(["pause"])  // a write while paused: memory only too
        try await eventually("the pause is kept") { try await MediaStage.number("playing", in: stage.tracks().first ?? [:]) == 0 }
        for suffix in ["", "-wal"] {
            let data = FileManager.default.contents(atPath: world.database + suffix) ?? Data()
            #expect(data.range(of: Data("a tone.wav".utf8)) == nil, "\(suffix.isEmpty ? "the database" : suffix) holds the track played while paused")
        }

        // Blocked: the player plays, pauses, plays; nothing is recorded until it is allowed again.
        #expect(try await world.baton(["resume"]).status == 0)
        #expect(try await world.baton(["block", "org.baton.Media"]).status == 0)
        _ = try await stage.playerctl(["play"])
        _ = try await stage.playerctl(["position", "30"])
        _ = try await stage.playerctl(["pause"])
        let allowedAt = UInt64(Date().timeIntervalSince1970 * 1_000_000)
        #expect(try await world.baton(["unblock", "org.baton.Media"]).status == 0)
        _ = try await stage.playerctl(["play"])
        // Recorded as playing: a change read late (the pause above, under load) may record it paused
        // first, and a source that last wrote it paused would see no change in the pause below.
        try await eventually("the track is recorded playing once allowed") {
            try await stage.tracks().first.flatMap { MediaStage.number("playing", in: $0) } == 1
        }
        let created = try #require(try await stage.tracks().first?["created_at"]?.uint64Value)
        #expect(created >= allowedAt, "recorded at \(created), before it was allowed again at \(allowedAt)")
        #expect(try await stage.tracks().count == 1)

        // Forgotten: the track goes; the source goes on, and the next change records the track anew.
        let before = try #require(try await stage.tracks().first?["id"]?.stringValue)
        let forgotten = try await world.baton(["forget", "org.baton.Media", "--yes"])
        #expect(forgotten.status == 0, "\(forgotten)")
        #expect(try await !stage.tracks().contains { $0["id"] == .string(before) })
        _ = try await stage.playerctl(["pause"])
        try await eventually("the track is recorded again after forgetting") {
            let tracks = try await stage.tracks()
            return tracks.count == 1 && tracks[0]["id"] != .string(before) && MediaStage.number("playing", in: tracks[0]) == 0
        }
    }

    /// A player that floods its signals (20 000 PropertiesChanged and as many Seeked, nothing
    /// that changes its track) is read once per batch, not once per signal: batond keeps
    /// answering, and a player that appears right after the flood is recorded at once rather
    /// than behind 40 000 reads of 1 ms each.
    @Test func aPlayerThatFloodsItsSignalsIsReadOncePerBatch() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        _ = try await world.call("org.baton.Handoff1.Status", "EnableSource", [.string("media")])
        let script = Repository.root.appendingPathComponent("Tests/Scripts/flood-player.py").path
        let flooder = try Subprocess("/usr/bin/python3", [script, "flood"], environment: world.bus.environment)
        defer { flooder.kill(SIGKILL) }
        let name = "org.mpris.MediaPlayer2.flood", path: ObjectPath = "/org/mpris/MediaPlayer2"
        try await world.client.waitForName(name, timeout: .seconds(15))
        @Sendable func tracks() async throws -> [String] {
            let listed = try await world.call("org.baton.Handoff1.Activities", "List", [.stringMap(["app_id": "org.baton.Media"])])
            return (listed.first?.arrayValue ?? []).compactMap { $0.stringKeyedValue?["target_content_id"]?.unwrapped.stringValue }
        }
        try await eventually("the flooding player's track is an activity") { try await tracks() == ["file:///music/flood.ogg"] }

        let signals = 20_000
        _ = try await world.client.call(name, path, "org.baton.Test.Flood", "Flood", [.uint32(UInt32(signals))], timeout: .seconds(60))
        let next = try Subprocess("/usr/bin/python3", [script, "next"], environment: world.bus.environment)
        defer { next.kill(SIGKILL) }
        try await eventually("the player that came after the flood is recorded") { try await tracks().contains("file:///music/next.ogg") }
        let reads = try #require(try await world.client.call(name, path, "org.baton.Test.Flood", "Stats").first?.uint32Value)
        #expect(reads < UInt32(signals / 20), "read \(reads) times for \(2 * signals) signals")
    }
}
