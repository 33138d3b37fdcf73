import BatonCore
import CWayland
import Glibc
import Synchronization

/// The clipboard of a Wayland session, through the compositor's data-control protocol
/// (docs/DESIGN.md, "The clipboard"): `ext_data_control_manager_v1` where the compositor offers
/// it, else `zwlr_data_control_manager_v1` (sway 1.7 and KWin 5.27, tested). The
/// compositor tells the agent of each new selection with the offer's types, whatever window has
/// the focus; the agent reads only the one type it sends, through a pipe, with a deadline and a
/// size cap, and offers another machine's copy as a data source of its own.
///
/// Requests go by opcode (`Request`) through `wl_proxy_marshal_array_flags`; events arrive
/// through one dispatcher per kind of object. Every Wayland call happens on the agent's thread
/// (`run`), which the agent wakes through an eventfd for `own`, `release` and `stop`.
final class WaylandClipboard: SessionClipboard, @unchecked Sendable {
    /// The type every offer of ours carries besides its content's: a selection that lists it is
    /// ours (or another Baton agent's), not a copy the user made.
    static let ownMarker = "application/x-baton-offer"
    /// What a copy of text is offered as, besides `ClipboardCopy.text`: the names X11 apps ask for
    /// through Xwayland, and plain `text/plain`.
    static let textAliases = ["UTF8_STRING", "text/plain", "TEXT", "STRING"]

    /// Opcodes, the same in both protocols (Sources/CWayland/protocols).
    private enum Request {
        static let displayGetRegistry: UInt32 = 1
        static let registryBind: UInt32 = 0
        static let managerCreateDataSource: UInt32 = 0, managerGetDataDevice: UInt32 = 1, managerDestroy: UInt32 = 2
        static let deviceSetSelection: UInt32 = 0, deviceDestroy: UInt32 = 1
        static let sourceOffer: UInt32 = 0, sourceDestroy: UInt32 = 1
        static let offerReceive: UInt32 = 0, offerDestroy: UInt32 = 1
    }
    private enum Event {
        static let registryGlobal: UInt32 = 0
        static let deviceDataOffer: UInt32 = 0, deviceSelection: UInt32 = 1, deviceFinished: UInt32 = 2, devicePrimarySelection: UInt32 = 3
        static let sourceSend: UInt32 = 0, sourceCancelled: UInt32 = 1
        static let offerOffer: UInt32 = 0
    }

    private let wl: UnsafePointer<baton_wayland>
    private let display: OpaquePointer
    private let interfaces: UnsafePointer<baton_wayland_interfaces>
    /// Which protocol: 0 ext-data-control-v1, 1 wlr-data-control-unstable-v1 (the tables' index).
    private let kind: Int
    private let manager: OpaquePointer
    private let seat: OpaquePointer
    private var device: OpaquePointer?
    let watching: String
    let mailbox: ClipboardMailbox
    private let caps: @Sendable () -> (text: Int, image: Int)?
    private let copied: @Sendable (Copy) -> Void
    /// What the agent's log should say (from the agent's Wayland thread).
    private let log: @Sendable (String) -> Void

    /// The types of each offer the compositor announced and we have not destroyed yet.
    private var offers: [OpaquePointer: [String]] = [:]
    /// The clipboard's newest offer, not yet looked at (set by the `selection` event).
    private var newSelection: OpaquePointer?
    /// The source this agent offers while the clipboard holds it.
    private var owned: (source: OpaquePointer, id: String, mime: String, content: [UInt8])?

    /// Connects to the compositor `WAYLAND_DISPLAY` names and finds its data-control manager and
    /// seat. `caps`: the largest text and image to read, nil while the source is off; `copied`:
    /// called on the agent's thread for each copy the user makes.
    init(caps: @escaping @Sendable () -> (text: Int, image: Int)?, copied: @escaping @Sendable (Copy) -> Void,
         log: @escaping @Sendable (String) -> Void) throws(AgentError) {
        var error: UnsafePointer<CChar>?
        guard let wl = baton_wayland_load(&error) else {
            throw AgentError("cannot load libwayland-client (apt-get install libwayland-client0): \(error.map { String(cString: $0) } ?? "")")
        }
        let name = getenv("WAYLAND_DISPLAY").map { String(cString: $0) } ?? "wayland-0"
        guard let display = wl.pointee.wl_display_connect(nil) else {
            throw AgentError("cannot connect to the Wayland display \(name)")
        }
        let interfaces = baton_wayland_interfaces()
        let found: (kind: Int, manager: OpaquePointer, seat: OpaquePointer)
        do {
            found = try Self.bindGlobals(wl, display, interfaces, displayName: name)
        } catch {
            wl.pointee.wl_display_disconnect(display)
            throw error
        }
        let (kind, manager, seat) = found
        let managerName = String(cString: (kind == 0 ? interfaces.pointee.manager.0 : interfaces.pointee.manager.1).pointee.name)
        self.wl = wl
        self.display = display
        self.interfaces = interfaces
        self.kind = kind
        self.manager = manager
        self.seat = seat
        watching = "Wayland display \(name) (\(managerName))"
        mailbox = ClipboardMailbox(descriptor: baton_wayland_wake_descriptor())
        self.caps = caps
        self.copied = copied
        self.log = log
        var arguments = [wl_argument(o: nil), wl_argument(o: seat)]
        device = marshal(manager, Request.managerGetDataDevice, creating: interface(\.device), &arguments)
        if let device { listen(to: device, with: Self.deviceEvents) }
        _ = wl.pointee.wl_display_flush(display)
    }

    /// Lists the compositor's globals and binds its data-control manager (ext's where it has
    /// both) and its first seat. The registry is destroyed before this returns or throws: the
    /// caller disconnects on a throw, and a proxy must not outlive its display.
    private static func bindGlobals(_ wl: UnsafePointer<baton_wayland>, _ display: OpaquePointer,
                                    _ interfaces: UnsafePointer<baton_wayland_interfaces>, displayName name: String)
        throws(AgentError) -> (kind: Int, manager: OpaquePointer, seat: OpaquePointer) {
        let displayProxy = baton_wayland_display_proxy(display)
        var newID = [wl_argument(o: nil)]
        guard let registry = wl.pointee.wl_proxy_marshal_array_flags(
            displayProxy, Request.displayGetRegistry, interfaces.pointee.registry, wl.pointee.wl_proxy_get_version(displayProxy), 0, &newID)
        else { throw AgentError("the Wayland display \(name) gave no registry") }
        defer { wl.pointee.wl_proxy_destroy(registry) }
        let globals = Unmanaged.passRetained(Globals())
        defer { globals.release() }
        _ = wl.pointee.wl_proxy_add_dispatcher(registry, { implementation, _, opcode, _, arguments in
            guard let implementation, let arguments, opcode == Event.registryGlobal, let interface = arguments[1].s else { return 0 }
            let globals = Unmanaged<Globals>.fromOpaque(implementation).takeUnretainedValue()
            globals.found[String(cString: interface)] = globals.found[String(cString: interface)] ?? (arguments[0].u, arguments[2].u)
            return 0
        }, globals.toOpaque(), nil)
        guard wl.pointee.wl_display_roundtrip(display) >= 0 else {
            throw AgentError("the Wayland display \(name) went away while listing its globals")
        }
        let found = globals.takeUnretainedValue().found
        func bind(_ interface: UnsafePointer<wl_interface>, most: UInt32) -> OpaquePointer? {
            let interfaceName = String(cString: interface.pointee.name)
            guard let (global, offered) = found[interfaceName] else { return nil }
            let version = min(offered, most)
            return interfaceName.withCString { text in
                var arguments = [wl_argument(u: global), wl_argument(s: text), wl_argument(u: version), wl_argument(o: nil)]
                return wl.pointee.wl_proxy_marshal_array_flags(registry, Request.registryBind, interface, version, 0, &arguments)
            }
        }
        let managers = [interfaces.pointee.manager.0, interfaces.pointee.manager.1]
        guard let kind = managers.firstIndex(where: { found[String(cString: $0.pointee.name)] != nil }),
              let manager = bind(managers[kind], most: kind == 0 ? 1 : 2) else {
            throw AgentError("""
                the compositor of \(name) offers no data-control protocol (ext-data-control-v1 or wlr-data-control-unstable-v1): \
                no program outside the focused window can see or set its clipboard (GNOME's Mutter has none)
                """, sessionCannot: true)
        }
        guard let seat = bind(interfaces.pointee.seat, most: 1) else {
            throw AgentError("the compositor of \(name) has no seat")
        }
        return (kind, manager, seat)
    }

    /// The registry's globals by interface name: (name, version).
    private final class Globals {
        var found: [String: (UInt32, UInt32)] = [:]
    }

    // MARK: The agent's Wayland thread

    /// Runs until `stop`: waits on the compositor's socket and the wake-up, nothing else.
    func run() {
        let socket = wl.pointee.wl_display_get_fd(display)
        while true {
            // Wayland's way to wait on a socket of one's own: dispatch what is queued, say we
            // will read, flush, poll, then read or cancel.
            while wl.pointee.wl_display_prepare_read(display) != 0 {
                guard wl.pointee.wl_display_dispatch_pending(display) >= 0 else { gone() }
            }
            _ = wl.pointee.wl_display_flush(display)
            var fds = [pollfd(fd: socket, events: Int16(POLLIN), revents: 0), pollfd(fd: mailbox.descriptor, events: Int16(POLLIN), revents: 0)]
            _ = poll(&fds, 2, -1)
            if fds[0].revents != 0 {
                guard wl.pointee.wl_display_read_events(display) >= 0 else { gone() }
            } else {
                wl.pointee.wl_display_cancel_read(display)
            }
            guard wl.pointee.wl_display_dispatch_pending(display) >= 0 else { gone() }
            if let offer = newSelection {
                newSelection = nil
                look(at: offer)
            }
            if fds[1].revents != 0, !obeyCommands() { return }
        }
    }

    /// The compositor closed the connection (the session ended, or it found us at fault):
    /// nothing can go on, and nothing failed here.
    private func gone() -> Never {
        let error = wl.pointee.wl_display_get_error(display)
        let said = "baton clipboard-agent: the Wayland display went away\(error == 0 ? "" : " (\(String(cString: strerror(error))))"); stopping\n"
        _ = said.withCString { Glibc.write(2, $0, strlen($0)) }
        _exit(0)
    }

    // MARK: Events

    private static let deviceEvents: wl_dispatcher_func_t = { implementation, _, opcode, _, arguments in
        guard let implementation, let arguments else { return 0 }
        Unmanaged<WaylandClipboard>.fromOpaque(implementation).takeUnretainedValue().device(opcode, arguments)
        return 0
    }
    private static let offerEvents: wl_dispatcher_func_t = { implementation, target, opcode, _, arguments in
        guard let implementation, let target, let arguments, opcode == Event.offerOffer, let type = arguments[0].s else { return 0 }
        Unmanaged<WaylandClipboard>.fromOpaque(implementation).takeUnretainedValue().offers[OpaquePointer(target)]?.append(String(cString: type))
        return 0
    }
    private static let sourceEvents: wl_dispatcher_func_t = { implementation, target, opcode, _, arguments in
        guard let implementation, let target, let arguments else { return 0 }
        Unmanaged<WaylandClipboard>.fromOpaque(implementation).takeUnretainedValue().source(OpaquePointer(target), opcode, arguments)
        return 0
    }

    private func device(_ opcode: UInt32, _ arguments: UnsafeMutablePointer<wl_argument>) {
        switch opcode {
        case Event.deviceDataOffer:
            // A new offer: its types follow, then the selection event that names it.
            guard let offer = arguments[0].o else { return }
            offers[offer] = []
            listen(to: offer, with: Self.offerEvents)
        case Event.deviceSelection:
            if let previous = newSelection, previous != arguments[0].o { destroyOffer(previous) }
            newSelection = arguments[0].o
        case Event.devicePrimarySelection:
            // The primary selection is never read: taking it would un-highlight the user's text.
            if let offer = arguments[0].o { destroyOffer(offer) }
        case Event.deviceFinished:
            gone()
        default:
            break
        }
    }

    /// The clipboard holds a new offer: another client's copy unless it carries our marker.
    private func look(at offer: OpaquePointer) {
        defer { destroyOffer(offer) }
        let types = offers[offer] ?? []
        guard !types.contains(Self.ownMarker), let caps = caps() else { return }
        copied(read(offer, types: Set(types), caps: caps))
    }

    /// The copy: from the types alone, what is read (`Copy.decide`); then the one type sent,
    /// through a pipe.
    private func read(_ offer: OpaquePointer, types: Set<String>, caps: (text: Int, image: Int)) -> Copy {
        let (type, mime, cap): (String, String, Int)
        switch Copy.decide(offers: types.contains, caps: caps) {
        case .notRead(let copy): return copy
        case .read(let readType, let readMime, let readCap): (type, mime, cap) = (readType, readMime, readCap)
        }
        var pipe: [Int32] = [-1, -1]
        guard baton_wayland_pipe(&pipe) == 0 else {
            return .unreadable(mime, "no pipe: \(String(cString: strerror(errno)))")
        }
        defer { close(pipe[0]) }
        type.withCString { text in
            var arguments = [wl_argument(s: text), wl_argument(h: pipe[1])]
            _ = marshal(offer, Request.offerReceive, &arguments)
        }
        // libwayland sent a duplicate of the pipe's end: ours closes, so the end of the owner's
        // writing is the end of the data.
        close(pipe[1])
        _ = wl.pointee.wl_display_flush(display)
        switch Self.readAll(pipe[0], cap: cap) {
        case .read(let content): return Copy(mime: mime, content: content, hints: [:])
        case .tooLarge: return .tooLarge(mime, cap: cap)
        case .late: return .unreadable(mime, "the owner did not send it in time")
        }
    }

    private enum Reading { case read([UInt8]), tooLarge, late }

    /// Reads `descriptor` to its end: the first bytes within `ClipboardDeadline.answer`, all of
    /// them within `.transfer`, at most `cap` of them.
    private static func readAll(_ descriptor: Int32, cap: Int) -> Reading {
        let deadline = ClipboardDeadline.after(ClipboardDeadline.transfer)
        var answered = ClipboardDeadline.after(ClipboardDeadline.answer)
        var content: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            guard let left = ClipboardDeadline.milliseconds(until: min(deadline, answered)) else { return .late }
            var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, left) > 0 else { continue }
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard count > 0 else { return count == 0 ? .read(content) : .late }
            content += chunk[0..<count]
            if content.count > cap { return .tooLarge }
            answered = deadline
        }
    }

    private func source(_ source: OpaquePointer, _ opcode: UInt32, _ arguments: UnsafeMutablePointer<wl_argument>) {
        switch opcode {
        case Event.sourceSend:
            let descriptor = arguments[1].h
            guard let owned, owned.source == source, let type = arguments[0].s, String(cString: type) != Self.ownMarker else {
                close(descriptor)
                return
            }
            // Written on a thread of its own: a slow reader must not hold the compositor's events.
            let content = owned.content
            do {
                try OwnThread.start { Self.writeAll(content, to: descriptor) }
            } catch {
                close(descriptor)
            }
        case Event.sourceCancelled:
            // Another copy took the clipboard: the source is done.
            if owned?.source == source { owned = nil }
            _ = marshal(source, Request.sourceDestroy, flags: UInt32(WL_MARSHAL_FLAG_DESTROY))
        default:
            break
        }
    }

    /// Writes `content` into a reader's pipe and closes it, giving up after `.transfer`.
    static func writeAll(_ content: [UInt8], to descriptor: Int32) {
        defer { close(descriptor) }
        let deadline = ClipboardDeadline.after(ClipboardDeadline.transfer)
        var written = 0
        while written < content.count {
            guard let left = ClipboardDeadline.milliseconds(until: deadline) else { return }
            var ready = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
            guard poll(&ready, 1, left) > 0 else { continue }
            let count = content.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress.map { $0 + written }, content.count - written) }
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard count > 0 else { return }
            written += count
        }
    }

    // MARK: Offering a copy

    func disconnect() {
        wl.pointee.wl_display_disconnect(display)
    }

    func take(id: String, mime: String, content: [UInt8]) {
        guard let device else { return }
        var newID = [wl_argument(o: nil)]
        guard let source = marshal(manager, Request.managerCreateDataSource, creating: interface(\.source), &newID) else { return }
        listen(to: source, with: Self.sourceEvents)
        for type in (mime == ClipboardCopy.text ? [ClipboardCopy.text] + Self.textAliases : [mime]) + [Self.ownMarker] {
            type.withCString { text in
                var arguments = [wl_argument(s: text)]
                _ = marshal(source, Request.sourceOffer, &arguments)
            }
        }
        var arguments = [wl_argument(o: source)]
        _ = marshal(device, Request.deviceSetSelection, &arguments)
        if let previous = owned?.source { _ = marshal(previous, Request.sourceDestroy, flags: UInt32(WL_MARSHAL_FLAG_DESTROY)) }
        owned = (source, id, mime, content)
        _ = wl.pointee.wl_display_flush(display)
        log("the clipboard holds \(id)")
    }

    func letGo(id: String) {
        guard let owned, owned.id == id, let device else { return }
        self.owned = nil
        var arguments = [wl_argument(o: nil)]
        _ = marshal(device, Request.deviceSetSelection, &arguments)
        _ = marshal(owned.source, Request.sourceDestroy, flags: UInt32(WL_MARSHAL_FLAG_DESTROY))
        _ = wl.pointee.wl_display_flush(display)
    }

    // MARK: Wire

    private func interface(_ table: KeyPath<baton_wayland_interfaces, (UnsafePointer<wl_interface>, UnsafePointer<wl_interface>)>)
        -> UnsafePointer<wl_interface> {
        let pair = interfaces.pointee[keyPath: table]
        return kind == 0 ? pair.0 : pair.1
    }

    /// Sends request `opcode` on `proxy`; the new object when the request creates one.
    @discardableResult
    private func marshal(_ proxy: OpaquePointer, _ opcode: UInt32, creating interface: UnsafePointer<wl_interface>? = nil,
                         flags: UInt32 = 0, _ arguments: inout [wl_argument]) -> OpaquePointer? {
        wl.pointee.wl_proxy_marshal_array_flags(proxy, opcode, interface, wl.pointee.wl_proxy_get_version(proxy), flags, &arguments)
    }

    private func marshal(_ proxy: OpaquePointer, _ opcode: UInt32, flags: UInt32) -> OpaquePointer? {
        var none: [wl_argument] = []
        return marshal(proxy, opcode, flags: flags, &none)
    }

    private func listen(to proxy: OpaquePointer, with dispatcher: wl_dispatcher_func_t) {
        _ = wl.pointee.wl_proxy_add_dispatcher(proxy, dispatcher, Unmanaged.passUnretained(self).toOpaque(), nil)
    }

    private func destroyOffer(_ offer: OpaquePointer) {
        offers[offer] = nil
        _ = marshal(offer, Request.offerDestroy, flags: UInt32(WL_MARSHAL_FLAG_DESTROY))
    }
}
