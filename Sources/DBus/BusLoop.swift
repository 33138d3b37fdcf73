import CDBus
import Glibc
import Synchronization

/// The one thread that owns a libdbus connection.
///
/// Every libdbus call for the connection happens here (shared/FIELD-NOTES.md:
/// a dispatcher blocked in `read_write_dispatch(-1)` starves other threads).
/// The thread runs `poll()` over the descriptors libdbus asks for, its timeouts
/// and an eventfd that other threads write to after queueing work. It is also a
/// `TaskExecutor`: tasks that prefer it run their code here, so a handler that
/// answers a call goes from message to reply without changing threads.
///
/// `@unchecked Sendable`: the mutable state below the `jobs` mutex is touched
/// only on the bus thread (or before it starts), which is the one exception the
/// style guide allows.
final class BusLoop: TaskExecutor, @unchecked Sendable {
    typealias Job = @Sendable () -> Void

    private struct Queue {
        var jobs: [Job] = []
        var closed = false
    }

    private let queue = Mutex(Queue())
    private let wakeFD: Int32
    let connection: OpaquePointer

    // Bus-thread state.
    private var watches: [OpaquePointer] = []
    private var timeouts: [(timeout: OpaquePointer, deadline: UInt64)] = []
    private var pending: [UInt32: PendingCall] = [:]
    /// No later than the earliest deadline in `pending` (the call that had it may have been
    /// answered since): the loop looks through the calls when it comes, not on every pass,
    /// which with thousands of calls in flight cost more than reading their replies.
    private var nextCallDeadline = UInt64.max
    private var subscriptions: [UInt64: SignalSubscription] = [:]
    private var closeWaiters: [CheckedContinuation<Void, Never>] = []
    /// Incoming method calls not yet taken by the dispatcher, oldest at `inboxHead`; each
    /// is moved out as it is taken (a copy would retain every string it holds).
    private var inbox: [Message?] = []
    private var inboxHead = 0
    /// The dispatcher, when it waits for the next call.
    private var parkedDispatcher: UnsafeContinuation<Void, Never>?
    private var headerStrings = HeaderStrings()
    /// Calls received and not yet answered, in all and by sender (the latter with `limitCalls`).
    private var totalInFlight = 0
    private var callsInFlight: [String: Int] = [:]
    /// Waiting for `totalInFlight` to reach 0 (`drain`).
    private var drainWaiters: [Job] = []
    /// Once set, every new call is answered with it at once (the service is stopping).
    private var closingRefusal: DBusError?
    /// At most this many calls in flight per sender; beyond, `refusal` answers at once.
    private var callLimit = Int.max
    private var refusal = DBusError.failed("too many calls in flight")
    /// Work to run once the calls received so far have been dispatched (`afterDispatch`).
    private var afterDispatch: [Job] = []
    /// Told of each connection the bus announces, as the announcement is read (`Peers.appeared`).
    var connectionAppeared: (@Sendable (String) -> Void)?
    private var stopping = false
    private var finished = false


    struct PendingCall {
        let continuation: CheckedContinuation<Message, any Error>
        let deadline: UInt64
        let timeout: Duration
        let cancellation: CallCancellation
    }

    struct SignalSubscription {
        let rule: MatchRule
        let continuation: AsyncStream<Message>.Continuation
    }

    /// Opens a private connection to `address` and says Hello, on the calling
    /// thread; the bus thread takes the connection over when `start()` runs.
    init(address: BusAddress) throws(DBusError) {
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        func failure(_ what: String) -> DBusError {
            let name = error.name.map { String(cString: $0) } ?? DBusError.Name.failed
            let detail = error.message.map { String(cString: $0) } ?? "unknown reason"
            return DBusError(name: name, message: "\(what): \(detail)")
        }

        let opened: OpaquePointer?
        switch address {
        case .session:
            opened = dbus_bus_get_private(DBUS_BUS_SESSION, &error)
        case .address(let text):
            guard !containsNUL(text) else { throw .invalidArgs("the bus address contains a NUL byte") }
            opened = text.withCString { dbus_connection_open_private($0, &error) }
            if let opened, dbus_bus_register(opened, &error) == 0 {
                dbus_connection_close(opened)
                dbus_connection_unref(opened)
                throw failure("could not register with the bus at \(text)")
            }
        }
        guard let opened else { throw failure("could not connect to the bus") }
        // libdbus would otherwise _exit() the process when the bus goes away.
        dbus_connection_set_exit_on_disconnect(opened, 0)

        let fd = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard fd >= 0 else {
            dbus_connection_close(opened)
            dbus_connection_unref(opened)
            throw .failed("eventfd failed: errno \(errno)")
        }
        self.connection = opened
        self.wakeFD = fd

        // The loop outlives the connection's callbacks: they are cleared in `teardown()`.
        let context = Unmanaged.passUnretained(self).toOpaque()
        dbus_connection_set_watch_functions(opened, busAddWatch, busRemoveWatch, busToggleWatch, context, nil)
        dbus_connection_set_timeout_functions(opened, busAddTimeout, busRemoveTimeout, busToggleTimeout, context, nil)
        dbus_connection_add_filter(opened, busFilter, context, nil)
    }

    /// The unique name the bus gave this connection.
    var uniqueName: String {
        dbus_bus_get_unique_name(connection).map { String(cString: $0) } ?? ""
    }

    /// Starts the bus thread. The loop keeps itself alive until the connection closes.
    func start() {
        let retained = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { argument in
            guard let argument else { return nil }
            let loop = Unmanaged<BusLoop>.fromOpaque(argument).takeRetainedValue()
            loop.run()
            return nil
        }, retained)
        precondition(result == 0, "pthread_create failed: \(result)")
        pthread_detach(thread)
    }

    /// True once the loop has ended and the connection is closed.
    var isClosed: Bool { queue.withLock { $0.closed } }

    // MARK: Work from other threads

    /// Runs `job` on the bus thread, or `ifClosed` (on the caller's thread) when the loop has ended.
    func submit(_ job: @escaping Job, ifClosed: (() -> Void)? = nil) {
        let wake: Bool? = queue.withLock { queue in
            if queue.closed { return nil }
            queue.jobs.append(job)
            return queue.jobs.count == 1
        }
        switch wake {
        case nil: ifClosed?()
        // The bus thread drains its queue before it polls again: no wake-up needed.
        case true? where !isCurrentThread: signalWake()
        default: break
        }
    }

    private func signalWake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// True on the bus thread.
    var isCurrentThread: Bool {
        pthread_getspecific(BusLoop.threadKey) == Unmanaged.passUnretained(self).toOpaque()
    }

    private static let threadKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    // MARK: TaskExecutor

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        submit({ unowned.runSynchronously(on: self.asUnownedTaskExecutor()) }, ifClosed: {
            // Tasks that preferred this thread carry on in the global pool.
            globalConcurrentExecutor.enqueue(unowned)
        })
    }

    // MARK: The loop

    private func run() {
        pthread_setspecific(BusLoop.threadKey, Unmanaged.passUnretained(self).toOpaque())
        var fds: [pollfd] = []
        var polled: [OpaquePointer?] = []
        while !stopping {
            // Handlers resumed by dispatch queue jobs, and jobs may send and read:
            // drain both before sleeping in poll(). Once both are drained, the work that
            // waited for every call read so far (a group commit), which may resume handlers.
            var again = false
            repeat {
                runJobs()
                dispatchIncoming()
                again = queue.withLock { !$0.jobs.isEmpty }
                if !again && !stopping { again = runAfterDispatchJobs() }
            } while !stopping && again
            if stopping { break }
            if dbus_connection_get_is_connected(connection) == 0 {
                stopping = true
                break
            }

            fds.removeAll(keepingCapacity: true)
            polled.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0))
            polled.append(nil)
            for watch in watches where dbus_watch_get_enabled(watch) != 0 {
                let flags = dbus_watch_get_flags(watch)
                var events: Int16 = 0
                if flags & DBUS_WATCH_READABLE.rawValue != 0 { events |= Int16(POLLIN) }
                if flags & DBUS_WATCH_WRITABLE.rawValue != 0 { events |= Int16(POLLOUT) }
                fds.append(pollfd(fd: dbus_watch_get_unix_fd(watch), events: events, revents: 0))
                polled.append(watch)
            }

            let hasJobs = queue.withLock { !$0.jobs.isEmpty }
            let timeout = hasJobs ? 0 : pollTimeout()
            let ready = poll(&fds, nfds_t(fds.count), timeout)
            if ready < 0 && errno != EINTR { break }

            if fds[0].revents != 0 {
                var counter: UInt64 = 0
                _ = read(wakeFD, &counter, 8)
            }
            for index in fds.indices.dropFirst() where fds[index].revents != 0 {
                // A watch handled earlier in this pass may have removed this one.
                guard let watch = polled[index], watches.contains(watch) else { continue }
                var flags: UInt32 = 0
                let revents = Int32(fds[index].revents)
                if revents & Int32(POLLIN) != 0 { flags |= DBUS_WATCH_READABLE.rawValue }
                if revents & Int32(POLLOUT) != 0 { flags |= DBUS_WATCH_WRITABLE.rawValue }
                if revents & Int32(POLLERR) != 0 { flags |= DBUS_WATCH_ERROR.rawValue }
                if revents & Int32(POLLHUP) != 0 { flags |= DBUS_WATCH_HANGUP.rawValue }
                dbus_watch_handle(watch, flags)
            }
            fireTimeouts()
            expireCalls()
        }
        teardown()
    }

    private func runJobs() {
        let jobs = queue.withLock { queue in
            let jobs = queue.jobs
            queue.jobs = []
            return jobs
        }
        for job in jobs { job() }
    }

    /// Runs the `afterDispatch` work queued so far; true if there was any.
    private func runAfterDispatchJobs() -> Bool {
        guard !afterDispatch.isEmpty else { return false }
        let due = afterDispatch
        afterDispatch = []
        for job in due { job() }
        return true
    }

    private func dispatchIncoming() {
        while dbus_connection_get_dispatch_status(connection) == DBUS_DISPATCH_DATA_REMAINS {
            dbus_connection_dispatch(connection)
        }
    }

    /// Milliseconds until the next libdbus timeout or call deadline, or -1 for none.
    private func pollTimeout() -> Int32 {
        var next = UInt64.max
        for entry in timeouts where dbus_timeout_get_enabled(entry.timeout) != 0 {
            next = min(next, entry.deadline)
        }
        next = min(next, nextCallDeadline)
        guard next != .max else { return -1 }
        let now = monotonicNanoseconds()
        guard next > now else { return 0 }
        return Int32(clamping: (next - now + 999_999) / 1_000_000)
    }

    private func fireTimeouts() {
        let now = monotonicNanoseconds()
        for entry in timeouts where entry.deadline <= now && dbus_timeout_get_enabled(entry.timeout) != 0 {
            // libdbus timeouts repeat until removed.
            reschedule(entry.timeout, from: now)
            dbus_timeout_handle(entry.timeout)
        }
    }

    private func reschedule(_ timeout: OpaquePointer, from now: UInt64) {
        guard let index = timeouts.firstIndex(where: { $0.timeout == timeout }) else { return }
        let interval = UInt64(max(dbus_timeout_get_interval(timeout), 0)) * 1_000_000
        timeouts[index].deadline = now + interval
    }

    private func expireCalls() {
        let now = monotonicNanoseconds()
        guard now >= nextCallDeadline else { return }
        let expired = pending.filter { $0.value.deadline <= now }
        for serial in expired.keys { pending[serial] = nil }
        nextCallDeadline = pending.values.lazy.map(\.deadline).min() ?? .max
        for call in expired.values {
            call.continuation.resume(throwing: DBusError(
                name: DBusError.Name.noReply,
                message: "no reply within \(call.timeout); the service may be busy or gone"))
        }
    }

    /// Ends the loop's life: everything waiting is told, the connection closed.
    private func teardown() {
        let leftover = queue.withLock { queue in
            queue.closed = true
            let jobs = queue.jobs
            queue.jobs.removeAll()
            return jobs
        }
        finished = true
        // Jobs queued before the close still run, and see `finished`.
        for job in leftover { job() }
        _ = runAfterDispatchJobs()
        for call in pending.values { call.continuation.resume(throwing: DBusError.disconnected()) }
        pending.removeAll()
        nextCallDeadline = .max
        for subscription in subscriptions.values { subscription.continuation.finish() }
        subscriptions.removeAll()
        for waiter in drainWaiters { waiter() }
        drainWaiters.removeAll()
        dbus_connection_remove_filter(connection, busFilter, Unmanaged.passUnretained(self).toOpaque())
        // Replies still queued go out before the connection closes.
        dbus_connection_flush(connection)
        dbus_connection_close(connection)
        dbus_connection_set_watch_functions(connection, nil, nil, nil, nil, nil)
        dbus_connection_set_timeout_functions(connection, nil, nil, nil, nil, nil)
        dbus_connection_unref(connection)
        close(wakeFD)
        parkedDispatcher?.resume()
        parkedDispatcher = nil
        for waiter in closeWaiters { waiter.resume() }
        closeWaiters.removeAll()
    }

    // MARK: Operations (bus thread)

    /// Sends a message that expects no reply. Returns false once the connection is gone.
    @discardableResult
    func sendNow(_ message: Message) -> Bool {
        (try? send(message)) ?? false
    }

    /// Sends `message`; throws when it cannot be built (a bad value in its body), returns
    /// false when the connection is closed or out of memory.
    func send(_ message: Message) throws(DBusError) -> Bool {
        guard !finished else { return false }
        let raw = try message.makeRaw()
        defer { dbus_message_unref(raw) }
        return dbus_connection_send(connection, raw, nil) != 0
    }

    /// Sends `message` to each of `destinations`, a copy addressed to each, expecting no reply.
    /// Built once and copied by libdbus: building it again for each was most of the cost
    /// (Benchmarks/README, "Signals and sandboxed apps").
    func send(_ message: Message, toEach destinations: [String]) throws(DBusError) {
        guard !finished, !destinations.isEmpty else { return }
        let raw = try message.makeRaw()
        defer { dbus_message_unref(raw) }
        for destination in destinations {
            guard let copy = dbus_message_copy(raw) else { return }
            defer { dbus_message_unref(copy) }
            dbus_message_set_no_reply(copy, 1)
            guard destination.withCString({ dbus_message_set_destination(copy, $0) }) != 0,
                  dbus_connection_send(connection, copy, nil) != 0 else { return }
        }
    }

    func startCall(
        _ message: Message, timeout: Duration, cancellation: CallCancellation,
        continuation: CheckedContinuation<Message, any Error>
    ) {
        if cancellation.isCancelled { return continuation.resume(throwing: CancellationError()) }
        guard !finished else { return continuation.resume(throwing: DBusError.disconnected()) }
        let raw: OpaquePointer
        do {
            raw = try message.makeRaw()
        } catch {
            return continuation.resume(throwing: error)
        }
        defer { dbus_message_unref(raw) }
        var serial: UInt32 = 0
        guard dbus_connection_send(connection, raw, &serial) != 0 else {
            return continuation.resume(throwing: DBusError.disconnected())
        }
        let (seconds, attoseconds) = timeout.components
        let nanoseconds = UInt64(max(seconds, 0)) * 1_000_000_000 + UInt64(max(attoseconds, 0) / 1_000_000_000)
        let deadline = monotonicNanoseconds() &+ nanoseconds
        pending[serial] = PendingCall(continuation: continuation, deadline: deadline, timeout: timeout, cancellation: cancellation)
        nextCallDeadline = min(nextCallDeadline, deadline)
    }

    func cancelCall(_ cancellation: CallCancellation) {
        guard let serial = pending.first(where: { $0.value.cancellation === cancellation })?.key,
              let call = pending.removeValue(forKey: serial) else { return }
        call.continuation.resume(throwing: CancellationError())
    }

    /// The next incoming method call, in arrival order; nil once the connection is closed.
    ///
    /// Only the connection's dispatcher calls this, from a task that prefers this
    /// loop as its executor, so the inbox is touched on the bus thread alone.
    nonisolated(nonsending) func nextIncoming() async -> Message? {
        while true {
            if finished { return nil }
            precondition(isCurrentThread, "the dispatcher must run on the bus thread")
            if inboxHead < inbox.count {
                let message = inbox[inboxHead].take()
                inboxHead += 1
                if inboxHead == inbox.count {
                    inbox.removeAll(keepingCapacity: true)
                    inboxHead = 0
                }
                if let message { return message }
                continue
            }
            await withUnsafeContinuation { parkedDispatcher = $0 }
        }
    }

    /// Runs `job` once the calls received so far have been dispatched and what they
    /// queued has run, before the thread next waits on the bus (bus thread only).
    func runAfterDispatch(_ job: @escaping Job) {
        if finished { return job() }
        afterDispatch.append(job)
    }

    func addSubscription(id: UInt64, _ subscription: SignalSubscription) {
        guard !finished else { return subscription.continuation.finish() }
        subscriptions[id] = subscription
    }

    func removeSubscription(id: UInt64) {
        subscriptions[id] = nil
    }

    func addCloseWaiter(_ waiter: CheckedContinuation<Void, Never>) {
        if finished { waiter.resume() } else { closeWaiters.append(waiter) }
    }

    func stop() {
        stopping = true
    }

    /// Limits each sender to `limit` calls in flight (bus thread only).
    func limitCalls(perSender limit: Int, refusal: DBusError) {
        callLimit = limit
        self.refusal = refusal
    }

    /// A call from `sender` was answered (or needed no answer): one less in flight (bus thread only).
    func callFinished(sender: String) {
        totalInFlight -= 1
        if totalInFlight == 0 {
            for waiter in drainWaiters { waiter() }
            drainWaiters.removeAll()
        }
        guard callLimit != .max, let count = callsInFlight[sender] else { return }
        callsInFlight[sender] = count > 1 ? count - 1 : nil
    }

    /// From now on answers every new call with `refusal`; resumes `waiter` once every call
    /// already received has been answered (bus thread only).
    func drain(refusing refusal: DBusError, _ waiter: @escaping Job) {
        closingRefusal = refusal
        if totalInFlight == 0 || finished { waiter() } else { drainWaiters.append(waiter) }
    }

    // MARK: libdbus callbacks (bus thread, some with the connection lock held: record only)

    fileprivate func addWatch(_ watch: OpaquePointer) { watches.append(watch) }
    fileprivate func removeWatch(_ watch: OpaquePointer) { watches.removeAll { $0 == watch } }
    fileprivate func addTimeout(_ timeout: OpaquePointer) {
        let interval = UInt64(max(dbus_timeout_get_interval(timeout), 0)) * 1_000_000
        timeouts.append((timeout, monotonicNanoseconds() + interval))
    }
    fileprivate func removeTimeout(_ timeout: OpaquePointer) { timeouts.removeAll { $0.timeout == timeout } }
    fileprivate func toggleTimeout(_ timeout: OpaquePointer) { reschedule(timeout, from: monotonicNanoseconds()) }

    fileprivate func filter(_ raw: OpaquePointer) -> DBusHandlerResult {
        switch dbus_message_get_type(raw) {
        case DBUS_MESSAGE_TYPE_METHOD_RETURN, DBUS_MESSAGE_TYPE_ERROR:
            guard let call = pending.removeValue(forKey: dbus_message_get_reply_serial(raw)) else {
                return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
            }
            do {
                let reply = try Message(raw: raw, known: &headerStrings)
                if let error = reply.error {
                    call.continuation.resume(throwing: error)
                } else {
                    call.continuation.resume(returning: reply)
                }
            } catch {
                call.continuation.resume(throwing: error)
            }
            return DBUS_HANDLER_RESULT_HANDLED
        case DBUS_MESSAGE_TYPE_SIGNAL:
            if dbus_message_is_signal(raw, "org.freedesktop.DBus.Local", "Disconnected") != 0 {
                stopping = true
                return DBUS_HANDLER_RESULT_HANDLED
            }
            deliverSignal(raw)
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        case DBUS_MESSAGE_TYPE_METHOD_CALL:
            // Refused before it is read, so a caller that floods uses no memory for it.
            let sender = dbus_message_get_sender(raw).map { String(cString: $0) } ?? ""
            if let closingRefusal {
                let header = Message.headerOnly(raw: raw)
                if !header.noReplyExpected { sendNow(header.makeError(closingRefusal)) }
                return DBUS_HANDLER_RESULT_HANDLED
            }
            totalInFlight += 1
            if callLimit != .max {
                guard callsInFlight[sender, default: 0] < callLimit else {
                    totalInFlight -= 1
                    let header = Message.headerOnly(raw: raw)
                    if !header.noReplyExpected { sendNow(header.makeError(refusal)) }
                    return DBUS_HANDLER_RESULT_HANDLED
                }
                callsInFlight[sender, default: 0] += 1
            }
            do {
                inbox.append(try Message(raw: raw, known: &headerStrings))
                if let dispatcher = parkedDispatcher {
                    parkedDispatcher = nil
                    dispatcher.resume()
                }
            } catch {
                // The body could not be read (a Unix fd, say): answer here, the handlers never see it.
                let header = Message.headerOnly(raw: raw)
                if !header.noReplyExpected { sendNow(header.makeError(error)) }
                callFinished(sender: sender)
            }
            return DBUS_HANDLER_RESULT_HANDLED
        default:
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        }
    }

    private func deliverSignal(_ raw: OpaquePointer) {
        guard !subscriptions.isEmpty, let signal = try? Message(raw: raw, known: &headerStrings) else { return }
        if let connectionAppeared, signal.sender == "org.freedesktop.DBus", signal.member == "NameOwnerChanged",
           signal.body.count == 3, let name = signal.body[0].stringValue, name.hasPrefix(":"),
           signal.body[1].stringValue == "", signal.body[2].stringValue == name {
            connectionAppeared(name)
        }
        for subscription in subscriptions.values where subscription.rule.matches(signal) {
            subscription.continuation.yield(signal)
        }
    }
}

/// Set from any thread when a caller cancels; read on the bus thread.
final class CallCancellation: Sendable {
    private let flag = Atomic<Bool>(false)
    var isCancelled: Bool { flag.load(ordering: .acquiring) }
    func cancel() { flag.store(true, ordering: .releasing) }
}

func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

// MARK: - C callbacks

private func loop(_ context: UnsafeMutableRawPointer?) -> BusLoop? {
    context.map { Unmanaged<BusLoop>.fromOpaque($0).takeUnretainedValue() }
}

private let busAddWatch: DBusAddWatchFunction = { watch, context in
    if let watch { loop(context)?.addWatch(watch) }
    return 1
}
private let busRemoveWatch: DBusRemoveWatchFunction = { watch, context in
    if let watch { loop(context)?.removeWatch(watch) }
}
// Enabled state is read from the watch on every pass of the loop.
private let busToggleWatch: DBusWatchToggledFunction = { _, _ in }
private let busAddTimeout: DBusAddTimeoutFunction = { timeout, context in
    if let timeout { loop(context)?.addTimeout(timeout) }
    return 1
}
private let busRemoveTimeout: DBusRemoveTimeoutFunction = { timeout, context in
    if let timeout { loop(context)?.removeTimeout(timeout) }
}
private let busToggleTimeout: DBusTimeoutToggledFunction = { timeout, context in
    if let timeout { loop(context)?.toggleTimeout(timeout) }
}
private let busFilter: DBusHandleMessageFunction = { _, message, context in
    guard let message, let loop = loop(context) else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
    return loop.filter(message)
}
