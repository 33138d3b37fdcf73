import BatonContract
import BatonCore
import BatonStore
import DBus
import Logging

/// `org.baton.Handoff1.Privacy`: apps blocked from advertising, pausing recording, and
/// forgetting an app. It holds only what it uses: the store, the pause, the clock, a log, and
/// the service's announcements.
struct PrivacyInterface: Sendable {
    let store: Store
    let paused: PausedActivities
    let clock: any DaemonClock
    let log: Logger
    let announcements: any Announcements

    var interface: Interface {
        Interface(Contract.Interface.privacy, methods: [
            Method(Contract.Privacy.blockApp, ordering: .concurrent) { call in try await setBlocked(call, true) },
            Method(Contract.Privacy.unblockApp, ordering: .concurrent) { call in try await setBlocked(call, false) },
            Method(Contract.Privacy.forgetApp, ordering: .concurrent, handler: forgetApp),
            Method(Contract.Privacy.pause, ordering: .concurrent, handler: pauseRecording),
            Method(Contract.Privacy.resume, ordering: .concurrent) { _ in
                await resumeRecording()
                return []
            },
        ], properties: [
            Property(Contract.Privacy.Property.blockedApps, "as") { _ in .strings(try store.blockedApps()) },
            Property(Contract.Privacy.Property.paused, "b") { _ in .boolean(paused.isPaused) },
            Property(Contract.Privacy.Property.pausedUntil, "t") { _ in .uint64(paused.until ?? 0) },
        ])
    }

    /// The longest pause with an end: ten years (`Pause(0)` pauses until `Resume`).
    static let longestPause: UInt64 = 10 * 365 * 86_400

    private func pauseRecording(_ call: MethodCall) async throws -> [DBusValue] {
        let seconds: UInt64 = try call.argument(0)
        guard seconds <= Self.longestPause else {
            throw BatonError.invalidArgument("a pause lasts at most \(Self.longestPause) seconds; 0 pauses until Resume")
        }
        let until = seconds == 0 ? 0 : clock.now() + seconds * 1_000_000
        try await store.writing { try $0.setPaused(until: until) }
        if paused.pause(until: until) {
            log.info(seconds == 0 ? "recording paused until resumed" : "recording paused until \(WallClock.text(until))")
            await announcePause()
        }
        return []
    }

    /// Ends the pause: what was advertised meanwhile is forgotten (`Invalidated` for each), and
    /// what was updated meanwhile is as it was before the pause (`Updated` for each).
    func resumeRecording() async {
        do {
            try await store.writing { try $0.setPaused(until: nil) }
        } catch {
            // Still paused on disk: the next start pauses again, which records nothing it should not.
            log.error("could not store that recording resumed: \(error)")
        }
        guard let (forgotten, reverted) = paused.resume() else { return }
        log.info("recording resumed; forgotten: \(forgotten.count) activities advertised and \(reverted.count) updates made while paused")
        announcements.announceRemoved(forgotten.map { Ended(id: $0.id, appID: $0.appID) })
        for activity in reverted { announcements.signals.updated(activity.id, app: activity.appID) }
        await announcePause()
    }

    private func announcePause() async {
        await announcements.signals.propertiesChanged(interface, [Contract.Privacy.Property.paused, Contract.Privacy.Property.pausedUntil])
    }

    private func setBlocked(_ call: MethodCall, _ blocked: Bool) async throws -> [DBusValue] {
        let app: String = try call.argument(0)
        try Validate.reverseDNS(app, what: "app id", limits: store.limits)
        guard try await store.writing({ try $0.setBlocked(app, blocked) }) else { return [] }
        log.info("\(blocked ? "blocked" : "unblocked") \(app)")
        await announcements.signals.propertiesChanged(interface, [Contract.Privacy.Property.blockedApps])
        return []
    }

    func forgetApp(_ call: MethodCall) async throws -> [DBusValue] {
        let app: String = try call.argument(0)
        try Validate.reverseDNS(app, what: "app id", limits: store.limits)
        let forgotten = try await store.writing { try $0.forget(appID: app) }
        announcements.announceRemoved(forgotten.activities)
        announcements.scenes.remove(forgotten.scenes)
        let counts = [
            ("activities", forgotten.activities.count), ("history", forgotten.history), ("scenes", forgotten.scenes.count),
            ("types", forgotten.types), ("values", forgotten.values),
        ]
        log.info("forgot \(app): \(counts.map { "\($0.1) \($0.0)" }.joined(separator: ", "))")
        return [.dictionary(key: .string, value: .uint32, counts.map { .init(.string($0.0), .uint32(UInt32(clamping: $0.1))) })]
    }
}
