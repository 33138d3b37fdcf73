import Glibc
import Synchronization

/// Where to connect.
public enum BusAddress: Sendable, Equatable {
    /// The user's session bus, from `DBUS_SESSION_BUS_ADDRESS`.
    case session
    /// An explicit bus address such as `unix:path=/run/user/1000/bus`.
    case address(String)
}

/// A connection to a message bus: calls, signals, names and exported objects.
///
/// One bus thread owns the libdbus connection; every method here may be called
/// from any task. Incoming method calls are answered in arrival order on that
/// thread (see `Method.Ordering`). Call `close()` when done: the connection,
/// its thread and its exported objects live until then, or until the bus goes away.
public final class Connection: Sendable {
    private let loop: BusLoop
    private let registry = ObjectRegistry()
    private let nextSubscriptionID = Atomic<UInt64>(1)
    /// The other connections on the bus, identified while an access check is set.
    private let peers = Peers()
    private let log: @Sendable (String) -> Void
    private let accessCheck = Mutex<AccessCheck?>(nil)

    /// The check in a class box: reading a function value back out of a Mutex re-wraps
    /// it in a reabstraction thunk on every read, and the thunks piled up (measured:
    /// p50 of a trivial call grew from 78 to 609 µs over 4 000 calls).
    private final class AccessCheck: Sendable {
        let check: @Sendable (MethodCall) throws -> Void
        let identification: SandboxIdentification
        init(_ check: @escaping @Sendable (MethodCall) throws -> Void, identification: SandboxIdentification) {
            self.check = check
            self.identification = identification
        }
    }

    /// The unique name the bus assigned, such as `:1.42`.
    public let uniqueName: String

    /// Connects and registers with the bus. `log` receives failures that cannot be
    /// replied to anyone (a handler's internal error); by default they go to stderr.
    public init(
        _ address: BusAddress = .session,
        log: @escaping @Sendable (String) -> Void = Connection.logToStandardError
    ) throws(DBusError) {
        loop = try BusLoop(address: address)
        uniqueName = loop.uniqueName
        self.log = log
        loop.start()
        // The dispatcher runs on the bus thread; it keeps the connection alive until it closes.
        Task(executorPreference: loop) { [self, loop] in
            while let message = await loop.nextIncoming() {
                await self.dispatch(message)
            }
        }
    }

    /// Closes the connection. Pending calls fail with `Disconnected`; signal streams end.
    public func close() {
        loop.submit { [loop] in loop.stop() }
    }

    /// Returns when the connection has closed, by `close()` or because the bus went away.
    public func waitUntilClosed() async {
        await withCheckedContinuation { continuation in
            loop.submit({ [loop] in loop.addCloseWaiter(continuation) }, ifClosed: { continuation.resume() })
        }
    }

    /// Writes one line to stderr, where journald picks it up.
    public static func logToStandardError(_ line: String) {
        let text = "dbus: \(line)\n"
        text.utf8CString.withUnsafeBufferPointer { _ = write(2, $0.baseAddress, $0.count - 1) }
    }

    // MARK: Sending

    /// Sends a message without waiting for anything (signals, replies, no-reply calls).
    public func send(_ message: Message) throws(DBusError) {
        try message.validate()
        if loop.isCurrentThread {
            loop.sendNow(message)
        } else {
            loop.submit { [loop] in loop.sendNow(message) }
        }
    }

    /// Runs `job` on the bus thread once every call received so far has been dispatched
    /// and the work it queued has run, before the thread next waits for the bus: for work
    /// that the calls of a burst can share, such as one commit for all their writes.
    /// After the connection has closed, `job` runs at once on the caller's thread.
    public func afterDispatch(_ job: @escaping @Sendable () -> Void) {
        if loop.isCurrentThread {
            loop.runAfterDispatch(job)
        } else {
            loop.submit({ [loop] in loop.runAfterDispatch(job) }, ifClosed: job)
        }
    }

    /// Runs `job` on the bus thread now and every `interval` after, until the task is
    /// cancelled or the connection closes: for work that must stop when the bus thread is
    /// stuck, such as a watchdog's ping.
    public func repeatOnBusThread(every interval: Duration, _ job: @escaping @Sendable () -> Void) -> Task<Void, Never> {
        Task(executorPreference: loop) { [loop] in
            while !Task.isCancelled && !loop.isClosed {
                job()
                try? await Task.sleep(for: interval)
            }
        }
    }

    /// Emits a signal from `path`, heard by `audience`: by default whoever may see the object
    /// at `path` (see `export`'s `owner`); host clients only where no object is.
    ///
    /// Without an access check (`setAccessCheck`) the signal is broadcast to every match rule.
    /// With one, it is broadcast only while no sandboxed app is on the bus; else each
    /// connection that `audience` admits gets a copy addressed to it (`Peers`). Either way a
    /// listener's match rules work as they always did.
    public func emit(
        path: ObjectPath, interface: String, member: String, _ body: [DBusValue] = [], to audience: Audience? = nil
    ) throws(DBusError) {
        let signal = Message.signal(path: path, interface: interface, member: member, body: body)
        guard accessCheck.withLock({ $0 }) != nil else { return try send(signal) }
        try signal.validate()
        let audience = audience ?? registry.object(at: path)?.audience ?? .hosts
        // Decided on the bus thread as it sends: every announcement read by then counts.
        let send: @Sendable () throws(DBusError) -> Void = { [loop, peers] () throws(DBusError) in
            if let recipients = peers.recipients(for: audience) {
                try loop.send(signal, toEach: recipients)
            } else {
                _ = try loop.send(signal)
            }
        }
        if loop.isCurrentThread {
            try send()
        } else {
            loop.submit { try? send() }
        }
    }

    /// Emits `org.freedesktop.DBus.Properties.PropertiesChanged` for `interface` at `path`,
    /// heard by `audience` as `emit` has it.
    public func emitPropertiesChanged(
        path: ObjectPath, interface: String, changed: [String: DBusValue] = [:], invalidated: [String] = [],
        to audience: Audience? = nil
    ) {
        do {
            try emit(path: path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", [
                .string(interface), .record(changed), .strings(invalidated),
            ], to: audience)
        } catch {
            log("could not emit PropertiesChanged for \(path): \(error)")
        }
    }

    /// Announces that the properties `names` of `interface` at `path` changed, as the
    /// interface declares them (`sd_bus_emit_properties_changed` is the model): with the value
    /// read through the getter for those that emit it, by name for those that invalidate. A
    /// property the interface does not declare, or declares constant or unannounced, is a bug:
    /// an internal error, and nothing is sent.
    public func emitPropertiesChanged(path: ObjectPath, of interface: Interface, _ names: [String], to audience: Audience? = nil) async throws {
        var changed: [String: DBusValue] = [:]
        var invalidated: [String] = []
        for name in names {
            guard let property = interface.property(named: name) else {
                throw InternalError("\(interface.name) has no property \(name) to announce")
            }
            switch property.changeSignal {
            case .emits: changed[name] = try await property.value(at: path)
            case .invalidates: invalidated.append(name)
            case .const, .none: throw InternalError("\(interface.name).\(name) is not announced when it changes (\(property.changeSignal.rawValue))")
            }
        }
        emitPropertiesChanged(path: path, interface: interface.name, changed: changed, invalidated: invalidated, to: audience)
    }

    /// Calls a method and returns its reply, or throws the error it replied with.
    ///
    /// Throws `NoReply` after `timeout`, `Disconnected` when the connection closes
    /// first, `CancellationError` when the calling task is cancelled, and
    /// `InvalidArgs` (before sending) when the message could not be sent.
    public func call(_ message: Message, timeout: Duration = .seconds(25)) async throws -> Message {
        try message.validate()
        let cancellation = CallCancellation()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                loop.submit({ [loop] in
                    loop.startCall(message, timeout: timeout, cancellation: cancellation, continuation: continuation)
                }, ifClosed: { continuation.resume(throwing: DBusError.disconnected()) })
            }
        } onCancel: {
            cancellation.cancel()
            loop.submit { [loop] in loop.cancelCall(cancellation) }
        }
    }

    /// Calls `interface.member` on `path` at `destination` and returns the reply's body.
    public func call(
        _ destination: String, _ path: ObjectPath, _ interface: String, _ member: String,
        _ arguments: [DBusValue] = [], timeout: Duration = .seconds(25)
    ) async throws -> [DBusValue] {
        try await call(
            .methodCall(destination: destination, path: path, interface: interface, member: member, body: arguments),
            timeout: timeout
        ).body
    }

    // MARK: Signals

    /// Signals matching `rule`, from the moment this returns until the stream is dropped.
    ///
    /// The match rule is added on the bus before returning and removed when the
    /// stream terminates, so the stream's lifetime owns the rule.
    public func signals(matching rule: MatchRule) async throws -> AsyncStream<Message> {
        try rule.validate()
        let id = nextSubscriptionID.wrappingAdd(1, ordering: .relaxed).oldValue
        let (stream, continuation) = AsyncStream<Message>.makeStream()
        let ruleText = rule.text
        continuation.onTermination = { [weak self, loop] _ in
            loop.submit { loop.removeSubscription(id: id) }
            try? self?.send(.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", member: "RemoveMatch", body: [.string(ruleText)]
            ).noReply())
        }
        // Registered before AddMatch goes out, so no signal slips between the two.
        loop.submit({ [loop] in
            loop.addSubscription(id: id, .init(rule: rule, continuation: continuation))
        }, ifClosed: { continuation.finish() })
        _ = try await callBus("AddMatch", [.string(ruleText)])
        return stream
    }

    // MARK: Names

    /// Becomes the primary owner of `name`, or throws `NameTaken` when another
    /// connection owns it (the request is never queued).
    public func requestName(_ name: String) async throws {
        try DBusNames.validate(name, as: .busName)
        let flags: UInt32 = 4  // DBUS_NAME_FLAG_DO_NOT_QUEUE
        let reply = try await callBus("RequestName", [.string(name), .uint32(flags)])
        switch reply.first?.uint32Value {
        case 1, 4: return  // primary owner now, or already
        default:
            let owner = try? await nameOwner(name)
            throw DBusError(
                name: DBusError.Name.nameTaken,
                message: "the bus name \(name) is already owned by \(owner ?? "another connection"); is another instance running?")
        }
    }

    /// Gives up `name`.
    public func releaseName(_ name: String) async throws {
        try DBusNames.validate(name, as: .busName)
        _ = try await callBus("ReleaseName", [.string(name)])
    }

    /// The unique name owning `name`, or nil when nobody does.
    public func nameOwner(_ name: String) async throws -> String? {
        try DBusNames.validate(name, as: .busName)
        do {
            return try await callBus("GetNameOwner", [.string(name)]).first?.stringValue
        } catch let error as DBusError where error.name == DBusError.Name.nameHasNoOwner {
            return nil
        }
    }

    /// Waits until some connection owns `name`, or throws `Timeout` after `timeout`.
    public func waitForName(_ name: String, timeout: Duration = .seconds(10)) async throws {
        let changes = try await signals(matching: MatchRule(
            sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged", arg0: name))
        if try await nameOwner(name) != nil { return }
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await change in changes where change.body.count == 3 && change.body[2].stringValue?.isEmpty == false {
                    return true
                }
                return false
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return false
            }
            let owned = try await group.next() ?? false
            group.cancelAll()
            if !owned {
                throw DBusError(name: DBusError.Name.timeout, message: "\(name) did not appear on the bus within \(timeout)")
            }
        }
    }

    /// Who is behind a unique bus name: its Unix user, as the bus vouches, and its sandbox
    /// (`SandboxIdentification`). Asked of the bus once per name, and remembered until the
    /// name leaves the bus (while an access check is set) — a unique name is never reused.
    public func caller(of sender: String, identification: SandboxIdentification = .init()) async throws -> Caller {
        if let cached = peers.caller(sender) { return cached }
        let reply = try await callBus("GetConnectionCredentials", [.string(sender)])
        guard let record = reply.first?.stringKeyedValue, let credentials = Credentials(record) else {
            throw DBusError.failed("the bus did not say which user \(sender) runs as")
        }
        let caller: Caller
        do {
            caller = try identification.caller(credentials)
        } catch {
            // A process that ended is leaving; one that cannot be read might be in a sandbox.
            if error.name != DBusError.Name.unixProcessIdUnknown { peers.unidentifiable(sender) }
            throw error
        }
        // A name that left while it was being identified stays remembered: now and then, the
        // names no longer on the bus are dropped, so that they cannot pile up.
        let remembered = peers.identified(sender, as: caller)
        if remembered > 1024 && remembered.isMultiple(of: 256) {
            peers.keep(Set(try await callBus("ListNames", []).first?.arrayValue?.compactMap(\.stringValue) ?? []))
        }
        return caller
    }

    /// Keeps `peers` to the connections on the bus, until this one closes: each is identified
    /// as it connects (those already there, after this returns) and forgotten as it leaves,
    /// so that signals reach listeners that never call (`emit`). One at a time, in the bus's
    /// order: a name that leaves is never identified after it was forgotten.
    private func followConnections(identification: SandboxIdentification) async throws {
        let appeared: @Sendable (String) -> Void = { [peers, uniqueName] name in
            if name != uniqueName { peers.appeared(name) }
        }
        loop.submit { [loop] in loop.connectionAppeared = appeared }
        let changes = try await signals(matching: MatchRule(
            sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged"))
        let present = try await callBus("ListNames", []).first?.arrayValue?.compactMap(\.stringValue).filter { $0.hasPrefix(":") } ?? []
        for name in present { appeared(name) }
        peers.sweptStart()
        Task(executorPreference: loop) { [weak self, uniqueName] in
            for name in present where name != uniqueName {
                _ = try? await self?.caller(of: name, identification: identification)
            }
            for await change in changes {
                guard change.body.count == 3, let name = change.body[0].stringValue, name.hasPrefix(":"), name != uniqueName,
                      let newOwner = change.body[2].stringValue else { continue }
                if newOwner.isEmpty {
                    self?.peers.left(name)
                } else {
                    _ = try? await self?.caller(of: name, identification: identification)
                }
            }
        }
    }

    /// How many callers are remembered now (for tests: each is forgotten as it leaves).
    public var rememberedCallers: Int { peers.count }

    private func callBus(_ member: String, _ arguments: [DBusValue]) async throws -> [DBusValue] {
        try await call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", member, arguments)
    }

    // MARK: Exporting objects

    /// Exports `interfaces` at `path`, replacing what was there.
    ///
    /// With `objectManager`, the path also implements `org.freedesktop.DBus.ObjectManager`
    /// for everything below it. An object exported below a manager is announced with
    /// `InterfacesAdded`, with the values in `properties` (by interface name: every property
    /// of that interface) where given, so that a caller who just stored them need not have
    /// them read back. Export before requesting a name: activated services get calls at once.
    ///
    /// An object with an `owner` (an app id) belongs to that app: for a sandboxed caller of
    /// another app it does not exist (its calls are answered `UnknownObject`; introspection
    /// and `GetManagedObjects` leave it out), and its signals, `InterfacesAdded` and
    /// `InterfacesRemoved` included, do not reach it. An object that is not `managed` is left
    /// out of the managers above it: a service's own endpoint among the objects it manages.
    public func export(
        _ path: ObjectPath, _ interfaces: [Interface], objectManager: Bool = false,
        properties: [String: [String: DBusValue]] = [:], owner: String? = nil, managed: Bool = true
    ) async throws {
        let object = ObjectRegistry.Object(interfaces: interfaces, isObjectManager: objectManager, owner: owner, isManaged: managed)
        let managers = registry.add(path, object)
        guard !managers.isEmpty else { return }
        let record = try await registry.interfacesRecord(object, at: path, known: properties)
        for manager in managers {
            try emit(path: manager, interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded", [
                .objectPath(path), record,
            ], to: object.audience)
        }
    }

    /// Removes the object at `path`, announcing it with `InterfacesRemoved` to managers above it.
    public func unexport(_ path: ObjectPath) {
        guard let (object, managers) = registry.remove(path) else { return }
        let names = ObjectRegistry.StandardInterface.everyObjectHas + object.interfaces.map(\.name)
        for manager in managers {
            try? emit(path: manager, interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesRemoved", [
                .objectPath(path), .strings(names),
            ], to: object.audience)
        }
    }

    /// Runs `check` before every incoming call (standard interfaces included, except
    /// `Peer`, which libdbus answers), with `MethodCall.caller` set: who is calling, its Unix
    /// user as the bus vouches and its sandbox (`identification`). What it throws is the reply;
    /// a caller that cannot be identified is refused with `AccessDenied` before it runs.
    ///
    /// Each connection on the bus is identified once, as it connects, and remembered until
    /// its name leaves the bus, so the check itself is synchronous: it costs next to nothing
    /// on every call. From then on, signals reach only those that may hear them (`emit`).
    public func setAccessCheck(
        identification: SandboxIdentification = .init(), _ check: @escaping @Sendable (MethodCall) throws -> Void
    ) async throws {
        let box = AccessCheck(check, identification: identification)
        accessCheck.withLock { $0 = box }
        try await followConnections(identification: identification)
    }

    /// Answers a caller's calls beyond `limit` in flight (received, not yet answered) with
    /// `refusal` at once, before they are read: one caller cannot fill the service's memory
    /// or take all of its time. Set it before exporting.
    public func limitCalls(perCaller limit: Int, refusal: DBusError) {
        loop.submit { [loop] in loop.limitCalls(perSender: limit, refusal: refusal) }
    }

    /// For a clean stop: answers every call that arrives from now on with `refusal` at once,
    /// and returns when every call received before has been answered, or after `timeout`.
    /// Returns false when the timeout came first.
    public func drain(refusing refusal: DBusError, timeout: Duration) async -> Bool {
        let timer = Mutex<Task<Void, Never>?>(nil)
        let drained = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let answer = ResumeOnce(continuation)
            loop.submit({ [loop] in loop.drain(refusing: refusal) { answer.resume(true) } }, ifClosed: { answer.resume(true) })
            timer.withLock {
                $0 = Task {
                    try? await Task.sleep(for: timeout)
                    answer.resume(false)
                }
            }
        }
        timer.withLock { $0?.cancel() }
        return drained
    }

    /// The introspection XML this connection serves for `path`.
    public func introspectionXML(for path: ObjectPath) -> String {
        registry.introspect(path)
    }

    // MARK: Dispatch

    /// Routes one incoming call (on the bus thread, in arrival order).
    /// The message is consumed into the `MethodCall`: a copy would retain every string it holds.
    private nonisolated(nonsending) func dispatch(_ message: consuming Message) async {
        var call = MethodCall(message: message, connection: self)
        let route: ObjectRegistry.Route
        do {
            route = try registry.resolve(call.message)
            guard call.message.bodyMatches(route.signature.types) else {
                throw DBusError.invalidArgs(
                    "\(call.message.member ?? "") takes arguments of type '\(route.signature)', got '\(call.message.signature)'")
            }
        } catch {
            return reply(to: call.message, with: .failure(error))
        }
        if let box = accessCheck.withLock({ $0 }) {
            do {
                if let sender = call.sender { call.caller = try await caller(of: sender, identification: box.identification) }
                guard registry.isVisible(call.path, to: call.caller) else {
                    throw DBusError(name: DBusError.Name.unknownObject, message: "no object at \(call.path)")
                }
                try box.check(call)
            } catch {
                return reply(to: call.message, with: .failure(error))
            }
        }
        switch route.ordering {
        case .inOrder:
            await run(route, call)
        case .concurrent:
            Task(executorPreference: loop) { await self.run(route, call) }
        }
    }

    private nonisolated(nonsending) func run(_ route: ObjectRegistry.Route, _ call: MethodCall) async {
        let result: Result<Message, any Error>
        do {
            switch route {
            case .method(let method):
                switch method.responder {
                case .values(let handler):
                    let body = try await handler(call)
                    guard body.matches(method.outputSignature.types) else {
                        throw InternalError(
                            "\(method.name) returned '\(Signature(body.map(\.type)))', declared '\(method.outputSignature)'")
                    }
                    result = .success(call.message.makeReturn(body))
                case .encoded(let handler):
                    // Its signature is compared with the declared one once written (Message.makeRaw).
                    var reply = call.message.makeReturn()
                    reply.encodedBody = (try await handler(call), method.outputSignature)
                    result = .success(reply)
                }
            case .standard(let standard, let member, _, let object):
                result = .success(call.message.makeReturn(try await registry.standard(standard, member, on: object, call)))
            }
        } catch {
            result = .failure(error)
        }
        reply(to: call.message, with: result)
    }

    /// Sends the reply to `message`, or the error reply its handler's failure calls for.
    /// Every incoming call comes here exactly once, with or without a reply to send.
    private func reply(to message: Message, with result: consuming Result<Message, any Error>) {
        guard !message.noReplyExpected else {
            let sender = message.sender ?? ""
            if loop.isCurrentThread { loop.callFinished(sender: sender) } else { loop.submit { [loop] in loop.callFinished(sender: sender) } }
            return
        }
        let reply: Message
        switch consume result {
        case .success(let made):
            reply = made
        case .failure(let error as any DBusErrorConvertible):
            var dbusError = error.dbusError
            if !DBusNames.isValid(dbusError.name, as: .errorName) {
                // A name that came from outside (or a typo) must not reach libdbus, which aborts on it.
                log("handler threw an invalid error name '\(DBusError.printable(dbusError.name))'; replying Failed")
                dbusError = .failed(dbusError.message)
            }
            reply = message.makeError(dbusError)
        case .failure(let error):
            log("\(message.interface ?? "").\(message.member ?? "") on \(message.path ?? .root) failed: \(error)")
            reply = message.makeError(.failed("the service failed to handle \(message.member ?? "the call"); see its log"))
        }
        if loop.isCurrentThread {
            send(reply, answering: message)
        } else {
            loop.submit { [self] in send(reply, answering: message) }
        }
    }

    /// Sends a reply on the bus thread. One that cannot be sent as it is (a value libdbus would
    /// refuse, an encoded body that fails to write) is replaced by `Failed`.
    private func send(_ reply: Message, answering message: Message) {
        defer { loop.callFinished(sender: message.sender ?? "") }
        do {
            // The header came from the bus and the error name was checked: only the body can
            // hold something libdbus would refuse. An encoded body checks itself as it is written.
            for value in reply.body { try value.check(against: value.type) }
            _ = try loop.send(reply)
        } catch {
            log("reply to \(message.member ?? "") could not be sent: \(error)")
            loop.sendNow(message.makeError(.failed("the service produced a reply that could not be sent; see its log")))
        }
    }
}

extension Message {
    /// This method call, marked as not expecting a reply.
    public func noReply() -> Message {
        var copy = self
        copy.noReplyExpected = true
        return copy
    }
}

/// A continuation resumed by whichever of several events comes first.
private final class ResumeOnce<T: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<T, Never>?>

    init(_ continuation: CheckedContinuation<T, Never>) {
        self.continuation = Mutex(continuation)
    }

    func resume(_ value: T) {
        continuation.withLock { $0.take() }?.resume(returning: value)
    }
}
