import ArgumentParser
import BatonContract
import BatonCore
import DBus
import Glibc

/// `baton serve-media`: the handler of `org.baton.Media`, which the bus starts to play a track
/// continued on this machine where it stopped (`MediaPlayback`).
struct ServeMedia: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve-media",
        abstract: "Play tracks continued on this machine where they stopped (the bus starts it as org.baton.Media).",
        discussion: "Not for typing: installed as the D-Bus service org.baton.Media. Ends after 10 s without a track to play.",
        shouldDisplay: false)
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await Opener.serve(Contract.Sources.Media.app, address: global.address) { activity, connection in
            guard let track = MediaTrack(payload: activity["payload"]?.unwrapped.stringValue ?? "") else {
                throw BatonError.invalidArgument("the activity names no track to play")
            }
            let environment = ["HOME", "XDG_DATA_HOME", "XDG_DATA_DIRS", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS"]
                .reduce(into: [String: String]()) { values, name in values[name] = getenv(name).map { String(cString: $0) } }
            return try await MediaPlayback(connection: connection, recentlyUsedPath: XDGData.recentlyUsedPath(environment: environment)).play(
                track, applicationDirectories: XDGData.applicationDirectories(environment: environment),
                configDirectories: XDGConfig.directories(environment: environment))
        }
    }
}

/// Plays a track again where it stopped, through MPRIS 2: in the player that played it (else
/// the default app for its type, `MediaTrack.app`) — through `OpenUri` when it runs, else started
/// with the URL — then, once its `Metadata` shows the URL (or, from a player that says none, once
/// it shows a length and has recorded the file as a recent document, as Totem does),
/// `SetPosition` with the track id it gives, else `Seek` by the distance. Players show a new URL
/// before they can seek (mpv drops a `SetPosition` sent then), so the position is read back and
/// asked again until it holds.
struct MediaPlayback {
    let connection: Connection
    /// Where players that say no URL record what they open.
    let recentlyUsedPath: String?
    /// How long the player may take to start, open the track and seek.
    static let deadline: Duration = .seconds(8)
    /// A position this close to the one asked for is there.
    static let tolerance: Int64 = 1_000_000

    func play(_ track: MediaTrack, applicationDirectories: [String], configDirectories: [String]) async throws -> [String: DBusValue] {
        let app = track.app(in: applicationDirectories, configDirectories: configDirectories)
        let entry = app.map { RecentlyUsed.entryName($0.desktopID) } ?? track.player
        let program = PlayedDocuments.program(ofEntry: entry, in: applicationDirectories)
        let asked = WallClock.nowMicroseconds()
        if let running = await players().first(where: { $0.entry == entry }) {
            do {
                _ = try await connection.call(running.owner, MPRIS.path, MPRIS.player, "OpenUri", [.string(track.url)], timeout: .seconds(5))
            } catch let error as DBusError {
                throw BatonError.handlerFailed("\(entry) did not open \(track.url): \(error.name): \(error.message)")
            }
        } else if let app {
            if app.dbusActivatable {
                try await ServeDocuments.openThroughBus(app.id, uri: track.url, on: connection)
            } else {
                try Opener.launch(try app.arguments(opening: track.url, file: track.localPath ?? track.url))
            }
        } else {
            throw BatonError.notEligible("no media player is installed here to play \(track.url)")
        }
        let started = ContinuousClock.now
        var playing: (owner: String, state: MPRIS.PlayerState)?
        while playing == nil {
            for player in await players() where player.entry == entry || entry.isEmpty {
                guard let state = await read(player.owner) else { continue }
                if let url = state.url ?? recorded(by: program, since: asked, loaded: state), Self.same(url, track.url) {
                    playing = (player.owner, state)
                    break
                }
            }
            guard playing == nil else { break }
            guard ContinuousClock.now - started < Self.deadline else {
                throw BatonError.handlerFailed("\(entry.isEmpty ? "the player" : entry) did not show \(track.url) within \(Self.deadline)")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        guard let owner = playing?.owner, var state = playing?.state else { return [:] }
        if track.positionUS > Self.tolerance, state.canSeek {
            while abs(state.positionUS - track.positionUS) > Self.tolerance {
                guard ContinuousClock.now - started < Self.deadline else {
                    throw BatonError.handlerFailed("\(entry) plays \(track.url) but did not go to \(MediaTrack.clockText(track.positionUS))")
                }
                if let trackPath = MPRIS.trackPath(state.trackID) {
                    _ = try? await connection.call(owner, MPRIS.path, MPRIS.player, "SetPosition", [.objectPath(trackPath), .int64(track.positionUS)])
                } else {
                    // No track id to name (Totem): the same place, asked as a distance from here.
                    _ = try? await connection.call(owner, MPRIS.path, MPRIS.player, "Seek", [.int64(track.positionUS - state.positionUS)])
                }
                try await Task.sleep(for: .milliseconds(200))
                state = await read(owner) ?? state
            }
        }
        return ["url": .string(track.url), "player": .string(entry), "position_us": .int64(state.positionUS)]
    }

    /// What a player that says no URL plays, once it has loaded something (a length): the file
    /// its program recorded since the track was asked for.
    func recorded(by program: String?, since: UInt64, loaded state: MPRIS.PlayerState) -> String? {
        guard let program, let recentlyUsedPath, state.lengthUS > 0 else { return nil }
        return PlayedDocuments.track(playedBy: program, since: since, recordedIn: recentlyUsedPath)
    }

    /// The same track: file URLs by the path they name (players encode them differently), others as written.
    static func same(_ shown: String, _ wanted: String) -> Bool {
        if let shownPath = RecentlyUsed.localPath(shown), let wantedPath = RecentlyUsed.localPath(wanted) { return shownPath == wantedPath }
        return shown == wanted
    }

    /// The players on the bus: their unique names and the desktop id each names.
    func players() async -> [(owner: String, entry: String)] {
        var found: [(owner: String, entry: String)] = []
        for (_, owner) in await MPRIS.players(on: connection) {
            found.append((owner, await MPRIS.desktopEntry(of: owner, on: connection)))
        }
        return found
    }

    func read(_ owner: String) async -> MPRIS.PlayerState? { await MPRIS.state(of: owner, on: connection) }
}
