import BatonCore

/// A write made idempotent by its caller: `request_id` names it, and a repeat within
/// `Store.requestLifetime` returns the first call's result and writes nothing.
public struct Request: Sendable, Equatable {
    public let id: String
    /// The method it was made with: a request id names one call, not one per method.
    public let method: String

    public init(id: String, method: String) {
        self.id = id
        self.method = method
    }
}

extension Store {
    /// How long a request id is remembered: a day, in microseconds.
    public static let requestLifetime: UInt64 = 24 * 3600 * 1_000_000

    /// The result the first call with `request` gave, if it committed (and is still remembered).
    public func result(of request: Request) throws -> String? {
        try read { db in try Self.recorded(request, in: db) }
    }

    /// The recorded result of `request` in the caller's transaction; `InvalidArgument` when its
    /// id was used for another method.
    static func recorded(_ request: Request, in db: SQLiteConnection) throws -> String? {
        guard let (method, result) = try db.cachedStatement(sql: "SELECT method, result FROM request WHERE request_id = ?")
            .row([request.id], { ($0.string(0), $0.string(1)) }) else { return nil }
        guard method == request.method else {
            throw BatonError.invalidArgument(
                "request_id '\(printable(request.id))' was used for \(method); give each call its own request_id")
        }
        return result
    }

    /// Forgets request ids recorded before `before` (microseconds); returns how many.
    @discardableResult
    public func forgetRequests(before: UInt64) throws -> Int {
        // Housekeeping asks every second: a read, and a write only when one is due.
        let oldest = try read { db in try Int64.fetchOne(db.cachedStatement(sql: "SELECT MIN(created_at) FROM request")) }
        guard let oldest, Time.decode(oldest) < before else { return 0 }
        return try inTransaction { db in
            try db.cachedStatement(sql: "DELETE FROM request WHERE created_at < ?").execute(arguments: [Time.encode(before)])
            return db.changesCount
        }
    }
}
