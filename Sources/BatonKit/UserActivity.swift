import BatonCore
#if canImport(FoundationEssentials)
import FoundationEssentials  // no ICU data: see BatonCore/ArchiveDocument.swift
#else
import Foundation
#endif
import Synchronization

/// What the user is doing, in `NSUserActivity`'s vocabulary, advertised through `batond`.
///
/// Set the fields, `setTypedPayload(_:)`, then `becomeCurrent(in:)`; later changes are
/// pushed with `save()` (which calls `willSave` first, like `userActivityWillSave`).
public final class UserActivity: Sendable {
    /// The reverse-DNS type, registered by the app beforehand.
    public let activityType: String
    private let client: BatonClient
    private let state: Mutex<State>

    struct State {
        /// Every field of the activity as it is sent (`Activity.options`); its id, type and times are batond's.
        var fields = Activity.empty
        var expirationDate: Date?
        var requiredUserInfoKeys: Set<String> = []
        var needsSave = false
        var id: String?
        var isCurrent = false
        var willSave: (@Sendable (UserActivity) -> Void)?
        var onContinued: BatonClient.ContinuedCallback?
    }

    public init(activityType: String, client: BatonClient) {
        self.activityType = activityType
        self.client = client
        self.state = Mutex(State())
    }

    /// An activity read back from the daemon (from `List`, `Search` or a continuation).
    public init(_ activity: Activity, client: BatonClient) {
        activityType = activity.type
        self.client = client
        var state = State()
        state.fields = activity
        state.expirationDate = activity.expiresAt.map { Date(timeIntervalSince1970: Double($0) / 1_000_000) }
        state.id = activity.id
        self.state = Mutex(state)
    }

    private func field<T: Sendable>(_ keyPath: WritableKeyPath<State, T>) -> T { state.withLock { $0[keyPath: keyPath] } }
    private func setField<T: Sendable>(_ keyPath: WritableKeyPath<State, T>, _ value: T) {
        state.withLock {
            $0[keyPath: keyPath] = value
            $0.needsSave = true
        }
    }

    // The activity's fields in NSUserActivity's words; what batond calls them is `ActivityField`'s.
    public var title: String { get { field(\.fields.title) } set { setField(\.fields.title, newValue) } }
    public var targetContentIdentifier: String? { get { field(\.fields.targetContentID) } set { setField(\.fields.targetContentID, newValue) } }
    public var persistentIdentifier: String? { get { field(\.fields.persistentID) } set { setField(\.fields.persistentID, newValue) } }
    public var keywords: Set<String> { get { Set(field(\.fields.keywords)) } set { setField(\.fields.keywords, newValue.sorted()) } }
    public var webpageURL: URL? {
        get { field(\.fields.webpageURL).flatMap(URL.init(string:)) }
        set { setField(\.fields.webpageURL, newValue?.absoluteString) }
    }
    public var expirationDate: Date? { get { field(\.expirationDate) } set { setField(\.expirationDate, newValue) } }
    public var isEligibleForHandoff: Bool { get { field(\.fields.eligibleForHandoff) } set { setField(\.fields.eligibleForHandoff, newValue) } }
    public var isEligibleForSearch: Bool { get { field(\.fields.eligibleForSearch) } set { setField(\.fields.eligibleForSearch, newValue) } }
    /// Whether the user's history keeps it once it ends, to continue it later (default true;
    /// false for what should leave no trace).
    public var isEligibleForHistory: Bool { get { field(\.fields.eligibleForHistory) } set { setField(\.fields.eligibleForHistory, newValue) } }
    public var requiredUserInfoKeys: Set<String> { get { field(\.requiredUserInfoKeys) } set { setField(\.requiredUserInfoKeys, newValue) } }
    /// True when a field changed since the activity was last sent to the daemon.
    public var needsSave: Bool { get { field(\.needsSave) } set { state.withLock { $0.needsSave = newValue } } }
    /// Called before the activity is sent, to bring its payload up to date.
    public var willSave: (@Sendable (UserActivity) -> Void)? { get { field(\.willSave) } set { state.withLock { $0.willSave = newValue } } }
    /// Called when the activity was continued — in which scene, and on which device ("" for
    /// this one) — like `userActivityWasContinued`. The app hears it through its
    /// `ActivityContinuation` (batond tells the handler of the app that advertised it).
    public var onContinued: BatonClient.ContinuedCallback? {
        get { field(\.onContinued) }
        set {
            let id = state.withLock { state -> String? in
                state.onContinued = newValue
                return state.id
            }
            if let id { client.whenContinued(id, newValue) }
        }
    }
    /// The daemon's id, once advertised.
    public var id: String? { field(\.id) }
    public var isCurrent: Bool { field(\.isCurrent) }
    /// The payload as JSON text.
    public var payloadJSON: String { field(\.fields.payload) }

    // MARK: Typed payloads

    /// Encodes `payload` (which must encode as a JSON object) as this activity's payload.
    public func setTypedPayload<T: Encodable>(_ payload: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let data = try encoder.encode(payload)
        guard data.first == UInt8(ascii: "{") else {
            throw PayloadError.notAnObject(String(describing: T.self))
        }
        state.withLock {
            $0.fields.payload = String(decoding: data, as: UTF8.self)
            $0.fields.payloadType = String(describing: T.self)
            $0.needsSave = true
        }
    }

    /// Decodes the payload as `T`, or says what did not decode.
    public func typedPayload<T: Decodable>(_ type: T.Type) throws(PayloadError) -> T {
        let text = payloadJSON
        do {
            return try JSONDecoder().decode(T.self, from: Data(text.utf8))
        } catch let DecodingError.keyNotFound(key, context) {
            throw .missingKey(path(context.codingPath + [key]), type: String(describing: T.self))
        } catch let DecodingError.typeMismatch(expected, context) {
            throw .wrongType(path(context.codingPath), expected: String(describing: expected), type: String(describing: T.self))
        } catch let DecodingError.valueNotFound(expected, context) {
            throw .wrongType(path(context.codingPath), expected: String(describing: expected), type: String(describing: T.self))
        } catch let DecodingError.dataCorrupted(context) {
            throw .corrupted(path(context.codingPath), context.debugDescription)
        } catch {
            throw .corrupted("", "\(error)")
        }
    }

    private func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? "." + $0.stringValue }.joined().trimmingPrefix(".").description
    }

    // MARK: Life cycle

    /// Throws `missingKey` when the payload lacks one of `requiredUserInfoKeys`.
    func checkRequiredKeys() throws(PayloadError) {
        let (payload, required) = state.withLock { ($0.fields.payload, $0.requiredUserInfoKeys) }
        guard !required.isEmpty else { return }
        let present: Set<String>
        do {
            present = Set(try StrictJSON.parseObject(payload, maxBytes: .max, maxDepth: .max).map(\.key))
        } catch {
            throw .corrupted("", error.message)
        }
        if let missing = required.subtracting(present).sorted().first {
            throw .missingKey(missing, type: payloadType ?? activityType)
        }
    }

    /// The name of the payload's type, when it was set with `setTypedPayload(_:)`.
    public var payloadType: String? { field(\.fields.payloadType) }

    /// Advertises the activity (or saves it, if already advertised) as the current one of `scene`.
    public func becomeCurrent(in scene: SceneHandle? = nil) async throws {
        if id == nil {
            willSave?(self)
            try checkRequiredKeys()
            let (title, payload, options) = state.withLock { state -> (String, String, [String: String]) in
                var options = Self.options(state)
                if let scene { options["scene"] = scene.path.text }
                return (state.fields.title, state.fields.payload, options)
            }
            let id = try await client.advertise(type: activityType, title: title, payload: payload, options: options)
            let onContinued = state.withLock {
                $0.id = id
                $0.needsSave = false
                $0.isCurrent = true
                return $0.onContinued
            }
            if let onContinued { client.whenContinued(id, onContinued) }
        } else {
            // Already advertised: its changes, and the scene it is now current in.
            try await send(scene: scene?.path.text, always: scene != nil)
            state.withLock { $0.isCurrent = true }
        }
    }

    /// Marks the activity as no longer current: no scene shows it any more (its scene's
    /// `ActivityId` becomes empty). It stays advertised until invalidated or expired.
    public func resignCurrent() async throws {
        if id != nil { try await send(scene: "", always: true) }
        state.withLock { $0.isCurrent = false }
    }

    /// Sends changed fields to the daemon (after `willSave`), if anything changed. The
    /// payload replaces the stored one: a key the typed payload no longer has is dropped.
    public func save() async throws {
        try await send(scene: nil, always: false)
    }

    /// One `Update` with the fields, the whole payload and, when given, the scene ("" for none).
    private func send(scene: String?, always: Bool) async throws {
        guard let id, always || needsSave else { return }
        willSave?(self)
        try checkRequiredKeys()
        let (payload, options) = state.withLock { state -> (String, [String: String]) in
            var options = Self.options(state)
            options["title"] = state.fields.title
            options["replace_payload"] = "true"
            if let scene { options["scene"] = scene }
            return (state.fields.payload, options)
        }
        try await client.update(id: id, payload: payload, options: options)
        state.withLock { $0.needsSave = false }
    }

    /// Removes the activity from the daemon; it cannot be used afterwards.
    public func invalidate() async throws {
        guard let id else { return }
        try await client.invalidate(id: id)
        client.whenContinued(id, nil)
        state.withLock {
            $0.id = nil
            $0.isCurrent = false
        }
    }

    /// Every option field (`Activity.options`), and when it expires.
    private static func options(_ state: State) -> [String: String] {
        var options = state.fields.options
        if let date = state.expirationDate {
            options["expires_in"] = String(max(1, Int(date.timeIntervalSinceNow.rounded(.up))))
        }
        return options
    }
}

/// Why a payload could not be set or read as the type asked for.
public enum PayloadError: Error, Equatable, CustomStringConvertible {
    case notAnObject(String)
    case missingKey(String, type: String)
    case wrongType(String, expected: String, type: String)
    case corrupted(String, String)

    public var description: String {
        switch self {
        case .notAnObject(let type): "\(type) does not encode as a JSON object; payloads are objects"
        case .missingKey(let key, let type): "the payload has no '\(key)', which \(type) needs"
        case .wrongType(let key, let expected, let type): "'\(key)' in the payload is not a \(expected), as \(type) needs"
        case .corrupted(let key, let detail): "the payload does not decode\(key.isEmpty ? "" : " at '\(key)'"): \(detail)"
        }
    }
}
