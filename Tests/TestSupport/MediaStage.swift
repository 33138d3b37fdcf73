import DBus
import Foundation
import Glibc

/// A media player on a test's bus, as people run one: mpv with Debian's mpv-mpris (an MPRIS 2
/// player), headless; `playerctl` (a client nobody here wrote) to drive and read it; the real
/// handler `baton serve-media`, which the bus starts, and mpv's desktop entry for it to start.
public struct MediaStage: Sendable {
    /// mpv with the MPRIS script, which Debian loads from /etc/mpv/scripts unless `--no-config`
    /// (taken here so that no user setting plays a part).
    public static let mpv = ["--no-config", "--script=/usr/lib/mpv-mpris/mpris.so", "--vo=null", "--ao=null", "--really-quiet"]

    public let world: BatonWorld
    /// A two-minute tone whose name needs percent-encoding.
    public let track: URL
    /// Where the mpv processes the handler starts write their pids, to be stopped after the test.
    let pids: URL

    /// mpv's desktop entry for `world` (headless, its pid written down), the handler's D-Bus
    /// service, and the track, made by sox.
    public static func prepare(_ world: BatonWorld) async throws -> MediaStage {
        _ = try Executables.require("mpv", package: "mpv")
        _ = try Executables.require("playerctl", package: "playerctl")
        guard FileManager.default.fileExists(atPath: "/usr/lib/mpv-mpris/mpris.so") else {
            throw TestSupportError("mpv's MPRIS script is missing: apt-get install mpv-mpris (scripts/setup does)")
        }
        let track = world.bus.directory.appendingPathComponent("a tone.wav")
        let made = try await world.run(try Executables.require("sox", package: "sox"),
                                       ["-n", "-r", "8000", "-c", "1", track.path, "synth", "120", "sine", "440"])
        guard made.status == 0 else { throw TestSupportError("sox made no track: \(made)") }
        let applications = URL(fileURLWithPath: world.bus.dataHome).appendingPathComponent("applications")
        try FileManager.default.createDirectory(at: applications, withIntermediateDirectories: true)
        let pids = world.bus.directory.appendingPathComponent("mpv.pids")
        let launcher = world.bus.directory.appendingPathComponent("mpv.sh")
        try "#!/bin/sh\necho $$ >> '\(pids.path)'\nexec mpv \(mpv.joined(separator: " ")) \"$@\"\n".write(to: launcher, atomically: true, encoding: .utf8)
        // The id mpv names in DesktopEntry; run by /bin/sh, not exec'd itself (RecentDocumentsTests.prepare says why).
        try "[Desktop Entry]\nType=Application\nName=mpv Media Player\nExec=/bin/sh \"\(launcher.path)\" -- %U\nMimeType=audio/x-wav;video/mp4;\n"
            .write(to: applications.appendingPathComponent("mpv.desktop"), atomically: true, encoding: .utf8)
        try world.bus.installService(name: "org.baton.Media",
                                     exec: "/usr/bin/env XDG_DATA_HOME=\(world.bus.dataHome) \(try Executables.built("baton")) serve-media")
        return MediaStage(world: world, track: track, pids: pids)
    }

    /// Starts mpv playing `url` (the track by default), as a user would.
    public func play(_ url: String? = nil) throws -> Subprocess {
        try Subprocess("/usr/bin/mpv", Self.mpv + [url ?? track.path], environment: world.bus.environment, ownGroup: true)
    }

    /// What playerctl prints; it fails (and this throws) while no mpv is on the bus.
    public func playerctl(_ arguments: [String]) async throws -> String {
        let result = try await world.run("playerctl", ["--player=mpv"] + arguments)
        guard result.status == 0 else { throw TestSupportError("playerctl \(arguments): \(result)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The player's position, in microseconds, as playerctl reads it.
    public func playerPosition() async throws -> Int64 {
        Int64((Double(try await playerctl(["position"])) ?? -1) * 1_000_000)
    }

    /// Whether a player read at `position` was within 1 s of `expected` at some moment since
    /// `since` (when the continuation was asked for, or the position expected was read): it
    /// may have played on since, for at most that long.
    public static func position(_ position: Int64, isNear expected: Int64, playingSince since: ContinuousClock.Instant) -> Bool {
        let elapsed = (ContinuousClock.now - since).components
        let playedAtMost = elapsed.seconds * 1_000_000 + elapsed.attoseconds / 1_000_000_000_000
        return position >= expected - 1_000_000 && position <= expected + 1_000_000 + playedAtMost
    }

    /// The media source's activities, newest first.
    public func tracks() async throws -> [[String: DBusValue]] {
        let listed = try await world.call("org.baton.Handoff1.Activities", "List", [.stringMap(["app_id": "org.baton.Media"])])
        return (listed.first?.arrayValue ?? []).compactMap { $0.stringKeyedValue?.mapValues(\.unwrapped) }
    }

    /// The newest track's payload member `key` as a number.
    public func recorded(_ key: String) async throws -> Int64? {
        try await tracks().first.flatMap { Self.number(key, in: $0) }
    }

    /// A member of a track's payload, as a number.
    public static func number(_ key: String, in track: [String: DBusValue]) -> Int64? {
        guard let payload = track["payload"]?.stringValue,
              let object = try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any] else { return nil }
        return (object[key] as? NSNumber)?.int64Value
    }

    public static func position(in track: [String: DBusValue]) -> Int64? { number("position_us", in: track) }

    /// How many players the handler started.
    public func started() -> Int {
        ((try? String(contentsOf: pids, encoding: .utf8)) ?? "").split(separator: "\n").count
    }

    public func stopStartedPlayers() {
        let written = (try? String(contentsOf: pids, encoding: .utf8)) ?? ""
        for pid in written.split(separator: "\n").compactMap({ pid_t($0) }) { Glibc.kill(pid, SIGKILL) }
    }
}
