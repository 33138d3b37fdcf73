import BatonCore
import CX11
import Glibc
import Synchronization

/// The CLIPBOARD selection of one X display, on a thread of its own (docs/DESIGN.md, "The
/// clipboard"): XFixes tells it when another client takes the selection (no polling); it reads
/// the offer's targets, then only the one type it sends, with a deadline and a size cap; and it
/// owns the selection to offer another machine's copy, answering each request for it.
///
/// Every X call happens on its thread; the agent talks to it through `own`, `release` and
/// `stop`, which wake the thread through an eventfd.
final class X11Clipboard: SessionClipboard, @unchecked Sendable {
    /// Targets read of an offer: a hostile owner may list thousands.
    static let maxTargets = 1_024

    private let x: UnsafePointer<baton_x11>
    private let display: OpaquePointer
    private var window: Window
    let mailbox: ClipboardMailbox
    private let caps: @Sendable () -> (text: Int, image: Int)?
    private let copied: @Sendable (Copy) -> Void
    /// What the agent's log should say (from the X thread).
    private let log: @Sendable (String) -> Void
    private let atoms: Atoms
    private let xfixesEvent: Int32
    let watching: String
    /// The copy this agent offers while it owns the selection.
    private var owned: (id: String, mime: String, content: [UInt8])?
    /// Events read while waiting for a particular one, handled after it.
    private var deferred: [XEvent] = []
    /// Offers larger than one X request, being sent a chunk at a time (ICCCM's INCR): the next
    /// chunk goes when the requestor deletes the last from its property.
    private var sending: [Sending] = []

    private struct Sending {
        let requestor: Window
        let property: Atom
        let target: Atom
        let content: [UInt8]
        var offset = 0
        let deadline: UInt64
    }

    /// One INCR chunk: what toolkits send (GTK and Qt about as much), well under any request limit.
    static let chunkBytes = 262_144

    private struct Atoms {
        let clipboard, targets, utf8, textPlain, png, incr, passwordHint, property: Atom
    }

    /// Opens the display `DISPLAY` names. `caps`: the largest text and image to read (the
    /// source's settings), nil while the source is off (nothing is read then); `copied`: called
    /// on the X thread for each copy the user makes.
    init(caps: @escaping @Sendable () -> (text: Int, image: Int)?, copied: @escaping @Sendable (Copy) -> Void,
         log: @escaping @Sendable (String) -> Void) throws(AgentError) {
        var error: UnsafePointer<CChar>?
        guard let x = baton_x11_load(&error) else {
            throw AgentError("cannot load libX11 and libXfixes (apt-get install libx11-6 libxfixes3): \(error.map { String(cString: $0) } ?? "")")
        }
        self.x = x
        guard let display = x.pointee.XOpenDisplay(nil) else {
            throw AgentError("cannot open the X display \(getenv("DISPLAY").map { String(cString: $0) } ?? "(DISPLAY is not set)")")
        }
        _ = x.pointee.XSetErrorHandler(baton_x11_ignore_error)
        _ = x.pointee.XSetIOErrorHandler(baton_x11_display_gone)
        var eventBase: Int32 = 0, errorBase: Int32 = 0
        guard x.pointee.XFixesQueryExtension(display, &eventBase, &errorBase) != 0 else {
            _ = x.pointee.XCloseDisplay(display)
            throw AgentError("the X server has no XFixes extension: the agent cannot hear copies", sessionCannot: true)
        }
        self.display = display
        watching = "X display " + (getenv("DISPLAY").map { String(cString: $0) } ?? "")
        xfixesEvent = eventBase + XFixesSelectionNotify
        window = Self.makeWindow(x, display)
        func intern(_ name: String) -> Atom { x.pointee.XInternAtom(display, name, 0) }
        atoms = Atoms(clipboard: intern("CLIPBOARD"), targets: intern("TARGETS"), utf8: intern("UTF8_STRING"),
                      textPlain: intern("text/plain;charset=utf-8"), png: intern("image/png"), incr: intern("INCR"),
                      passwordHint: intern("x-kde-passwordManagerHint"), property: intern("BATON_CLIPBOARD"))
        x.pointee.XFixesSelectSelectionInput(display, window, atoms.clipboard, UInt(XFixesSetSelectionOwnerNotifyMask))
        _ = x.pointee.XFlush(display)
        mailbox = ClipboardMailbox(descriptor: eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK)))
        self.caps = caps
        self.copied = copied
        self.log = log
    }

    /// The agent's window: the property conversions arrive in, the owner of what it offers.
    private static func makeWindow(_ x: UnsafePointer<baton_x11>, _ display: OpaquePointer) -> Window {
        let window = x.pointee.XCreateSimpleWindow(display, x.pointee.XDefaultRootWindow(display), 0, 0, 1, 1, 0, 0, 0)
        _ = x.pointee.XSelectInput(display, window, PropertyChangeMask)
        return window
    }

    /// After a transfer given up: an owner still sending chunks writes into the old window's
    /// property, which would spoil the next conversion; a new window is clear of it.
    private func replaceWindow() {
        let old = window
        window = Self.makeWindow(x, display)
        x.pointee.XFixesSelectSelectionInput(display, window, atoms.clipboard, UInt(XFixesSetSelectionOwnerNotifyMask))
        _ = x.pointee.XDestroyWindow(display, old)
        _ = x.pointee.XFlush(display)
        deferred.removeAll { $0.type == PropertyNotify && $0.xproperty.window == old }
    }

    // MARK: The X thread

    /// Runs until `stop`: waits on the display's socket and the wake-up, nothing else.
    func run() {
        let socket = x.pointee.XConnectionNumber(display)
        while true {
            while let event = nextEvent() { handle(event) }
            var fds = [pollfd(fd: socket, events: Int16(POLLIN), revents: 0), pollfd(fd: mailbox.descriptor, events: Int16(POLLIN), revents: 0)]
            _ = poll(&fds, 2, -1)
            if fds[1].revents != 0, !obeyCommands() { return }
        }
    }

    private func nextEvent() -> XEvent? {
        if !deferred.isEmpty { return deferred.removeFirst() }
        guard x.pointee.XPending(display) > 0 else { return nil }
        var event = XEvent()
        _ = x.pointee.XNextEvent(display, &event)
        return event
    }

    private func handle(_ event: XEvent) {
        switch event.type {
        case xfixesEvent:
            var raw = event
            let notify = baton_xfixes_selection_event(&raw)
            // Another client took the clipboard: the user copied there.
            guard notify.selection == atoms.clipboard, notify.owner != window, notify.owner != 0 else { return }
            if let id = owned?.id { log("window \(notify.owner) took the clipboard from \(id)") }
            owned = nil
            guard let caps = caps() else { return }
            copied(read(at: notify.selection_timestamp, caps: caps))
        case SelectionRequest:
            answer(event.xselectionrequest)
        case SelectionClear:
            // A clear can be stale: letting go of one offer then taking the next sends us the
            // first's clear after we own the clipboard again. Only the server knows who owns it now.
            if event.xselectionclear.selection == atoms.clipboard, let id = owned?.id,
               x.pointee.XGetSelectionOwner(display, atoms.clipboard) != window {
                owned = nil
                log("another client took the clipboard from \(id)")
            }
        case PropertyNotify where event.xproperty.state == PropertyDelete:
            sendNextChunk(requestor: event.xproperty.window, property: event.xproperty.atom)
        default:
            break
        }
    }

    // MARK: Reading a copy

    /// What the new owner offers: its targets first, and from them alone what is read
    /// (`Copy.decide`); then the one type sent.
    private func read(at time: Time, caps: (text: Int, image: Int)) -> Copy {
        guard let list = convert(atoms.targets, at: time, cap: Self.maxTargets * MemoryLayout<Atom>.size) else {
            return .unreadable(ClipboardCopy.text, "the owner did not list its types in time")
        }
        let targets = Set(list.format == 32 ? list.atoms : [])
        let byName = [ClipboardCopy.text: atoms.textPlain, "UTF8_STRING": atoms.utf8, ClipboardCopy.png: atoms.png,
                      "x-kde-passwordManagerHint": atoms.passwordHint]
        switch Copy.decide(offers: { byName[$0].map(targets.contains) ?? false }, caps: caps) {
        case .notRead(let copy):
            return copy
        case .read(let type, let mime, let cap):
            guard let target = byName[type], let data = convert(target, at: time, cap: cap) else {
                return .unreadable(mime, "the owner did not send it in time")
            }
            return data.tooLarge ? .tooLarge(mime, cap: cap) : Copy(mime: mime, content: data.bytes, hints: [:])
        }
    }

    private struct Converted {
        var bytes: [UInt8] = []
        var format: Int32 = 8
        var tooLarge = false
        /// A format-32 property's items: C longs, one per atom.
        var atoms: [Atom] {
            bytes.withUnsafeBytes { raw in (0..<(raw.count / MemoryLayout<CLong>.size)).map { Atom(bitPattern: raw.load(fromByteOffset: $0 * MemoryLayout<CLong>.size, as: CLong.self)) } }
        }
    }

    /// Asks the owner for `target` into our property and reads it, INCR's chunks included; nil
    /// when the owner refused or ran out of time. Stops reading past `cap` bytes.
    private func convert(_ target: Atom, at time: Time, cap: Int) -> Converted? {
        _ = x.pointee.XDeleteProperty(display, window, atoms.property)
        _ = x.pointee.XConvertSelection(display, atoms.clipboard, target, atoms.property, window, time)
        _ = x.pointee.XFlush(display)
        // The answer within `ClipboardDeadline.answer`, INCR's chunks within `.transfer`.
        let deadline = ClipboardDeadline.after(ClipboardDeadline.transfer)
        guard let notify = wait(until: min(deadline, ClipboardDeadline.after(ClipboardDeadline.answer)), for: { event in
            event.type == SelectionNotify && event.xselection.requestor == self.window
        }), notify.xselection.property != 0 else { return nil }
        guard let first = property(cap: cap) else { return nil }
        guard first.type == atoms.incr else { return first.converted }
        // INCR: the owner sends chunks, each when the last was deleted; an empty one ends it.
        var whole = Converted()
        while true {
            guard wait(until: deadline, for: { event in
                event.type == PropertyNotify && event.xproperty.window == self.window && event.xproperty.atom == self.atoms.property
                    && event.xproperty.state == PropertyNewValue
            }) != nil, let chunk = property(cap: cap - whole.bytes.count) else {
                replaceWindow()
                return nil
            }
            if chunk.converted.bytes.isEmpty { return whole }
            whole.bytes += chunk.converted.bytes
            whole.format = chunk.converted.format
            if chunk.converted.tooLarge || whole.bytes.count > cap {
                whole.tooLarge = true
                replaceWindow()
                return whole
            }
        }
    }

    /// Reads and deletes our property: its type and up to `cap` bytes (more: `tooLarge`).
    private func property(cap: Int) -> (type: Atom, converted: Converted)? {
        var type: Atom = 0, format: Int32 = 0, items: UInt = 0, after: UInt = 0
        var data: UnsafeMutablePointer<UInt8>?
        let longs = max(1, (max(cap, 0) + 4) / 4)
        guard x.pointee.XGetWindowProperty(display, window, atoms.property, 0, longs, 1, 0, &type, &format, &items, &after, &data) == Success
        else { return nil }
        defer { if let data { _ = x.pointee.XFree(data) } }
        // Xlib hands format 32 as C longs, 16 as shorts, 8 as bytes.
        let size = format == 32 ? MemoryLayout<CLong>.size : format == 16 ? 2 : 1
        let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: Int(items) * size)) } ?? []
        return (type, Converted(bytes: bytes, format: format, tooLarge: after > 0 || (format == 8 && bytes.count > cap)))
    }

    /// Reads events until one satisfies `match` or the deadline (`ClipboardDeadline.now`'s clock) passes;
    /// others read meanwhile are handled after, requests for our own offer at once.
    private func wait(until deadline: UInt64, for match: (XEvent) -> Bool) -> XEvent? {
        let socket = x.pointee.XConnectionNumber(display)
        while true {
            while x.pointee.XPending(display) > 0 {
                var event = XEvent()
                _ = x.pointee.XNextEvent(display, &event)
                if match(event) { return event }
                if event.type == SelectionRequest { answer(event.xselectionrequest) } else { deferred.append(event) }
            }
            guard let left = ClipboardDeadline.milliseconds(until: deadline) else { return nil }
            var fd = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            _ = poll(&fd, 1, left)
        }
    }

    // MARK: Offering a copy

    func disconnect() {
        _ = x.pointee.XDestroyWindow(display, window)
        _ = x.pointee.XCloseDisplay(display)
    }

    func take(id: String, mime: String, content: [UInt8]) {
        _ = x.pointee.XSetSelectionOwner(display, atoms.clipboard, window, 0)
        let owner = x.pointee.XGetSelectionOwner(display, atoms.clipboard)
        guard owner == window else { return log("could not take the clipboard for \(id): window \(owner) owns it") }
        owned = (id, mime, content)
        log("the clipboard holds \(id)")
    }

    func letGo(id: String) {
        guard owned?.id == id else { return }
        owned = nil
        log("letting go of \(id)")
        if x.pointee.XGetSelectionOwner(display, atoms.clipboard) == window {
            _ = x.pointee.XSetSelectionOwner(display, atoms.clipboard, 0, 0)
            _ = x.pointee.XFlush(display)
        }
    }

    /// Answers a request for what we own: its targets, or its content: in one property, or by
    /// INCR when it is larger than one request can carry.
    private func answer(_ request: XSelectionRequestEvent) {
        var reply = XEvent()
        reply.xselection = XSelectionEvent(type: SelectionNotify, serial: 0, send_event: 1, display: display, requestor: request.requestor,
                                           selection: request.selection, target: request.target,
                                           property: request.property == 0 ? request.target : request.property, time: request.time)
        let kinds = owned.map { $0.mime == ClipboardCopy.text ? [atoms.utf8, atoms.textPlain] : [atoms.png] } ?? []
        let largest = Int(max(x.pointee.XExtendedMaxRequestSize(display), x.pointee.XMaxRequestSize(display))) * 4 - 1_024
        if owned != nil, request.selection == atoms.clipboard, request.target == atoms.targets {
            var list = ([atoms.targets] + kinds).map { CLong(bitPattern: $0) }
            _ = x.pointee.XChangeProperty(display, request.requestor, reply.xselection.property, XA_ATOM, 32, PropModeReplace, &list, Int32(list.count))
        } else if let owned, request.selection == atoms.clipboard, kinds.contains(request.target), owned.content.count <= largest {
            var content = owned.content
            _ = x.pointee.XChangeProperty(display, request.requestor, reply.xselection.property, request.target, 8, PropModeReplace, &content,
                                      Int32(content.count))
        } else if let owned, request.selection == atoms.clipboard, kinds.contains(request.target) {
            // INCR: the size first; the chunks as the requestor deletes the property (sendNextChunk).
            sending.removeAll { ClipboardDeadline.now >= $0.deadline }
            _ = x.pointee.XSelectInput(display, request.requestor, PropertyChangeMask)
            var size = CLong(owned.content.count)
            _ = x.pointee.XChangeProperty(display, request.requestor, reply.xselection.property, atoms.incr, 32, PropModeReplace, &size, 1)
            sending.append(Sending(requestor: request.requestor, property: reply.xselection.property, target: request.target,
                                   content: owned.content, deadline: ClipboardDeadline.after(ClipboardDeadline.transfer)))
        } else {
            reply.xselection.property = 0
        }
        _ = x.pointee.XSendEvent(display, request.requestor, 0, 0, &reply)
        _ = x.pointee.XFlush(display)
    }

    /// A requestor deleted its property: the next chunk of an INCR transfer to it, or the empty
    /// one that ends it. A requestor that stops reading is dropped at the transfer's deadline.
    private func sendNextChunk(requestor: Window, property: Atom) {
        guard let index = sending.firstIndex(where: { $0.requestor == requestor && $0.property == property }) else { return }
        guard ClipboardDeadline.now < sending[index].deadline else {
            sending.remove(at: index)
            _ = x.pointee.XSelectInput(display, requestor, NoEventMask)
            return
        }
        let transfer = sending[index]
        let count = min(Self.chunkBytes, transfer.content.count - transfer.offset)
        transfer.content.withUnsafeBufferPointer { bytes in
            _ = x.pointee.XChangeProperty(display, requestor, property, transfer.target, 8, PropModeReplace,
                                          bytes.baseAddress.map { $0 + transfer.offset }, Int32(count))
        }
        if count == 0 {
            sending.remove(at: index)
            _ = x.pointee.XSelectInput(display, requestor, NoEventMask)
        } else {
            sending[index].offset += count
        }
        _ = x.pointee.XFlush(display)
    }
}

/// Why the agent cannot go on, in a sentence. `sessionCannot`: the session itself offers no way
/// (no data-control protocol, no XFixes), so starting the agent again cannot help.
public struct AgentError: Error, CustomStringConvertible {
    public let description: String
    public let sessionCannot: Bool
    init(_ description: String, sessionCannot: Bool = false) {
        self.description = description
        self.sessionCannot = sessionCannot
    }
}
