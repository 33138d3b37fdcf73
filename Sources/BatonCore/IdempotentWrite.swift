/// How clients send a write the daemon makes idempotent with `request_id`: one id for
/// the call and its retries, so a write whose reply was lost, or that found the
/// database locked, can be sent again without being stored twice.
public enum IdempotentWrite {
    /// How many times a write is sent in all.
    public static let attempts = 3

    /// Why a failed attempt is worth another.
    public enum Retry: Sendable {
        /// The reply did not come: the write may or may not have been made.
        case replyLost
        /// The daemon answered `StorageUnavailable`: give the lock's holder a moment.
        case storageBusy
    }

    /// `options` with a `request_id` (a new one unless it has one already).
    public static func options(_ options: [String: String]) -> [String: String] {
        var options = options
        if options["request_id"] == nil { options["request_id"] = Identifier.make() }
        return options
    }

    /// Runs `send` until it succeeds, fails for good (`retry` says nil), or `attempts` ran out.
    public static func run<T>(_ send: () async throws -> T, retry: (any Error) -> Retry?) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await send()
            } catch where attempt < attempts {
                switch retry(error) {
                case nil: throw error
                case .replyLost: break
                case .storageBusy: try await Task.sleep(for: .milliseconds(250))
                }
            }
            attempt += 1
        }
    }
}
