import BatonContract
import BatonCore
import BatonStore
import BatonSync
import DBus
import Logging
import Synchronization

/// The clipboard source (docs/DESIGN.md, "The clipboard"): what the user copies here goes,
/// sealed, to their other machines, and what they copy there is offered on this machine's
/// clipboard for a while. batond does no display work: the clipboard agent of each graphical
/// session watches and sets the clipboard and talks to batond through
/// `org.baton.Handoff1.Clipboard`. Nothing of a copy is stored in the clear: the one offered
/// and the last sent are held in memory until their time is over.
final class ClipboardState: Sendable {
    /// Another machine's copy this one offers now, with that machine's name.
    struct Offer: Sendable {
        var copy: ClipboardCopy
        var deviceName: String
    }

    /// What `baton clipboard` shows of the last copy sent or received (no content).
    struct Seen: Sendable {
        var id: String
        var mime: String
        var size: Int
        var at: UInt64
        var deviceName: String
    }

    private struct State {
        var offer: Offer?
        /// The last copy sent, while it lasts: an agent may ask for it (`Content`).
        var sent: ClipboardCopy?
        var lastSent: Seen?
        var lastReceived: Seen?
        /// When the user last copied on this machine: another machine's older copy is not offered over it.
        var lastLocalCopy: UInt64 = 0
        /// What Baton offered lately, as `Echo.key`s until their copies' time is over: the same
        /// content copied here (an app rewrote it, a clipboard manager took it over) is not sent back.
        /// With each its type and size: a copy that cannot match any is not hashed at all.
        var offered: [(key: Int, mime: String, size: Int, until: UInt64)] = []
    }

    private let state = Mutex(State())

    var offer: Offer? { state.withLock { $0.offer } }
    var lastSent: Seen? { state.withLock { $0.lastSent } }
    var lastReceived: Seen? { state.withLock { $0.lastReceived } }

    /// The content of the offer `id`, or of the last copy sent if that is `id`, while it lasts.
    func content(_ id: String, now: UInt64) -> [UInt8]? {
        state.withLock { state in
            if let offer = state.offer, offer.copy.id == id { return offer.copy.content }
            if let sent = state.sent, sent.id == id, sent.expiresAt > now { return sent.content }
            return nil
        }
    }

    /// Whether `content` is what Baton offered lately (line endings and trailing newlines aside).
    func isEcho(_ content: [UInt8], mime: String, now: UInt64) -> Bool {
        // Hashing a large image is most of what a copy costs here (Benchmarks/README): only for a
        // copy that could be one (text loses its line endings: its size may differ).
        let candidates = state.withLock { state in
            state.offered.filter { $0.until > now && $0.mime == mime && (mime == ClipboardCopy.text || $0.size == content.count) }.map(\.key)
        }
        guard !candidates.isEmpty else { return false }
        return candidates.contains(Echo.key(content, mime: mime))
    }

    /// The user copied here: an offer from another machine is withdrawn (its id, if there was one).
    func copiedHere(at now: UInt64) -> String? {
        state.withLock { state in
            state.lastLocalCopy = now
            defer { state.offer = nil }
            return state.offer?.copy.id
        }
    }

    func sent(_ copy: ClipboardCopy) {
        state.withLock { state in
            state.sent = copy
            state.lastSent = Seen(id: copy.id, mime: copy.mime, size: copy.content.count, at: copy.madeAt, deviceName: "")
        }
    }

    /// Offers another machine's copy unless one made here later wins; returns whether it did,
    /// and the offer it replaced.
    func receive(_ copy: ClipboardCopy, deviceName: String, now: UInt64) -> (offered: Bool, replaced: String?) {
        state.withLock { state in
            guard copy.expiresAt > now, copy.madeAt >= state.lastLocalCopy else { return (false, nil) }
            let replaced = state.offer?.copy.id
            state.offer = Offer(copy: copy, deviceName: deviceName)
            state.offered.removeAll { $0.until <= now }
            state.offered.append((Echo.key(copy.content, mime: copy.mime), copy.mime, copy.content.count, copy.expiresAt))
            state.lastReceived = Seen(id: copy.id, mime: copy.mime, size: copy.content.count, at: copy.madeAt, deviceName: deviceName)
            return (true, replaced)
        }
    }

    /// Withdraws the offer (`Clear`, the source turned off); its id, if there was one.
    func withdraw() -> String? {
        state.withLock { state in
            defer { state.offer = nil }
            return state.offer?.copy.id
        }
    }

    /// Forgets what is over at `now`: the offer (its id, to announce) and the last copy sent.
    func expire(at now: UInt64) -> String? {
        state.withLock { state in
            if let sent = state.sent, sent.expiresAt <= now { state.sent = nil }
            state.offered.removeAll { $0.until <= now }
            guard let offer = state.offer, offer.copy.expiresAt <= now else { return nil }
            state.offer = nil
            return offer.copy.id
        }
    }

    /// When something held is over next (housekeeping wakes then); nil when nothing is held.
    var nextExpiry: UInt64? {
        state.withLock { state in [state.offer?.copy.expiresAt, state.sent?.expiresAt].compactMap { $0 }.min() }
    }
}

/// The loop guard's comparison: the same text whatever its line endings and trailing newlines
/// (apps rewrite them), the same image byte for byte. A hash, kept in memory only.
enum Echo {
    static func key(_ content: [UInt8], mime: String) -> Int {
        var hasher = Hasher()
        hasher.combine(mime)
        // Hashed as one run of bytes: byte by byte is many times slower for an image.
        if mime == ClipboardCopy.text {
            var text = content.filter { $0 != UInt8(ascii: "\r") }
            while text.last == UInt8(ascii: "\n") { text.removeLast() }
            text.withUnsafeBytes { hasher.combine(bytes: $0) }
        } else {
            content.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
        return hasher.finalize()
    }
}

/// `org.baton.Handoff1.Clipboard`, and the source's switch (`ActivitySource`).
struct ClipboardSource: ActivitySource {
    static let name = Contract.Sources.Clipboard.name
    let store: Store
    let state: ClipboardState
    let paused: PausedActivities
    let sync: SyncSlot
    let connection: Connection
    let signals: RootSignals
    let log: Logger
    var clock: any DaemonClock { store.wallClock }

    var interface: Interface {
        typealias Name = Contract.Clipboard.Property
        return Interface(Contract.Interface.clipboard, methods: [
            Method(Contract.Clipboard.copied, ordering: .concurrent, handler: copied),
            Method(Contract.Clipboard.offer) { _ in
                guard let offer = state.offer else { return [.string(""), .string(""), .uint64(0), .uint64(0), .string("")] }
                return [.string(offer.copy.id), .string(offer.copy.mime), .uint64(UInt64(offer.copy.content.count)),
                        .uint64(offer.copy.expiresAt), .string(offer.deviceName)]
            },
            Method(Contract.Clipboard.content) { call in
                let id: String = try call.argument(0)
                guard let content = state.content(id, now: clock.now()) else {
                    throw BatonError.notFound("no copy \(printable(id)) is offered: its time is over, or it was withdrawn")
                }
                return [.bytes(content)]
            },
            Method(Contract.Clipboard.clear) { _ in
                if let id = state.withdraw() { withdrawn(id) }
                return []
            },
        ], properties: [
            Property(Name.lastSent, "a{sv}", changeSignal: .emits) { _ in Self.record(state.lastSent) },
            Property(Name.lastReceived, "a{sv}", changeSignal: .emits) { _ in Self.record(state.lastReceived) },
        ], signals: [Signal(Contract.Clipboard.offered), Signal(Contract.Clipboard.withdrawn)])
    }

    static func record(_ seen: ClipboardState.Seen?) -> DBusValue {
        guard let seen else { return .record([:]) }
        return .record(["id": .string(seen.id), "mime": .string(seen.mime), "size": .uint64(UInt64(seen.size)), "at": .uint64(seen.at),
                        "device": .string(seen.deviceName)])
    }

    func followIfOn() {}

    /// Turned off: what another machine offered is withdrawn.
    func stop() {
        if let id = state.withdraw() { withdrawn(id) }
    }

    var settings: [String: String] {
        get throws { try store.settingValues(of: Self.name, declared: Contract.Sources.Clipboard.settings) }
    }

    /// The agent saw the user copy. What never leaves is decided from what the agent says of the
    /// offer before the content counts; then the source's switch, the pause, the direction, the
    /// size caps and the loop guard. Every outcome is an answer, not an error: they are foreseen.
    func copied(_ call: MethodCall) async throws -> [DBusValue] {
        let mime: String = try call.argument(0), content: [UInt8] = try call.argument(1), hints: [String: String] = try call.argument(2)
        let now = clock.now()
        guard ClipboardCopy.kinds.contains(mime) else {
            throw BatonError.invalidArgument("a copy is \(ClipboardCopy.kinds.joined(separator: " or ")), not '\(printable(mime))'")
        }
        func outcome(_ word: String) -> [DBusValue] {
            log.debug("clipboard: a copy of \(content.count) bytes (\(mime)): \(word)")
            return [.string(word)]
        }
        typealias Outcome = Contract.Clipboard.Outcome
        if hints["selection"] == "primary" { return outcome(Outcome.primary) }
        // An echo of what Baton offered is no new copy: the offer stands.
        if state.isEcho(content, mime: mime, now: now) { return outcome(Outcome.offered) }
        // A later copy made here wins over what another machine offered, whatever becomes of it.
        if let id = state.copiedHere(at: now) { withdrawn(id) }
        if hints["x-kde-passwordManagerHint"] != nil { return outcome(Outcome.secret) }
        // Not read by the agent: neither text nor PNG, unreadable, or over its cap.
        if content.isEmpty { return outcome(hints["too-large"] != nil ? Outcome.tooLarge : Outcome.unsupported) }
        guard try store.sourcesOn()[Self.name] != nil else { return outcome(Outcome.off) }
        if paused.isPaused { return outcome(Outcome.paused) }
        let settings = try self.settings
        if settings["direction"] == "receive" { return outcome(Outcome.receiveOnly) }
        let cap = Int(settings[mime == ClipboardCopy.text ? "max-text" : "max-image"] ?? "") ?? 0
        guard !content.isEmpty, content.count <= cap else { return outcome(Outcome.tooLarge) }
        guard let engine = sync.engine, engine.settings != nil else { return outcome(Outcome.noSync) }
        let lifetime = (UInt64(settings["lifetime"] ?? "") ?? 120) * 1_000_000
        let copy = ClipboardCopy(id: Identifier.make(at: now), mime: mime, content: content, madeAt: now, expiresAt: now + lifetime)
        try copy.validate(maxBytes: cap)
        try await SyncCalls.syncing { try await engine.sendClipboard(copy) }
        state.sent(copy)
        await signals.propertiesChanged(interface, [Contract.Clipboard.Property.lastSent])
        return outcome(Outcome.sent)
    }

    /// Copies other machines made, as sync applied them: offered unless the source is off here,
    /// recording is paused, this machine only sends, or their time is over.
    func received(_ copies: [ClipboardCopy]) async {
        guard !copies.isEmpty else { return }
        let settings = (try? self.settings) ?? [:]
        guard (try? store.sourcesOn()[Self.name]) != nil, !paused.isPaused, settings["direction"] != "send" else {
            log.debug("clipboard: \(copies.count) copies from other machines not offered (source off, paused or send only)")
            return
        }
        let names = (try? store.remoteDeviceNames()) ?? [:]
        for copy in copies {
            let (offered, replaced) = state.receive(copy, deviceName: names[copy.device] ?? copy.device, now: clock.now())
            guard offered else { continue }
            if let replaced { withdrawn(replaced) }
            emit(Contract.Clipboard.offered, [.string(copy.id), .string(copy.mime), .uint64(UInt64(copy.content.count)),
                                              .uint64(copy.expiresAt), .string(names[copy.device] ?? copy.device)])
            log.debug("clipboard: offering \(copy.id) from \(names[copy.device] ?? copy.device)")
        }
        await signals.propertiesChanged(interface, [Contract.Clipboard.Property.lastReceived])
    }

    /// Housekeeping: withdraws the offer whose time is over.
    func expire() {
        if let id = state.expire(at: clock.now()) { withdrawn(id) }
    }

    private func withdrawn(_ id: String) {
        emit(Contract.Clipboard.withdrawn, [.string(id)])
    }

    private func emit(_ signal: ContractSignal, _ body: [DBusValue]) {
        do {
            try connection.emit(signal, body, to: .hosts)
        } catch {
            log.error("could not emit \(signal.name): \(error)")
        }
    }
}
