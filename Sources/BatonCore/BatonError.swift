/// A failure the caller can act on, named as the D-Bus contract names it.
///
/// BatonContract maps each code to `org.baton.Handoff1.Error.<code>` and back; the CLI maps
/// it to a sentence and an exit status. The message says what to change.
public struct BatonError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        case notFound = "NotFound"
        case invalidArgument = "InvalidArgument"
        case invalidPayload = "InvalidPayload"
        case unknownActivityType = "UnknownActivityType"
        case expired = "Expired"
        case quotaExceeded = "QuotaExceeded"
        case accessDenied = "AccessDenied"
        case handlerFailed = "HandlerFailed"
        /// The disk (or the database's size limit) is full: free space, then try again.
        case storageFull = "StorageFull"
        /// The database is locked by another process, busy, or failing I/O: try again.
        case storageUnavailable = "StorageUnavailable"
        /// The database is damaged; it is quarantined at the next start.
        case storageCorrupt = "StorageCorrupt"
        /// Too many calls in flight from one caller.
        case limitsExceeded = "LimitsExceeded"
        /// The activity does not allow what was asked.
        case notEligible = "NotEligible"
        /// The user blocked the app.
        case blocked = "Blocked"
        /// Cross-machine sync cannot do what was asked now.
        case syncUnavailable = "SyncUnavailable"
    }

    public let code: Code
    public let message: String
    /// For an error over a size limit: the biggest keys, biggest first (see `SizeReport`).
    public let biggestKeys: [KeySize]

    public init(_ code: Code, _ message: String, biggestKeys: [KeySize] = []) {
        self.code = code
        self.message = message
        self.biggestKeys = biggestKeys
    }

    public var description: String { "\(code.rawValue): \(message)" }

    public static func notFound(_ message: String) -> BatonError { .init(.notFound, message) }
    public static func invalidArgument(_ message: String) -> BatonError { .init(.invalidArgument, message) }
    public static func invalidPayload(_ message: String) -> BatonError { .init(.invalidPayload, message) }
    public static func unknownActivityType(_ message: String) -> BatonError { .init(.unknownActivityType, message) }
    public static func expired(_ message: String) -> BatonError { .init(.expired, message) }
    public static func quotaExceeded(_ message: String) -> BatonError { .init(.quotaExceeded, message) }
    public static func accessDenied(_ message: String) -> BatonError { .init(.accessDenied, message) }
    public static func handlerFailed(_ message: String) -> BatonError { .init(.handlerFailed, message) }
    public static func storageFull(_ message: String) -> BatonError { .init(.storageFull, message) }
    public static func storageUnavailable(_ message: String) -> BatonError { .init(.storageUnavailable, message) }
    public static func storageCorrupt(_ message: String) -> BatonError { .init(.storageCorrupt, message) }
    public static func notEligible(_ message: String) -> BatonError { .init(.notEligible, message) }
}
