import BatonContract
import BatonCore
import BatonStore
import DBus
import Glibc
import Logging
import Synchronization

/// The media source: each track an MPRIS 2 player plays after the source was turned on — the URL
/// it says (mpv), else the file it recorded as a recent document (Totem, `PlayedDocuments`) — becomes an `org.baton.media.track` activity of the app
/// `org.baton.Media`, kept at the player's position. Continuing one plays it again where it
/// stopped, through the handler `org.baton.Media` (`baton serve-media`, started by the bus).
enum Media {
    static let type = Contract.Sources.Media.type
    static let app = Contract.Sources.Media.app
    static let source = Contract.Sources.Media.name
    /// A track stays an activity for a week after it was last played (the history keeps it after):
    /// a podcast paused on Friday is still there to continue on Monday.
    static let lifetime = 7 * 24 * 3600
    /// While a track plays, its position is written at most this often: players say nothing
    /// during steady play, so it is read again each time.
    static let playingInterval: Duration = .seconds(10)
    /// A position further than this from where steady play would have it is a seek, written at once.
    static let seekTolerance: Int64 = 2_000_000
}

/// The media source at work: follows the players on the bus while the source is on. Waits on
/// the bus only (players appearing and leaving, their `PropertiesChanged` and `Seeked`); a
/// timer runs only while a player plays, to read a position players do not announce.
struct MediaSource: ActivitySource {
    let store: Store
    let activities: ActivityRepository
    let announcements: any Announcements
    let background: BackgroundTasks
    let follower: SourceFollower
    let connection: Connection
    /// The user's `recently-used.xbel`, where players that say no URL record what they open.
    let recentlyUsedPath: String?
    let applicationDirectories: [String]
    let log: Logger

    func followIfOn() {
        guard (try? store.sourcesOn()[Media.source]) != nil else { return }
        follower.startIfIdle { background.start { await follow() } }
    }

    func stop() {
        follower.stop()
    }

    /// What wakes the follower.
    private enum Event: Sendable {
        /// A player's name got a new owner, or lost it (`owner` empty).
        case owner(name: String, previous: String, owner: String)
        /// A player (by its unique name) changed or sought.
        case changed(String)
        /// Time to read the positions of the players that play.
        case tick
        /// An app recorded a recent document: what a player that says no URL plays may be known now.
        case recorded
    }

    private func follow() async {
        let (events, sink) = AsyncStream<Event>.makeStream()
        let subscriptions: [AsyncStream<Message>]
        do {
            subscriptions = [
                try await connection.signals(matching: MatchRule(
                    sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged", arg0Namespace: MPRIS.namespace)),
                try await connection.signals(matching: MatchRule(
                    interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", path: MPRIS.path, arg0: MPRIS.player)),
                try await connection.signals(matching: MatchRule(interface: MPRIS.player, member: "Seeked", path: MPRIS.path)),
            ]
        } catch {
            log.error("media: cannot watch the players on the bus (\(error)); the source records nothing")
            return
        }
        // A change is read whole (GetAll): one pending read per player is enough, so a player that
        // floods its signals queues one event, not one per signal.
        let pending = PendingChanges()
        await withTaskGroup(of: Void.self) { group in
            for subscription in subscriptions {
                group.addTask {
                    for await signal in subscription {
                        if signal.member == "NameOwnerChanged" {
                            guard signal.body.count == 3, let name = signal.body[0].stringValue, let previous = signal.body[1].stringValue,
                                  let owner = signal.body[2].stringValue else { continue }
                            sink.yield(.owner(name: name, previous: previous, owner: owner))
                        } else if let sender = signal.sender, pending.add(sender) {
                            sink.yield(.changed(sender))
                        }
                    }
                }
            }
            group.addTask { await watch(events, sink: sink, pending: pending) }
            // Outside the group, whose first task to end ends the follower: a watch that cannot be
            // set up (or whose directory goes) leaves the players followed, only less promptly.
            let recorded = recentlyUsedPath.map { path in Task { await followRecentDocuments(path, sink: sink) } }
            await group.next()
            group.cancelAll()
            recorded?.cancel()
        }
        sink.finish()
    }

    /// The follower's loop: one `Players` state, changed by one event at a time.
    private func watch(_ events: AsyncStream<Event>, sink: AsyncStream<Event>.Continuation, pending: PendingChanges) async {
        var players = Players(source: self)
        // Subscribed first, so a player that appears now is not missed.
        for (name, owner) in await MPRIS.players(on: connection) { await players.appeared(name, owner: owner) }
        var tickPending = false
        if players.anyPlaying { tickPending = scheduleTick(sink) }
        for await event in events {
            switch event {
            case .owner(let name, let previous, let owner):
                if !previous.isEmpty { await players.left(previous) }
                if !owner.isEmpty { await players.appeared(name, owner: owner) }
            case .changed(let owner):
                pending.remove(owner)  // before reading: a change from now on queues another read
                await players.changed(owner)
            case .tick:
                tickPending = false
                await players.readPlaying()
            case .recorded:
                await players.readRecorders()
            }
            if !tickPending, players.anyPlaying { tickPending = scheduleTick(sink) }
        }
    }

    /// Says when `recently-used.xbel` changes (inotify), until cancelled: a player that says no URL
    /// records its file there, often just after it says it plays.
    private func followRecentDocuments(_ path: String, sink: AsyncStream<Event>.Continuation) async {
        // GTK makes the directory when it first writes the file: it may not be there yet.
        if let slash = path.lastIndex(of: "/") { mkdir(String(path[..<slash]), 0o700) }
        guard let watcher = try? DirectoryWatcher(file: path) else {
            log.warning("media: cannot watch \(path); a player that says no URL is read every \(Media.playingInterval) only")
            return
        }
        await withTaskCancellationHandler {
            for await _ in watcher.changes { sink.yield(.recorded) }
        } onCancel: {
            watcher.stop()
        }
    }

    /// A tick after `Media.playingInterval`; false when batond is stopping.
    private func scheduleTick(_ sink: AsyncStream<Event>.Continuation) -> Bool {
        background.start {
            try await Task.sleep(for: Media.playingInterval)
            sink.yield(.tick)
        } != nil
    }

    func read(_ owner: String) async -> MPRIS.PlayerState? { await MPRIS.state(of: owner, on: connection) }

    func desktopEntry(_ owner: String) async -> String { await MPRIS.desktopEntry(of: owner, on: connection) }

    /// Where to look for what a player that says no URL plays: its desktop entry's program and
    /// when its process started; nil when either is unknown.
    func recorder(_ owner: String, entry: String) async -> (program: String, since: UInt64)? {
        guard let program = PlayedDocuments.program(ofEntry: entry, in: applicationDirectories),
              let pid = try? await connection.call(
                  "org.freedesktop.DBus", ObjectPath("/org/freedesktop/DBus"), "org.freedesktop.DBus", "GetConnectionUnixProcessID",
                  [.string(owner)]).first?.uint32Value,
              let started = PlayedDocuments.processStart(pid) else { return nil }
        return (program, started)
    }

    /// The track a player that says no URL plays, from the recent documents.
    func recordedTrack(_ recorder: (program: String, since: UInt64)) -> String? {
        recentlyUsedPath.flatMap { PlayedDocuments.track(playedBy: recorder.program, since: recorder.since, recordedIn: $0) }
    }

    // MARK: Writing

    /// Records `track` as `title`: updates `id` when given and still there, else the live
    /// activity of the same URL, else advertises it. Returns the activity's id; nil when
    /// nothing was written (the app blocked, the source off).
    func record(_ track: MediaTrack, title: String, into id: String?) async -> String? {
        do {
            guard try store.sourcesOn()[Media.source] != nil, !(try store.isBlocked(Media.app)) else { return nil }
            let now = store.wallClock.now()
            var filter = Store.ActivityFilter()
            filter.appID = Media.app
            filter.targetContentID = track.url
            filter.limit = 1
            let existing = try id ?? activities.list(filter, now: now).first?.id
            if let existing {
                do {
                    let update = try ActivityUpdate(
                        payload: track.payload, options: ["title": title, "replace_payload": "true", "expires_in": String(Media.lifetime)],
                        limits: store.limits)
                    announcements.announce(try await activities.update(existing, requestID: nil, now: now) { activity, lookups, now in
                        guard let type = try lookups.activityType(activity.type) else { throw BatonError.unknownActivityType(activity.type) }
                        return (try update.apply(to: activity, type: type, now: now, limits: lookups.limits), false)
                    })
                    return existing
                } catch let error as BatonError where error.code == .notFound || error.code == .expired || error.code == .unknownActivityType {
                    // Ended or forgotten meanwhile: the track is advertised again below.
                }
            }
            return try await advertise(track, title: title, now: now)
        } catch {
            log.error("media: recording \(track.url): \(error)")
            return nil
        }
    }

    private func advertise(_ track: MediaTrack, title: String, now: UInt64) async throws -> String {
        let type = try await activities.sourceType(Media.type, app: Media.app, options: ["title": "Track", "required_keys": "url"])
        var options = ["target_content_id": track.url, "eligible_for_search": "true", "expires_in": String(Media.lifetime)]
        if track.isWebStream { options["webpage_url"] = track.url }
        let advertisement = try Advertisement.parse(type: type, title: title, payload: track.payload, options: options, limits: store.limits)
        let outcome = try await activities.advertise(
            advertisement.makeActivity(id: Identifier.make(at: now), type: type, sceneID: nil, now: now), requestID: nil,
            quota: store.limits.liveActivitiesPerApp)
        announcements.announce(outcome)
        return outcome.id
    }

}

/// The players with a change waiting to be read.
private final class PendingChanges: Sendable {
    private let owners = Mutex<Set<String>>([])

    /// True when `owner` had none waiting (then an event is queued for it).
    func add(_ owner: String) -> Bool { owners.withLock { $0.insert(owner).inserted } }

    func remove(_ owner: String) { _ = owners.withLock { $0.remove(owner) } }
}

/// The players the media source follows, by unique name, and what it last wrote of each.
/// Changed by the follower's loop only, one event at a time.
private struct Players {
    let source: MediaSource

    struct Player {
        let name: String
        var desktopEntry: String
        /// For a player that says no URL: whose recent documents say what it plays, and since when.
        var recorder: (program: String, since: UInt64)?
        /// What the player said when last read, and when (steady play moves on from there).
        var state: MPRIS.PlayerState
        var readAt: ContinuousClock.Instant
        /// The activity of the track it plays, once written, and what was written.
        var activity: String?
        var written: (positionUS: Int64, status: String, at: ContinuousClock.Instant)?

        /// Where the player is now, as steady play from the last reading has it.
        func position(at now: ContinuousClock.Instant) -> Int64 {
            state.positionUS + (state.isPlaying ? Players.microseconds(now - readAt) : 0)
        }
    }

    private var players: [String: Player] = [:]

    static func microseconds(_ duration: Duration) -> Int64 {
        let parts = duration.components
        return parts.seconds * 1_000_000 + parts.attoseconds / 1_000_000_000_000
    }

    init(source: MediaSource) { self.source = source }

    /// Whether a player plays a track it says or records (one that records it may not have yet).
    var anyPlaying: Bool { players.values.contains { $0.state.isPlaying && ($0.state.url != nil || $0.recorder != nil) } }

    /// What the player says, stamped when it was asked: the position it gives is of a moment
    /// after that, so steady play counted from there does not fall behind the player by however
    /// long the answer took to arrive (under load, longer than a player's own reply).
    private func reading(_ owner: String) async -> (state: MPRIS.PlayerState, askedAt: ContinuousClock.Instant)? {
        let asked = ContinuousClock.now
        return await source.read(owner).map { ($0, asked) }
    }

    mutating func appeared(_ name: String, owner: String) async {
        guard let read = await reading(owner) else { return }
        let entry = await source.desktopEntry(owner)
        let recorder = read.state.url == nil ? await source.recorder(owner, entry: entry) : nil
        players[owner] = Player(name: name, desktopEntry: entry, recorder: recorder, state: MPRIS.PlayerState(), readAt: read.askedAt)
        await update(owner, to: read)
    }

    /// The player left the bus: its track keeps the position it had reached.
    mutating func left(_ owner: String) async {
        guard var player = players.removeValue(forKey: owner) else { return }
        await finish(&player, at: .now)
    }

    mutating func changed(_ owner: String) async {
        guard players[owner] != nil, let read = await reading(owner) else { return }
        await update(owner, to: read)
    }

    /// Reads again the players whose track is known from what they record.
    mutating func readRecorders() async {
        for (owner, player) in players where player.recorder != nil {
            if let read = await reading(owner) { await update(owner, to: read) }
        }
    }

    mutating func readPlaying() async {
        for (owner, player) in players where player.state.isPlaying {
            if let read = await reading(owner) { await update(owner, to: read) }
        }
    }

    /// Takes in what the player says now: a new track ends the last one at its position and is
    /// recorded once it plays; the same track is written again when it paused or played, sought,
    /// or played on for `Media.playingInterval`.
    private mutating func update(_ owner: String, to read: (state: MPRIS.PlayerState, askedAt: ContinuousClock.Instant)) async {
        guard var player = players[owner] else { return }
        var state = read.state
        if state.url == nil, let recorder = player.recorder { state.url = source.recordedTrack(recorder) }
        let now = ContinuousClock.now
        if player.state.url != state.url { await finish(&player, at: now) }
        player.state = state
        player.readAt = read.askedAt
        if state.url != nil, player.activity != nil || state.isPlaying, needsWrite(player, at: now) {
            await write(&player, at: read.askedAt)
        }
        players[owner] = player
    }

    private func needsWrite(_ player: Player, at now: ContinuousClock.Instant) -> Bool {
        guard player.activity != nil, let written = player.written else { return true }
        if written.status != player.state.status { return true }
        let steady = written.positionUS + (player.state.isPlaying ? Self.microseconds(now - written.at) : 0)
        if abs(player.state.positionUS - steady) > Media.seekTolerance { return true }
        return player.state.isPlaying && now - written.at >= Media.playingInterval
    }

    /// Writes the track at the position steady play has reached, then forgets it (the player
    /// moved to another track, stopped giving one, or left).
    private func finish(_ player: inout Player, at now: ContinuousClock.Instant) async {
        if player.activity != nil, player.state.url != nil {
            var last = player
            last.state.positionUS = player.position(at: now)
            last.state.status = "Stopped"
            await write(&last, at: now)
        }
        player.activity = nil
        player.written = nil
    }

    private func write(_ player: inout Player, at now: ContinuousClock.Instant) async {
        guard let url = player.state.url else { return }
        let state = player.state
        let track = MediaTrack(
            url: url, positionUS: max(0, state.positionUS), lengthUS: max(0, state.lengthUS), player: player.desktopEntry, playing: state.isPlaying)
        let title = String(MediaTrack.title(title: state.title, artists: state.artists, url: url).prefix(200))  // 200 characters fit the title limit
        guard let id = await source.record(track, title: title, into: player.activity) else { return }
        player.activity = id
        player.written = (state.positionUS, state.status, now)
    }
}
