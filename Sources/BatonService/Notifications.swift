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
}

extension HandoffService {
    /// How old an arriving activity may be (last changed on its machine) and still be offered.
    static let noticeFreshness: UInt64 = 3 * 60 * 1_000_000

    static let notifications = (name: "org.freedesktop.Notifications", path: ObjectPath(stringLiteral: "/org/freedesktop/Notifications"))

    /// Offers the newest of the activities another machine just advertised, if any may be.
    func offerArrivals(_ activities: [Activity]) {
        guard !activities.isEmpty else { return }
        background.start { await self.offerNewest(of: activities) }
    }

    private func offerNewest(of activities: [Activity]) async {
        let now = clock.now()
        guard !paused.isPaused, (try? store.notificationsEnabled()) == true else { return }
        let offered = activities
            .filter { activity in
                // A machine whose clock runs ahead sends changes from the future: fresh too.
                activity.isRemote && activity.eligibleForHandoff && !activity.isExpired(at: now)
                    && activity.updatedAt &+ Self.noticeFreshness >= now
                    && (try? store.isBlocked(activity.appID)) == false
            }
            .max { $0.updatedAt < $1.updatedAt }
        guard let activity = offered else { return }
        let app = AppEntry.find(activity.appID, in: applicationDirectories)
        let machine = (try? store.remoteDeviceNames())?[activity.deviceID] ?? "another machine"
        let replacing = notices.shown.withLock { $0?.notificationID } ?? 0
        do {
            let reply = try await connection.call(Self.notifications.name, Self.notifications.path, Self.notifications.name, "Notify", [
                .string("Baton"), .uint32(replacing), .string(app?.icon ?? "org.baton.Baton"), .string(activity.title),
                .string("\(app?.name ?? activity.appID) on \(machine)"),
                .strings(["default", "Continue", "dismiss", "Dismiss"]),
                .record(["desktop-entry": .string("org.baton.Baton")]), .int32(-1),
            ], timeout: .seconds(5))
            guard let id = reply.first?.uint32Value else { return }
            notices.shown.withLock { $0 = .init(notificationID: id, activityID: activity.id) }
        } catch {
            if !notices.serverMissingLogged.exchange(true, ordering: .relaxed) {
                log.info("no notification of activities from other machines: \(error) (said once)")
            }
        }
    }

    /// Withdraws the notification if it offers one of `activityIDs` (it ended, or was continued).
    func withdrawOffer(of activityIDs: some Sequence<String>) {
        let ids = Set(activityIDs)
        guard let shown = notices.shown.withLock({ shown -> HandoffNotices.Shown? in
            guard let current = shown, ids.contains(current.activityID) else { return nil }
            shown = nil
            return current
        }) else { return }
        background.start { [connection] in
            _ = try? await connection.call(
                Self.notifications.name, Self.notifications.path, Self.notifications.name, "CloseNotification",
                [.uint32(shown.notificationID)], timeout: .seconds(5))
        }
    }

    /// Follows the notification server's `ActionInvoked` and `NotificationClosed` until cancelled:
    /// the default action continues the activity offered here.
    func runNotices() async {
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
                await continueFromDesktop(shown.activityID, options: [:])
                withdrawOffer(of: [shown.activityID])
            case ("ActionInvoked", _):
                withdrawOffer(of: [shown.activityID])
            default:  // NotificationClosed: gone already.
                notices.shown.withLock { if $0 == shown { $0 = nil } }
            }
        }
    }

    // MARK: The user's switch

    func setNotifications(_ call: MethodCall) async throws -> [DBusValue] {
        let enabled: Bool = try call.argument(0)
        guard try await store.writing({ try $0.setNotifications(enabled) }) else { return [] }
        log.info("notifications of other machines' activities \(enabled ? "on" : "off")")
        if !enabled { notices.shown.withLock { $0 }.map { withdrawOffer(of: [$0.activityID]) } }
        emitRootPropertiesChanged(Contract.Interface.status, [Contract.Status.Property.notifications: .boolean(enabled)])
        return []
    }
}
