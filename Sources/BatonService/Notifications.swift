import BatonContract
import BatonCore
import BatonStore
import DBus
import Logging
import Synchronization

/// "Continue from your laptop" (docs/DESIGN.md, "Desktop surfaces"): when an activity that
/// can be continued arrives from another machine, one notification through
/// `org.freedesktop.Notifications`, replacing the one before and withdrawn when the activity
/// ends or is continued here; its default action continues it here.
///
/// None while recording is paused, for a blocked app, for what arrives older than
/// `noticeFreshness` (a catch-up after a night offline notifies nothing), or while the user
/// has turned them off (`Status.SetNotifications`). Without a notification server, nothing:
/// said once in the log.
final class HandoffNotices: Sendable {
    /// The notification on screen: the server's id for it, and the activity it offers.
    struct Shown: Sendable, Equatable {
        let notificationID: UInt32
        let activityID: String
    }

    let shown = Mutex<Shown?>(nil)
    let serverMissingLogged = Atomic(false)
    /// The track last offered when it stopped, and where: offered again only where it stops next.
    let lastTrackOffered = Mutex<(id: String, positionUS: Int64)?>(nil)
    /// The latest offer's notification under way: the next waits for it.
    let lastOffer = Mutex<Task<Void, any Error>?>(nil)
    /// Where a withdrawal is sent, and the task that sends it.
    let connection: Connection
    let background: BackgroundTasks

    init(connection: Connection, background: BackgroundTasks) {
        self.connection = connection
        self.background = background
    }

    /// Withdraws the notification on screen, if there is one (the user turned offers off).
    func withdrawShown() {
        if let current = shown.withLock({ $0 }) { withdraw(of: [current.activityID]) }
    }

    /// Withdraws the notification if it offers one of `activityIDs` (it ended, or was continued).
    func withdraw(of activityIDs: some Sequence<String>) {
        let ids = Set(activityIDs)
        guard let withdrawn = shown.withLock({ shown -> Shown? in
            guard let current = shown, ids.contains(current.activityID) else { return nil }
            shown = nil
            return current
        }) else { return }
        let server = NotificationOffers.notifications
        background.start { [connection] in
            _ = try? await connection.call(server.name, server.path, server.name, "CloseNotification",
                                           [.uint32(withdrawn.notificationID)], timeout: .seconds(5))
        }
    }
}

/// The offers on screen and what acts on them, holding what they use: the state
/// (`HandoffNotices`), the store and the activity repository, the bus connection, the pause.
struct NotificationOffers: Sendable {
    let notices: HandoffNotices
    let store: Store
    let activities: ActivityRepository
    let paused: PausedActivities
    let connection: Connection
    let background: BackgroundTasks
    let applicationDirectories: [String]
    let log: Logger
    /// Continues an activity as the desktop asks (`HandoffService.continueFromDesktop`).
    let continueFromDesktop: @Sendable (_ id: String, _ options: [String: String]) async -> Void
    var clock: any DaemonClock { store.wallClock }

    /// How old an arriving activity may be (last changed on its machine) and still be offered.
    static let noticeFreshness: UInt64 = 3 * 60 * 1_000_000

    static let notifications = (name: "org.freedesktop.Notifications", path: ObjectPath(stringLiteral: "/org/freedesktop/Notifications"))

    /// The newest of the activities another machine just advertised that may be offered, if any.
    /// Decided when they arrive, before the bus hears of them: a pause, a block or the switch
    /// turned off after they were announced does not change what was decided then.
    func offerable(_ arrived: [Activity]) -> Activity? {
        guard !arrived.isEmpty else { return nil }
        let now = clock.now()
        guard !paused.isPaused, (try? store.notificationsEnabled()) == true else { return nil }
        return arrived
            .filter { activity in
                // A machine whose clock runs ahead sends changes from the future: fresh too.
                // A track is offered once it stopped playing there (`stoppedTracks`), not while it plays.
                activity.isRemote && activity.eligibleForHandoff && !activity.isExpired(at: now)
                    && (activity.type != Media.type || MediaTrack(payload: activity.payload)?.playing == false)
                    && activity.updatedAt &+ Self.noticeFreshness >= now
                    && (try? store.isBlocked(activity.appID)) == false
            }
            .max { $0.updatedAt < $1.updatedAt }
    }

    /// Of the activities another machine just updated, its tracks that stopped playing there,
    /// each once per place it stopped: "continue from the laptop" is offered when the laptop
    /// stops, where it stopped.
    func stoppedTracks(_ updated: [Activity]) -> [Activity] {
        updated.filter { activity in
            guard activity.type == Media.type, let track = MediaTrack(payload: activity.payload), !track.playing else { return false }
            return notices.lastTrackOffered.withLock { last in
                guard last?.id != activity.id || last?.positionUS != track.positionUS else { return false }
                last = (activity.id, track.positionUS)
                return true
            }
        }
    }

    /// Shows `activity`'s notification, replacing the one before, after every offer made
    /// before it: a later arrival's notification is never replaced by an earlier one's.
    func offer(_ activity: Activity) {
        notices.lastOffer.withLock { last in
            let previous = last
            last = background.start {
                _ = await previous?.result
                await notify(activity)
            }
        }
    }

    private func notify(_ activity: Activity) async {
        // A track is shown as its player's (its name and icon), when that player is installed here.
        let player = activity.type == Media.type ? MediaTrack(payload: activity.payload)?.player : nil
        let app = player.flatMap { AppEntry.find($0, in: applicationDirectories) } ?? AppEntry.find(activity.appID, in: applicationDirectories)
        let machine = (try? store.remoteDeviceNames())?[activity.deviceID] ?? "another machine"
        let replacing = notices.shown.withLock { $0?.notificationID } ?? 0
        let posted = await postNotification(
            summary: activity.title, body: Self.body(of: activity, app: app, machine: machine), icon: app?.icon,
            actions: ["default", "Continue", "dismiss", "Dismiss"], replacing: replacing)
        guard let posted else { return }
        notices.shown.withLock { $0 = .init(notificationID: posted, activityID: activity.id) }
    }

    /// The app and the machine ("Notes on desktop"); for a track, where it stopped too
    /// ("Media on laptop, stopped at 12:34"): the position is why one continues it there.
    static func body(of activity: Activity, app: AppEntry?, machine: String) -> String {
        let origin = "\(app?.name ?? AppEntry.readableName(activity.appID)) on \(machine)"
        guard activity.type == Media.type, let track = MediaTrack(payload: activity.payload), track.positionUS > 0 else { return origin }
        return "\(origin), stopped at \(MediaTrack.clockText(track.positionUS))"
    }

    /// Says why a continuation the desktop asked for (a search result, a notification) did not
    /// open: the person who asked is waiting for a window, and the desktop takes no answer.
    func tellWhyNotContinued(_ id: String, _ error: any Error) async {
        let activity = try? activities.live(id, now: clock.now())
        let app = activity.map { activity in
            (AppEntry.find(activity.appID, in: applicationDirectories), AppEntry.readableName(activity.appID))
        }
        let appName = app.map { $0.0?.name ?? $0.1 } ?? "its app"
        let waiting = (try? store.lastContinuation(activityID: id))?.state == "pending"
        let body = waiting
            ? "\(appName) did not start. It opens there when \(appName) starts again."
            : (error as? BatonError)?.message ?? "Something went wrong; baton activities explain \(id) says more."
        _ = await postNotification(summary: "Could not continue “\(activity?.title ?? id)”", body: body, icon: app?.0?.icon, actions: [], replacing: 0)
    }

    /// `Notify` from Baton; the notification's id, or nil without a notification server (said
    /// once in the log).
    private func postNotification(summary: String, body: String, icon: String?, actions: [String], replacing: UInt32) async -> UInt32? {
        do {
            let reply = try await connection.call(Self.notifications.name, Self.notifications.path, Self.notifications.name, "Notify", [
                .string("Baton"), .uint32(replacing), .string(icon ?? "org.baton.Baton"), .string(summary), .string(body),
                .strings(actions), .record(["desktop-entry": .string("org.baton.Baton")]), .int32(-1),
            ], timeout: .seconds(5))
            return reply.first?.uint32Value
        } catch {
            if !notices.serverMissingLogged.exchange(true, ordering: .relaxed) {
                log.info("cannot show notifications: \(error) (said once)")
            }
            return nil
        }
    }

    /// Follows the notification server's `ActionInvoked` and `NotificationClosed` until cancelled:
    /// the default action continues the activity offered here.
    func run() async {
        let rule = MatchRule(sender: Self.notifications.name, interface: Self.notifications.name)
        guard let signals = try? await connection.signals(matching: rule) else {
            log.error("cannot follow the notification server's signals; notifications cannot be acted on")
            return
        }
        for await signal in signals {
            guard let id = signal.body.first?.uint32Value,
                  let shown = notices.shown.withLock({ $0 }), shown.notificationID == id else { continue }
            // The signal is the server's only if it owns the name now: anyone may address one to us.
            guard let owner = try? await connection.nameOwner(Self.notifications.name), owner == signal.sender else { continue }
            switch (signal.member, signal.body.count == 2 ? signal.body[1].stringValue : nil) {
            case ("ActionInvoked", "default"):
                // Continued here: that withdraws it (a server may keep a notification acted on).
                await continueFromDesktop(shown.activityID, [:])
                notices.withdraw(of: [shown.activityID])
            case ("ActionInvoked", _):
                notices.withdraw(of: [shown.activityID])
            default:  // NotificationClosed: gone already.
                notices.shown.withLock { if $0 == shown { $0 = nil } }
            }
        }
    }
}

extension HandoffService {
    /// Offers of other machines' activities, over this service.
    var offers: NotificationOffers {
        NotificationOffers(
            notices: notices, store: store, activities: activities, paused: paused, connection: connection, background: background,
            applicationDirectories: applicationDirectories, log: log,
            continueFromDesktop: { id, options in await self.continueFromDesktop(id, options: options) })
    }
}
