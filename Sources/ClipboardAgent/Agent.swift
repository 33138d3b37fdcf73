import BatonContract
import BatonCore
import DBus
import Glibc
import Synchronization

/// The clipboard agent of one graphical session (`baton clipboard-agent`; docs/DESIGN.md, "The
/// clipboard"): the display's clipboard on one side (`X11Clipboard`, `WaylandClipboard`), batond's
/// `org.baton.Handoff1.Clipboard` on the other. It tells batond of each copy the user makes
/// and offers on the clipboard what batond offers from the user's other machines, until batond
/// withdraws it. It decides nothing batond would not: batond answers what became of each copy.
public enum ClipboardAgent {
    /// The exit status when the session offers no way to watch its clipboard: the user unit does
    /// not restart the agent then (`RestartPreventExitStatus=`).
    public static let sessionCannotStatus: Int32 = 3

    /// Runs until the display or the bus goes away, or SIGTERM; returns the exit status.
    public static func run(address: String?, log: @escaping @Sendable (String) -> Void) async -> Int32 {
        // An empty variable is as good as none (a session may export it empty).
        let variable = { (name: String) in getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
        // Wayland first: where a compositor runs, DISPLAY is only its Xwayland, which sees no
        // copy made in a Wayland window.
        let session: (wayland: Bool, display: String)
        if let wayland = variable("WAYLAND_DISPLAY") {
            session = (true, wayland)
        } else if let x11 = variable("DISPLAY") {
            session = (false, x11)
        } else {
            log("no graphical session here: neither WAYLAND_DISPLAY nor DISPLAY is set")
            return sessionCannotStatus
        }
        let connection: Connection
        do {
            connection = try Connection(address.map { .address($0) } ?? .session) { _ in }
        } catch {
            log("cannot reach the session bus: \(error.message)")
            return 1
        }
        defer { connection.close() }
        // One agent per display: a session that starts it twice (the unit and the autostart
        // entry) would otherwise send each copy twice.
        let display = session.display.map { $0.isLetter || $0.isNumber ? $0 : "_" }
        do {
            try await connection.requestName("org.baton.ClipboardAgent." + (session.wayland ? "W" : "X") + String(display))
        } catch {
            log("another agent watches the clipboard of display \(session.display) already; this one stops")
            return 0
        }
        let batond = Batond(connection: connection)
        // The caps, read again whenever the user changes one (`Status.SourceSettingChanged`).
        let caps = Caps()
        let copies = AsyncStream<Copy>.makeStream()
        let clipboard: any SessionClipboard
        do {
            clipboard = session.wayland
                ? try WaylandClipboard(caps: { caps.current }, copied: { copies.continuation.yield($0) }, log: log)
                : try X11Clipboard(caps: { caps.current }, copied: { copies.continuation.yield($0) }, log: log)
        } catch {
            log(error.description)
            return error.sessionCannot ? sessionCannotStatus : 1
        }
        do {
            try OwnThread.start { clipboard.run() }
        } catch {
            log(error.description)
            return 1
        }
        defer { clipboard.stop() }
        do {
            // Heard from before the caps are first read, so that no change falls between.
            let settingChanged = try await connection.signals(matching: MatchRule(
                interface: Contract.Interface.status, member: Contract.Status.sourceSettingChanged.name, path: Contract.root,
                arg0: Contract.Sources.Clipboard.name))
            @Sendable func readCaps() async {
                guard let read = try? await batond.caps() else { return }
                let changed = caps.value.withLock { value in
                    defer { value = read }
                    return value != read
                }
                if changed { log("reads text of up to \(read.text) bytes, images of up to \(read.image)") }
            }
            await readCaps()
            // Whether the source is on, now and as it changes (Status.Sources).
            let statusChanged = try await connection.signals(matching: MatchRule(
                interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", path: Contract.root, arg0: Contract.Interface.status))
            @Sendable func follow() async {
                let on = (try? await batond.isOn()) ?? false
                guard caps.on.exchange(on, ordering: .relaxed) != on else { return }
                log(on ? "the clipboard source is on: copies are read" : "the clipboard source is off: nothing is read")
            }
            await follow()
            let offered = try await connection.signals(matching: MatchRule(interface: Contract.Interface.clipboard, member: Contract.Clipboard.offered.name))
            let withdrawn = try await connection.signals(matching: MatchRule(interface: Contract.Interface.clipboard, member: Contract.Clipboard.withdrawn.name))
            // What batond offers already, as the agent starts with the session.
            if let current = try? await batond.currentOffer(), !current.id.isEmpty {
                await offer(current.id, mime: current.mime, batond: batond, clipboard: clipboard, log: log)
            }
            log("watching the clipboard of \(clipboard.watching)")
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await copy in copies.stream {
                        let outcome = await batond.copied(copy)
                        log("a copy of \(copy.content.count) bytes (\(copy.mime)): \(outcome)")
                    }
                }
                group.addTask {
                    for await _ in settingChanged { await readCaps() }
                }
                group.addTask {
                    for await signal in offered {
                        guard signal.body.count == 5, let id = signal.body[0].stringValue, let mime = signal.body[1].stringValue else { continue }
                        await offer(id, mime: mime, batond: batond, clipboard: clipboard, log: log)
                    }
                }
                group.addTask {
                    for await _ in statusChanged { await follow() }
                }
                group.addTask {
                    for await signal in withdrawn {
                        if let id = signal.body.first?.stringValue { clipboard.release(id: id) }
                    }
                }
                await group.next()
                group.cancelAll()
            }
        } catch {
            log("cannot follow batond's offers: \(error)")
            return 1
        }
        return 0
    }

    /// The largest text and image the agent reads, as the source's settings say, and whether
    /// the source is on (off: the agent reads no copy at all).
    final class Caps: Sendable {
        let value = Mutex((text: 262_144, image: 8_388_608))
        let on = Atomic(false)
        var current: (text: Int, image: Int)? { on.load(ordering: .relaxed) ? value.withLock { $0 } : nil }
    }

    /// Fetches offer `id`'s content and puts it on the clipboard as `mime`.
    static func offer(_ id: String, mime: String, batond: Batond, clipboard: any SessionClipboard, log: @Sendable (String) -> Void) async {
        do {
            let content = try await batond.content(id)
            clipboard.own(id: id, mime: mime, content: content)
            log("offering \(id) (\(content.count) bytes, \(mime))")
        } catch {
            log("could not take offer \(id): \(error)")
        }
    }

    /// batond's clipboard interface, as the agent calls it.
    struct Batond: Sendable {
        let connection: Connection

        func call(_ method: ContractMethod, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
            try await connection.call(method, arguments, path: Contract.root)
        }

        /// What batond answered for a copy, or why it could not be told.
        func copied(_ copy: Copy) async -> String {
            do {
                return try await call(Contract.Clipboard.copied, [.string(copy.mime), .bytes(copy.content), .stringMap(copy.hints)])
                    .first?.stringValue ?? "?"
            } catch {
                return "not told to batond: \(error)"
            }
        }

        /// The offer batond holds now ("" id: none), and its type.
        func currentOffer() async throws -> (id: String, mime: String) {
            let offer = try await call(Contract.Clipboard.offer)
            return (offer.first?.stringValue ?? "", offer.count > 1 ? offer[1].stringValue ?? "" : "")
        }

        func content(_ id: String) async throws -> [UInt8] {
            try await call(Contract.Clipboard.content, [.string(id)]).first?.bytesValue ?? []
        }

        /// Whether the clipboard source is on (`Status.Sources`).
        func isOn() async throws -> Bool {
            let sources = try await connection.call(Contract.busName, Contract.root, "org.freedesktop.DBus.Properties", "Get",
                                                    [.string(Contract.Interface.status), .string(Contract.Status.Property.sources)])
            return sources.first?.unwrapped.arrayValue?.contains(.string(Contract.Sources.Clipboard.name)) ?? false
        }

        /// The source's caps on what is read (`max-text`, `max-image`).
        func caps() async throws -> (text: Int, image: Int) {
            let settings = try await call(Contract.Status.sourceSettings, [.string(Contract.Sources.Clipboard.name)]).first?.stringKeyedValue?
                .compactMapValues(\.stringValue) ?? [:]
            return (Int(settings["max-text"] ?? "") ?? 262_144, Int(settings["max-image"] ?? "") ?? 8_388_608)
        }
    }
}
