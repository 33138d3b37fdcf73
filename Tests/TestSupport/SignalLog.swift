import DBus
import Synchronization

/// Every signal matching a rule, kept from subscription on, for tests that check what was
/// announced (and what was not) after the fact.
public final class SignalLog: Sendable {
    private final class Seen: Sendable {
        let messages = Mutex<[Message]>([])
    }
    private let seen = Seen()
    private let task: Task<Void, Never>

    /// Subscribed before it returns: no later matching signal is missed.
    public init(_ connection: Connection, _ rule: MatchRule) async throws {
        let stream = try await connection.signals(matching: rule)
        let seen = self.seen
        task = Task {
            for await message in stream { seen.messages.withLock { $0.append(message) } }
        }
    }

    deinit { task.cancel() }

    /// The signals seen so far.
    public var all: [Message] { seen.messages.withLock { $0 } }

    /// How many signals were seen so far: a mark for `wait(for:after:)`.
    public var count: Int { seen.messages.withLock { $0.count } }

    /// Waits until a signal satisfying `match` has been seen after the first `mark` ones, and returns it.
    @discardableResult
    public func wait(
        for what: String, after mark: Int = 0, timeout: Duration = .seconds(10), _ match: @escaping @Sendable (Message) -> Bool
    ) async throws -> Message {
        try await eventually(what, timeout: timeout) { self.all.dropFirst(mark).contains(where: match) }
        return try all.dropFirst(mark).first(where: match) ?? { throw TestSupportError("lost: \(what)") }()
    }
}

extension Message {
    /// For a `PropertiesChanged`: the changed properties, variants unwrapped.
    public var changedProperties: [String: DBusValue] {
        guard body.count == 3, let changed = body[1].stringKeyedValue else { return [:] }
        return changed.mapValues(\.unwrapped)
    }
}
