import BatonCore
import BatonStore
import Crypto
import FoundationEssentials
import Logging
import Synchronization

/// Sync across machines for one batond: sends this device's outbox to its log on the
/// PostgreSQL server and applies the other devices' logs to the store.
///
/// One loop (`run`) owns one connection at a time. While connected it `LISTEN`s on the user's
/// channel, sends, then catches up on every other device's log by seq; it does so again when
/// woken — by a NOTIFY, by a commit that filled the outbox, by `Init`/`Join`/`Leave` — and every
/// `catchUpPeriod` regardless. A failure drops the connection; the loop waits (longer each time,
/// at most `maximumBackoff`) and starts over, catching up first. With the server away batond works as
/// without sync, and the outbox keeps what is to be sent.
public final class SyncEngine: Sendable {
    /// `off` (not set up), `connecting`, `online`, `offline` (set up, server unreachable).
    public enum State: String, Sendable { case off, connecting, online, offline }

    public struct Device: Sendable, Equatable {
        public var id: String
        public var name: String
        public var lastSeen: UInt64
        public var revoked: Bool
        public var isThisDevice: Bool
        /// Its X25519 public key, for wrapping epoch keys to it (empty when not read).
        var publicKey: [UInt8] = []
        /// The key epoch its name is sealed with on the server.
        var nameEpoch: Int32 = 0
    }

    /// A device's name this device has no key for (sealed with an epoch it never learned).
    static let unreadableName = "(unknown)"

    let store: Store
    let configPath: String
    let log: Logger
    /// Called with what other devices' records changed here, after each applied batch.
    let onApplied: @Sendable (Store.Applied) -> Void
    /// Called when a property of `Sync` changed.
    let onChange: @Sendable () -> Void
    let catchUpPeriod: Duration
    /// How long one exchange with the server may take before the connection is given up.
    let answerTimeout: Duration

    let config: Mutex<SyncConfig?>
    /// The key epoch this device's name is sealed with on the server, as last read or written.
    let nameEpoch = Mutex<Int32?>(nil)
    /// Said once: the server refuses to let this device remove its expired copies of the clipboard.
    let clipboardRemovalRefused = Atomic(false)
    /// Devices whose names no key of this device opens and that it never knew: another user's
    /// files in a sync folder, or a device of a key this one has not been given. Left alone
    /// (no device, no records) until the devices are read again and one opens.
    private let strangers = Mutex<Set<String>>([])
    private let stateValue = Mutex(State.off)
    private let lastSync = Atomic<UInt64>(0)
    let bell = Wakeup()
    /// Rung by Init, Join and Leave only: what ends a wait before connecting again.
    let deviceChanged = Wakeup()
    /// Rounds of sending and catching up so far (for tests: an idle engine makes none).
    let rounds = Atomic(0)

    public init(store: Store, configPath: String, log: Logger, catchUpPeriod: Duration = .seconds(30), answerTimeout: Duration = .seconds(20),
                onApplied: @escaping @Sendable (Store.Applied) -> Void, onChange: @escaping @Sendable () -> Void) throws(SyncError) {
        self.answerTimeout = answerTimeout
        self.store = store
        self.configPath = configPath
        self.log = log
        self.catchUpPeriod = catchUpPeriod
        self.onApplied = onApplied
        self.onChange = onChange
        config = Mutex(try SyncConfig.load(from: configPath))
        store.onOutbox { [bell] in bell.ring() }
    }

    public var state: State { stateValue.withLock { $0 } }
    public var settings: SyncConfig? { config.withLock { $0 } }
    /// When the last round of sending and catching up finished (µs since the epoch); 0 before.
    public var lastSyncAt: UInt64 { lastSync.load(ordering: .relaxed) }

    func set(_ state: State) {
        // Without settings sync is off, whatever a loop still ending with the old ones says.
        let state = settings == nil ? State.off : state
        let changed = stateValue.withLock { current in
            defer { current = state }
            return current != state
        }
        if changed { onChange() }
    }

    // MARK: The loop

    /// Syncs until the task is cancelled.
    public func run() async {
        var failures = 0
        while !Task.isCancelled {
            guard let config = settings else {
                set(.off)
                await bell.wait(timeout: .seconds(3600))
                continue
            }
            set(failures == 0 ? .connecting : .offline)
            do {
                try await session(config)
                failures = 0
            } catch is CancellationError {
                return
            } catch {
                // It was working: a new outage, said again.
                if state == .online { failures = 0 }
                failures += 1
                set(.offline)
                if failures == 1 {
                    let until = FolderTransport.folder(in: config.url) == nil ? "the server answers" : "the folder is back"
                    log.warning("sync: \(Self.describe(error)); retrying until \(until)")
                }
                log.debug("sync: attempt \(failures) failed: \(Self.describe(error))")
                await pause(afterFailures: failures, settings: config)
            }
        }
    }

    /// Waits before connecting again: 0.25 s, 0.5 s, 1 s … at most `maximumBackoff`. Only a
    /// change of device (Init, Join, Leave) cuts it short, with a bell of its own: outbox
    /// commits ring the sync bell, and waking for each while offline cost every commit a
    /// thread switch; their ring is kept for the session that follows.
    private func pause(afterFailures failures: Int, settings before: SyncConfig) async {
        let clock = ContinuousClock()
        let deadline = clock.now + min(Self.maximumBackoff, .milliseconds(250 << min(failures - 1, 10)))
        while !Task.isCancelled, clock.now < deadline, settings?.isSameDevice(as: before) == true {
            await deviceChanged.wait(timeout: deadline - clock.now)
        }
    }

    /// The longest wait between attempts to reach the server: how late a device may notice that it is back.
    static let maximumBackoff: Duration = .seconds(8)

    /// One connection's life: returns when the settings change, throws when the connection fails.
    private func session(_ config: SyncConfig) async throws {
        try await withTransport(config.url, me: config.deviceID) { transport in
            // The connection's end rings too: the loop finds out.
            try await transport.listening(on: Self.channel(user: config.user), notified: { [bell] in bell.ring() }) {
                try await keepInSync(on: transport, config)
            }
        }
    }

    func folderTransport(_ folder: String, me: String?) -> FolderTransport {
        FolderTransport(path: folder, me: me, log: log, now: { [store] in store.wallClock.now() })
    }

    /// Runs `body` with the transport `url` names — the folder of a `file://` URL or a path, the
    /// server of a `postgres://` one — and closes it however `body` ends. `me`: this device, once joined.
    func withTransport<T: Sendable>(_ url: String, me: String?, _ body: (any SyncTransport) async throws -> T) async throws -> T {
        if let folder = FolderTransport.folder(in: url) { return try await body(folderTransport(folder, me: me)) }
        return try await ServerSession.with(try ServerAddress(url), timeout: answerTimeout) { try await body($0) }
    }

    /// Sends and catches up, then waits for a bell, until the settings change or the connection fails.
    private func keepInSync(on session: some SyncTransport, _ config: SyncConfig) async throws {
        set(.online)
        var firstRound = true
        // A new epoch key leaves the session as it is.
        while !Task.isCancelled, let current = settings, current.isSameDevice(as: config) {
            rounds.add(1, ordering: .relaxed)
            log.trace("sync: sending")
            try await send(on: session, current)
            try await removeExpiredClipboard(on: session, current)
            log.trace("sync: catching up")
            try await catchUp(on: session, current, refreshDevices: firstRound)
            try await resealName(on: session, settings ?? current)
            firstRound = false
            log.trace("sync: waiting")
            lastSync.store(store.wallClock.now(), ordering: .relaxed)
            onChange()
            if session.isClosed { throw SyncError.server(session.closedReason) }
            await bell.wait(timeout: catchUpPeriod)
        }
    }

    /// The user's NOTIFY channel; a hash, so the channel's name does not spell the user's.
    static func channel(user: String) -> String {
        "baton_" + Hex.encode(Array(Insecure.MD5.hash(data: Array(user.utf8))))
    }

    // MARK: Sending

    /// How long a change waits for others to leave with it (see `send`): long enough that a
    /// burst leaves in rounds of a few dozen, whose fixed cost (two commits, two server round
    /// trips, the other devices' wake-ups) then stops competing with the calls being made;
    /// short enough that a change still reaches the other machines before a person could notice.
    static let coalescing: Duration = .milliseconds(10)

    /// Sends the outbox; then, when the transport asks for it (a folder holding many files of
    /// this device's), compacts this device's log: its whole state goes out again and what
    /// came before is dropped, so the folder stays small and a device that comes back after
    /// weeks reads the state, not the history.
    private func send(on session: some SyncTransport, _ config: SyncConfig) async throws {
        try await sendOutbox(on: session, config)
        guard try await session.wantsCompaction(user: config.user, device: config.deviceID) else { return }
        let superseded = try await store.writing { transaction in
            try transaction.enqueueSnapshot { activities, types in try SyncRecord.complete(activities: activities, types: types).encoded() }
        }
        // Returns once the outbox is empty: the snapshot and its last record are sent.
        try await sendOutbox(on: session, config)
        try await session.dropLog(user: config.user, device: config.deviceID, through: superseded)
        log.info("sync: compacted this device's log: its state was written again and its records up to \(superseded) dropped")
    }

    /// Sends the outbox, a staged batch at a time, each in one server transaction; a batch
    /// leaves the outbox only after the server committed it.
    private func sendOutbox(on session: some SyncTransport, _ config: SyncConfig) async throws {
        let epoch = config.currentEpoch
        guard let key = config.key(epoch: epoch) else { throw SyncError.state("the user's key in \(configPath) is damaged") }
        while true {
            // Read first: a round with nothing to send (most wake-ups) takes no write transaction.
            guard let oldest = try store.oldestOutboxChange() else { return }
            // Changes made within `coalescing` of each other leave in one batch: a burst of
            // Advertise calls costs one staging, one server round trip and one NOTIFY, not one each.
            let age = Duration.microseconds(Int64(store.wallClock.now()) - Int64(oldest))
            // (A wall clock set back makes the age negative: no wait then, rather than a long one.)
            if age >= .zero && age < Self.coalescing { try await Task.sleep(for: Self.coalescing - age) }
            let batch = try await store.writing { transaction in
                try transaction.stageOutbox(limit: 500) { try SyncRecord($0).encoded() }
            }
            guard let last = batch.last else { return }
            var seqs: [Int64] = [], hlcs: [Int64] = [], sealed: [[UInt8]] = []
            for record in batch {
                let context = Seal.recordContext(user: config.user, device: config.deviceID, seq: record.logSeq, epoch: epoch, hlc: record.hlc)
                seqs.append(record.logSeq)
                hlcs.append(record.hlc)
                sealed.append(try Seal.seal(record.body, key: key, context: context))
            }
            // A batch the server committed before the reply was lost is sent again: its rows are there already.
            try await session.append(user: config.user, device: config.deviceID, epoch: epoch, seqs: seqs, hlcs: hlcs, sealed: sealed)
            try await store.writing { try $0.sent(upTo: last.logSeq) }
            onChange()
        }
    }

    // MARK: Catching up

    /// Applies every other device's log from where this device left it, in seq order. Asks the
    /// server first which logs moved (`log_head`, one small read), so that a wake-up for this
    /// device's own records, or for nothing new, costs one query; the devices' names are read
    /// again at the first round of a connection and when a log of an unknown device appears.
    private func catchUp(on session: some SyncTransport, _ config: SyncConfig, refreshDevices: Bool) async throws {
        var heads = try await session.logHeads(user: config.user)
        var names = try store.remoteDeviceNames()
        if refreshDevices || heads.keys.contains(where: { $0 != config.deviceID && names[$0] == nil && !strangers.withLock { $0 }.contains($0) }) {
            // What the others see as this device's last_seen: when it last connected.
            if refreshDevices { try await session.touch(user: config.user, device: config.deviceID) }
            var devices = try await session.devices(config)
            // The keys of the epochs names are sealed with, where this device can have them now:
            // then the names read again open.
            var fetched = false
            for epoch in Set(devices.filter { $0.name == Self.unreadableName }.map(\.nameEpoch)) where config.key(epoch: epoch) == nil {
                if (try? await epochKey(epoch, on: session)) != nil { fetched = true }
            }
            if fetched, let keyed = settings { devices = try await session.devices(keyed) }
            var unknown: Set<String> = []
            for device in devices where !device.isThisDevice {
                // A name sealed with a key this device does not have yet keeps the one it knew. One
                // it never knew, that the key of its epoch does not open either, is not the user's:
                // no device, and no key is wrapped to it.
                if device.name == Self.unreadableName, names[device.id] == nil, settings?.key(epoch: device.nameEpoch) != nil {
                    unknown.insert(device.id)
                    continue
                }
                let name = device.name == Self.unreadableName ? names[device.id] ?? device.name : device.name
                try await store.writing { try $0.noteRemoteDevice(id: device.id, name: name, lastSeen: device.lastSeen, revoked: device.revoked) }
                names[device.id] = name
            }
            if strangers.withLock({ $0 }) != unknown, !unknown.isEmpty {
                log.notice("""
                    sync: \(unknown.count) device(s) where this machine syncs cannot be read with this user's key (another user's files, or a key \
                    this machine has not been given yet); left alone: \(unknown.sorted().joined(separator: ", "))
                    """)
            }
            strangers.withLock { $0 = unknown }
            if let me = devices.first(where: \.isThisDevice) { nameEpoch.withLock { $0 = me.nameEpoch } }
            // A revocation made elsewhere begins an epoch this device seals with from now on.
            let newest = try await session.newestEpoch(user: config.user)
            if newest > config.currentEpoch { _ = try await epochKey(newest, on: session) }
            try await shareCurrentKey(on: session, with: devices.filter { !unknown.contains($0.id) }, settings: settings ?? config)
        }
        for stranger in strangers.withLock({ $0 }) { heads[stranger] = nil }
        let cursors = try store.syncCursors()
        // Each epoch's key once per round, not once per record (epoch 0's is an HKDF derivation).
        var keys: [Int32: SymmetricKey] = [:]
        for (deviceID, head) in heads.sorted(by: { $0.key < $1.key }) where deviceID != config.deviceID && head > cursors[deviceID] ?? 0 {
            let device = (id: deviceID, name: names[deviceID] ?? deviceID)
            var cursor = cursors[deviceID] ?? 0
            while cursor < head {
                let fetched = try await session.records(user: config.user, device: device.id, after: cursor, limit: 1000)
                var records: [Store.RemoteRecord] = []
                var forged: [Int64] = []
                for (seq, epoch, hlc, sealed) in fetched {
                    if keys[epoch] == nil { keys[epoch] = try await epochKey(epoch, on: session) }
                    guard let key = keys[epoch] else {
                        // Not skipped: the key may still come (a device that joined after a revocation
                        // gets it from another); a revoked device never gets it.
                        throw SyncError.crypto("""
                            record \(seq) of device \(device.name) is sealed with the key of epoch \(epoch), which this device does not \
                            have: it was revoked, or no other device has given it the key yet
                            """)
                    }
                    guard let body = Seal.openRecord(
                        sealed, key: key, user: config.user, device: device.id, seq: seq, epoch: epoch, hlc: hlc)
                    else {
                        // With the epoch's key at hand, a record that does not open was not sealed by the
                        // user's device at this place in its log and at this time (forged, damaged, retimed,
                        // or moved from another's log in a folder): never applied, nor its time observed.
                        forged.append(seq)
                        records.append(Store.RemoteRecord(seq: seq, hlc: 0, change: nil))
                        continue
                    }
                    let decoded = SyncRecord.decode(body)
                    var change = decoded?.change(for: config.deviceID)
                    if let decoded, decoded.kind == "clipboard" {
                        let epoch = decoded.epoch ?? epoch
                        if keys[epoch] == nil { keys[epoch] = try await epochKey(epoch, on: session) }
                        change = decoded.clipboardCopy(user: config.user, device: device.id, key: keys[epoch]).map { .clipboard($0) }
                        if change == nil { log.warning("sync: skipped record \(seq) of device \(device.name): a copy of its clipboard that does not open") }
                    }
                    if let checked = change {
                        do {
                            try RemoteCheck.check(checked, limits: store.limits)
                        } catch {
                            log.warning("sync: skipped record \(seq) of device \(device.name): \(error.message)")
                            change = nil
                        }
                    }
                    records.append(Store.RemoteRecord(seq: seq, hlc: hlc, change: change))
                }
                if let first = forged.first {
                    log.warning("""
                        sync: skipped \(forged.count) record(s) of device \(device.name) from seq \(first) that do not open with the user's key \
                        (forged, damaged, their time changed, or moved from another device's log); nothing of them was applied
                        """)
                }
                guard let last = records.last else { break }
                let applied = try await store.writing { [records] in try $0.applyRemote(device: device.id, records: records, rules: ConflictRules()) }
                for request in applied.overruled {
                    log.info("sync: kept activity \(request.activityID): it changed here after device \(device.name) asked to invalidate it")
                }
                onApplied(applied)
                cursor = last.seq
            }
        }
    }


    // MARK: Requests to other devices

    /// Asks `device` to continue `activityID` there: a record in this device's log that the
    /// device applies by opening a pending scene for its app. Sent when the server can be reached.
    public func requestContinuation(of activityID: String, on device: String, request: Request? = nil) async throws {
        guard settings != nil else { throw SyncError.state("sync is off on this machine") }
        let body = try SyncRecord(request: "continue_on", activityID: activityID, target: device).encoded()
        try await store.writing { try $0.enqueueRequest(body, request: request) }
    }

    /// Invalidates another device's activity: here at once, and there (and so everywhere)
    /// when the request reaches its device. Returns what ended here: nothing when it was not here.
    public func invalidate(_ activity: Activity) async throws -> [Ended] {
        guard settings != nil, activity.isRemote else { return [] }
        let body = try SyncRecord(request: "invalidate", activityID: activity.id, target: activity.deviceID).encoded()
        return try await store.writing { try $0.invalidateRemote(id: activity.id, request: body) }
    }

    /// Tells the device that advertised `activity` that it was continued here.
    public func tellContinued(_ activity: Activity) async throws {
        guard settings != nil, activity.isRemote else { return }
        let body = try SyncRecord(request: "continued", activityID: activity.id, target: activity.deviceID).encoded()
        try await store.writing { try $0.enqueueRequest(body) }
    }

    /// A sentence for a failure, with the server's own message when it sent one.
    public static func describe(_ error: any Error) -> String {
        "\(error)"
    }
}

/// Wakes one waiting loop: a ring while nobody waits is kept for the next wait.
final class Wakeup: Sendable {
    private struct State {
        var rung = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    func ring() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.rung = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns at a ring, after `timeout`, or when the task is cancelled.
    func wait(timeout: Duration) async {
        let timer = Task { [self] in
            // A timer cancelled because the wait ended must not ring: that ring would end the
            // next wait at once, and the sync loop would spin.
            do { try await Task.sleep(for: timeout) } catch { return }
            ring()
        }
        defer { timer.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Bool in
                    if state.rung {
                        state.rung = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            ring()
        }
    }
}
