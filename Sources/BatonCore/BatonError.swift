/// A failure the caller can act on, named as the D-Bus contract names it.
///
/// BatonService maps each code to `org.baton.Handoff1.Error.<code>`; the CLI maps
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
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
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
}
