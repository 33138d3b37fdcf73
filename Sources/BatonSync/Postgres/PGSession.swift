import BatonCore
import CPostgres
import Glibc
import Synchronization

/// A value a statement sends or reads, in PostgreSQL's binary format: the types Baton's
/// schema uses (`sync/server.sql`).
enum PGValue: Sendable, Equatable {
    case null
    case text(String)
    case int64(Int64)
    case int32(Int32)
    case bool(Bool)
    case bytea([UInt8])

    var text: String? { if case .text(let value) = self { value } else { nil } }
    var int64: Int64? {
        switch self {
        case .int64(let value): value
        case .int32(let value): Int64(value)
        default: nil
        }
    }
    var int32: Int32? { int64.flatMap { Int32(exactly: $0) } }
    var bool: Bool? { if case .bool(let value) = self { value } else { nil } }
    var bytes: [UInt8]? { if case .bytea(let value) = self { value } else { nil } }
}

/// What went wrong: a statement the server refused (with its SQLSTATE), or the connection
/// (no SQLSTATE: it could not be made, it broke, or the server did not answer in time).
struct PGError: Error, Sendable, CustomStringConvertible {
    /// The server's five-character code (`23505`: unique_violation), nil for the connection.
    let sqlState: String?
    let message: String

    var description: String { message }
}

/// One connection to a PostgreSQL server through libpq, driven by a thread of its own.
///
/// Every libpq call for the connection happens on that thread, which waits in `poll()` on the
/// connection's socket and an eventfd that callers write to when they queue a statement, as
/// `BusLoop` does for the bus. libpq is only ever called when it will not block (connecting
/// through `PQconnectPoll`, sending with `PQflush` until it is done, reading with
/// `PQconsumeInput` and `PQgetResult` only once `PQisBusy` says the result is whole), so the
/// thread can keep deadlines: a statement or a connection not answered within `timeout` ends
/// the connection, and its callers get `PGError` at once. Notifications (`LISTEN`) are drained
/// after every read of the socket and after every result — libpq keeps them until asked — and
/// told to `onNotification`.
///
/// Statements run one at a time in the order they were queued; a transaction is its
/// statements sent by one caller in turn (`BEGIN`, …, `COMMIT`): a session has one user at a
/// time, the sync engine's loop.
///
/// `@unchecked Sendable`, like the DBus module's bus loop: the `PGconn` is created, used and
/// finished on the session's thread only; what other threads share is behind `shared`.
final class PGSession: @unchecked Sendable {
    private struct Request {
        let sql: String
        let parameters: [PGValue]
        let reply: @Sendable (Result<[[PGValue]], PGError>) -> Void
    }

    private struct Shared {
        var queue: [Request] = []
        /// Set by `close()`, or by the thread when the connection ended.
        var closing = false
        var closedReason: String?
        var onNotification: (@Sendable () -> Void)?
    }

    private let shared = Mutex(Shared())
    private let wakeFD: Int32
    private let timeout: Duration
    /// libpq's functions (`LibPQ`).
    private let pq: baton_libpq

    // The session thread's own.
    private var connection: OpaquePointer?
    private var current: (request: Request, deadline: ContinuousClock.Instant, rows: [[PGValue]], error: PGError?)?
    private var flushing = false

    private init(timeout: Duration) throws(PGError) {
        pq = try LibPQ.functions.get()
        self.timeout = timeout
        wakeFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard wakeFD >= 0 else { throw PGError(sqlState: nil, message: "eventfd failed: errno \(errno)") }
    }

    deinit { Glibc.close(wakeFD) }

    /// Connects with `parameters` (libpq's keywords and values; nothing is read from the
    /// environment or a service file for a keyword given here) within `timeout`, which every
    /// statement then gets too.
    static func connect(_ parameters: [(String, String)], timeout: Duration) async throws(PGError) -> PGSession {
        let session = try PGSession(timeout: timeout)
        let result: Result<Void, PGError> = await withCheckedContinuation { continuation in
            session.start(parameters) { continuation.resume(returning: $0) }
        }
        try result.get()
        return session
    }

    /// Runs `sql` with `parameters` (`$1`, `$2`, …) and returns its rows.
    @discardableResult
    func query(_ sql: String, _ parameters: [PGValue] = []) async throws(PGError) -> [[PGValue]] {
        let result: Result<[[PGValue]], PGError> = await withCheckedContinuation { continuation in
            let request = Request(sql: sql, parameters: parameters) { continuation.resume(returning: $0) }
            let closed = shared.withLock { shared -> String? in
                if shared.closing { return shared.closedReason ?? "the connection to the sync server closed" }
                shared.queue.append(request)
                return nil
            }
            if let closed { return continuation.resume(returning: .failure(PGError(sqlState: nil, message: closed))) }
            wake()
        }
        return try result.get()
    }

    /// Called (on the session's thread) for each batch of notifications, and once when the
    /// connection ends; nil for none.
    func onNotification(_ body: (@Sendable () -> Void)?) {
        shared.withLock { $0.onNotification = body }
    }

    /// True once the connection has ended.
    var isClosed: Bool { shared.withLock { $0.closing } }
    /// Why it ended, once it has.
    var closedReason: String { shared.withLock { $0.closedReason } ?? "the connection to the sync server closed" }

    /// Ends the connection; statements still queued fail.
    func close() {
        shared.withLock { shared in
            if shared.closedReason == nil { shared.closedReason = "the connection to the sync server was closed" }
            shared.closing = true
        }
        wake()
    }

    private func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    // MARK: The session's thread

    private func start(_ parameters: [(String, String)], connected: @escaping @Sendable (Result<Void, PGError>) -> Void) {
        let body: @Sendable () -> Void = { [self] in
            let deadline = ContinuousClock.now + timeout
            switch connect(parameters, deadline: deadline) {
            case .success:
                connected(.success(()))
                run()
            case .failure(let error):
                end(error.message)
                connected(.failure(error))
            }
        }
        do {
            try OwnThread.start(body)
        } catch {
            connected(.failure(PGError(sqlState: nil, message: "could not start the sync connection's thread: \(error)")))
        }
    }

    /// Starts the connection and drives `PQconnectPoll` until it is made or fails.
    private func connect(_ parameters: [(String, String)], deadline: ContinuousClock.Instant) -> Result<Void, PGError> {
        // Keyword and value arrays, NULL-terminated, alive for the call.
        let keywords = parameters.map { strdup($0.0) } + [nil]
        let values = parameters.map { strdup($0.1) } + [nil]
        defer { (keywords + values).forEach { free($0) } }
        let started = keywords.map { UnsafePointer($0) }.withUnsafeBufferPointer { keywords in
            values.map { UnsafePointer($0) }.withUnsafeBufferPointer { values in
                pq.PQconnectStartParams(keywords.baseAddress, values.baseAddress, 0)
            }
        }
        guard let started else { return .failure(PGError(sqlState: nil, message: "libpq could not allocate a connection")) }
        connection = started
        // Notices (a warning, a NOTICE from a function) would go to batond's stderr.
        _ = pq.PQsetNoticeReceiver(started, { _, _ in }, nil)
        var polling = PGRES_POLLING_WRITING
        while true {
            if pq.PQstatus(started) == CONNECTION_BAD { return .failure(linkError("cannot connect")) }
            switch polling {
            case PGRES_POLLING_OK:
                guard pq.PQsetnonblocking(started, 1) == 0 else { return .failure(linkError("cannot connect")) }
                return .success(())
            case PGRES_POLLING_FAILED:
                return .failure(linkError("cannot connect"))
            default:
                // The socket can change from one step to the next (another address of the host).
                let ready = wait(for: polling == PGRES_POLLING_READING ? Int16(POLLIN) : Int16(POLLOUT), until: deadline)
                if ready == nil { return .failure(PGError(sqlState: nil, message: "the sync server did not answer within \(timeout)")) }
                if shared.withLock({ $0.closing }) { return .failure(PGError(sqlState: nil, message: "the connection was closed")) }
                polling = pq.PQconnectPoll(started)
            }
        }
    }

    /// Polls the socket for `events` and the eventfd; the socket's events, nil when `deadline`
    /// passed first. A wake-up returns `0` so the caller looks at its queue.
    private func wait(for events: Int16, until deadline: ContinuousClock.Instant?) -> Int16? {
        var fds = [pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0), pollfd(fd: pq.PQsocket(connection), events: events, revents: 0)]
        var milliseconds: Int32 = -1
        if let deadline {
            let left = deadline - ContinuousClock.now
            if left <= .zero { return nil }
            milliseconds = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
        }
        let count = poll(&fds, 2, milliseconds)
        if count < 0 && errno != EINTR { return nil }
        if fds[0].revents != 0 {
            var value: UInt64 = 0
            _ = read(wakeFD, &value, 8)
        }
        if count == 0, let deadline, ContinuousClock.now >= deadline { return nil }
        return fds[1].revents
    }

    /// Sends queued statements and reads their results until the connection ends.
    private func run() {
        while true {
            if shared.withLock({ $0.closing }) { return end(nil) }
            if current == nil, let next = shared.withLock({ $0.queue.isEmpty ? nil : $0.queue.removeFirst() }) {
                if let failure = send(next) { return end(failure.message) }
            }
            let events = Int16(POLLIN) | (flushing ? Int16(POLLOUT) : 0)
            guard let ready = wait(for: events, until: current?.deadline) else {
                return end("the sync server did not answer within \(timeout)")
            }
            if ready & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 || ready & Int16(POLLIN) != 0 {
                guard pq.PQconsumeInput(connection) == 1 else { return end(linkError("the connection to the sync server broke").message) }
                drainNotifications()
            }
            if flushing, ready != 0 {
                switch pq.PQflush(connection) {
                case 0: flushing = false
                case 1: break
                default: return end(linkError("the connection to the sync server broke").message)
                }
            }
            if current != nil, !flushing {
                if let failure = collectResults() { return end(failure.message) }
                // PQgetResult parses what PQconsumeInput left in the buffer: a notification that
                // came in the same read as a result is queued only now, and no further read of
                // the socket would come to ask for it.
                drainNotifications()
            }
        }
    }

    /// Sends one statement (binary parameters, binary results); an error when it cannot be sent.
    private func send(_ request: Request) -> PGError? {
        current = (request, ContinuousClock.now + timeout, [], nil)
        let encoded = request.parameters.map(Self.encode)
        var types = encoded.map(\.type)
        var lengths = encoded.map { Int32($0.bytes?.count ?? 0) }
        var formats = [Int32](repeating: 1, count: encoded.count)
        let pointers = encoded.map { value -> UnsafeMutablePointer<CChar>? in
            guard let bytes = value.bytes else { return nil }
            let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: max(bytes.count, 1))
            bytes.withUnsafeBytes { source in
                if let base = source.baseAddress { UnsafeMutableRawPointer(pointer).copyMemory(from: base, byteCount: source.count) }
            }
            return pointer
        }
        defer { pointers.forEach { $0?.deallocate() } }
        let sent = pointers.map { UnsafePointer($0) }.withUnsafeBufferPointer { values in
            pq.PQsendQueryParams(connection, request.sql, Int32(encoded.count), &types, values.baseAddress, &lengths, &formats, 1)
        }
        guard sent == 1 else { return linkError("could not send a statement") }
        switch pq.PQflush(connection) {
        case 0: flushing = false
        case 1: flushing = true
        default: return linkError("could not send a statement")
        }
        return nil
    }

    /// Reads what has come of the current statement's results; answers it once they are all in.
    /// An error when the connection broke.
    private func collectResults() -> PGError? {
        while pq.PQisBusy(connection) == 0 {
            guard let result = pq.PQgetResult(connection) else {
                if let (request, _, rows, error) = current {
                    current = nil
                    request.reply(error.map { .failure($0) } ?? .success(rows))
                }
                return nil
            }
            defer { pq.PQclear(result) }
            switch pq.PQresultStatus(result) {
            case PGRES_TUPLES_OK, PGRES_SINGLE_TUPLE:
                current?.rows += rows(of: result)
            case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
                break
            default:
                let sqlState = pq.PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
                let message = pq.PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
                    ?? pq.PQresultErrorMessage(result).map { String(cString: $0) } ?? "the statement failed"
                // The first error is the statement's answer; what follows it says less.
                if current?.error == nil { current?.error = PGError(sqlState: sqlState, message: message) }
            }
        }
        if pq.PQstatus(connection) == CONNECTION_BAD { return linkError("the connection to the sync server broke") }
        return nil
    }

    private func drainNotifications() {
        var any = false
        while let notification = pq.PQnotifies(connection) {
            pq.PQfreemem(notification)
            any = true
        }
        if any { shared.withLock { $0.onNotification }?() }
    }

    /// Ends the connection: the statement under way and those queued fail with `reason`, and
    /// the notification listener hears once more.
    private func end(_ reason: String?) {
        let (queued, listener) = shared.withLock { shared in
            shared.closing = true
            if shared.closedReason == nil { shared.closedReason = reason ?? "the connection to the sync server was closed" }
            defer { shared.queue = [] }
            return (shared.queue, shared.onNotification)
        }
        let failure = PGError(sqlState: nil, message: closedReason)
        current?.request.reply(.failure(failure))
        current = nil
        for request in queued { request.reply(.failure(failure)) }
        if let connection { pq.PQfinish(connection) }
        connection = nil
        listener?()
    }

    /// The connection's own error message, as a `PGError` of no SQLSTATE.
    private func linkError(_ what: String) -> PGError {
        let detail = connection.flatMap { pq.PQerrorMessage($0) }.map { String(cString: $0) }?
            .split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        return PGError(sqlState: nil, message: detail.isEmpty ? what : "\(what): \(detail)")
    }

    // MARK: The binary format

    private static func encode(_ value: PGValue) -> (type: Oid, bytes: [UInt8]?) {
        switch value {
        case .null: (0, nil)
        case .text(let text): (25, Array(text.utf8))
        case .int64(let number): (20, withUnsafeBytes(of: number.bigEndian, Array.init))
        case .int32(let number): (23, withUnsafeBytes(of: number.bigEndian, Array.init))
        case .bool(let flag): (16, [flag ? 1 : 0])
        case .bytea(let bytes): (17, bytes)
        }
    }

    private func rows(of result: OpaquePointer) -> [[PGValue]] {
        let columns = pq.PQnfields(result)
        let types = (0..<columns).map { pq.PQftype(result, $0) }
        return (0..<pq.PQntuples(result)).map { row in
            (0..<columns).map { column -> PGValue in
                if pq.PQgetisnull(result, row, column) == 1 { return .null }
                let count = Int(pq.PQgetlength(result, row, column))
                let bytes = pq.PQgetvalue(result, row, column).map {
                    Array(UnsafeRawBufferPointer(start: $0, count: count))
                } ?? []
                return Self.decode(bytes, type: types[Int(column)])
            }
        }
    }

    private static func decode(_ bytes: [UInt8], type: Oid) -> PGValue {
        func integer<T: FixedWidthInteger>(_: T.Type) -> T {
            bytes.count == MemoryLayout<T>.size ? bytes.reduce(T.zero) { $0 << 8 | T($1) } : 0
        }
        switch type {
        case 20: return .int64(integer(Int64.self))
        case 23: return .int32(integer(Int32.self))
        case 21: return .int32(Int32(integer(Int16.self)))
        case 16: return .bool(bytes.first == 1)
        case 17: return .bytea(bytes)
        // text, varchar, name and anything else read as text (its binary form is its UTF-8).
        default: return .text(String(decoding: bytes, as: UTF8.self))
        }
    }
}

/// libpq, opened when the first connection to a sync server is made (`baton_libpq_load` in
/// CPostgres's shim.h): a batond that does not sync through PostgreSQL never maps it.
enum LibPQ {
    /// libpq's functions, or why they cannot be had (libpq5 not installed).
    static let functions: Result<baton_libpq, PGError> = {
        var error: UnsafePointer<CChar>?
        guard let table = baton_libpq_load(&error) else {
            let detail = error.map { String(cString: $0) } ?? "libpq.so.5 could not be opened"
            return .failure(PGError(sqlState: nil, message: "sync through PostgreSQL needs libpq (apt-get install libpq5): \(detail)"))
        }
        return .success(table.pointee)
    }()
}
