/// A registered activity type: which app owns it and who continues it.
public struct ActivityType: Equatable, Sendable {
    /// Reverse-DNS name, such as `com.raywenderlich.hawknotes.staterestore.characterDetail`.
    public var type: String
    /// The app the type belongs to; its activities and scenes are that app's.
    public var appID: String
    public var title: String
    /// The bus name called with `org.baton.Handoff1.Handler.ContinueActivity`, if any.
    public var handler: String?
    /// The object path at `handler` that implements the Handler interface.
    public var handlerPath: String
    /// Top-level payload keys every activity of this type must carry (`requiredUserInfoKeys`).
    public var requiredKeys: [String]
    /// The Swift (or other) type name the payload encodes, for clients that decode it.
    public var payloadType: String?

    public init(type: String, appID: String, title: String = "", handler: String? = nil, handlerPath: String = "/",
                requiredKeys: [String] = [], payloadType: String? = nil) {
        self.type = type
        self.appID = appID
        self.title = title
        self.handler = handler
        self.handlerPath = handlerPath
        self.requiredKeys = requiredKeys
        self.payloadType = payloadType
    }
}

/// What a user is doing, advertised by an app: the Linux `NSUserActivity`.
public struct Activity: Equatable, Sendable {
    public var id: String
    public var type: String
    public var appID: String
    public var title: String
    /// The payload as JSON text, checked by `StrictJSON`.
    public var payload: String
    public var payloadType: String?
    public var targetContentID: String?
    /// Set when the app wants to delete it later with `DeleteSaved`; such activities survive quota trimming longest.
    public var persistentID: String?
    public var keywords: [String]
    public var webpageURL: String?
    public var eligibleForHandoff: Bool
    public var eligibleForSearch: Bool
    /// Whether it goes into the history when it ends (invalidated, expired, evicted).
    public var eligibleForHistory: Bool
    /// The scene whose current activity this is.
    public var sceneID: String?
    /// Microseconds since the Unix epoch.
    public var createdAt: UInt64
    public var updatedAt: UInt64
    public var expiresAt: UInt64?
    /// The device that advertised it, by its sync id; empty for this machine's own. Only that
    /// device changes it (DESIGN: one writer per activity).
    public var deviceID: String

    public init(id: String, type: String, appID: String, title: String, payload: String, payloadType: String? = nil,
                targetContentID: String? = nil, persistentID: String? = nil, keywords: [String] = [],
                webpageURL: String? = nil, eligibleForHandoff: Bool = true, eligibleForSearch: Bool = false,
                eligibleForHistory: Bool = true, sceneID: String? = nil, createdAt: UInt64, updatedAt: UInt64, expiresAt: UInt64? = nil, deviceID: String = "") {
        self.id = id
        self.type = type
        self.appID = appID
        self.title = title
        self.payload = payload
        self.payloadType = payloadType
        self.targetContentID = targetContentID
        self.persistentID = persistentID
        self.keywords = keywords
        self.webpageURL = webpageURL
        self.eligibleForHandoff = eligibleForHandoff
        self.eligibleForSearch = eligibleForSearch
        self.eligibleForHistory = eligibleForHistory
        self.sceneID = sceneID
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.expiresAt = expiresAt
        self.deviceID = deviceID
    }

    /// True for an activity another device advertised.
    public var isRemote: Bool { !deviceID.isEmpty }

    /// True once `now` has reached the expiry time.
    public func isExpired(at now: UInt64) -> Bool {
        expiresAt.map { $0 <= now } ?? false
    }
}

/// An activity that ended, as the history keeps it (to be found and continued later).
public struct PastActivity: Sendable, Equatable {
    public var activity: Activity
    public var endedAt: UInt64
    /// `invalidated`, `expired` or `evicted`.
    public var endState: String
    /// Why, in a sentence (as `Explain` says it).
    public var endReason: String

    public init(activity: Activity, endedAt: UInt64, endState: String, endReason: String) {
        self.activity = activity
        self.endedAt = endedAt
        self.endState = endState
        self.endReason = endReason
    }
}

/// A window session of an app, with its own persisted storage.
public struct Scene: Equatable, Sendable {
    public var id: String
    public var appID: String
    public var title: String
    /// The scene's current activity, if any.
    public var activityID: String?
    public var createdAt: UInt64
    public var lastActiveAt: UInt64
    /// True when the scene came back from storage after a daemon restart.
    public var restored: Bool
    /// Whether a continuation into it is still waiting for the app.
    public var state: State
    /// Why the app's last `RestoreScenes` handed it out (`launch` until then).
    public var restoreReason: RestoreReason

    /// Why a scene comes back to its app, as the SaveRestore portal names the reasons.
    public enum RestoreReason: String, Sendable {
        /// A new scene, never handed to the app before.
        case launch
        /// The app's last run ended cleanly (`Detach`).
        case restore
        /// The app's last run ended without `Detach`: it crashed or was killed.
        case recover
    }

    /// A scene's continuation state, as the `State` property names it.
    public enum State: String, Sendable {
        /// Nothing waits: the app has what the scene shows.
        case ready
        /// A continuation waits for the app's handler; it is delivered when the app appears.
        case pending
        /// A continuation that could not be delivered within a day.
        case failed
    }

    public init(id: String, appID: String, title: String = "", activityID: String? = nil,
                createdAt: UInt64, lastActiveAt: UInt64, restored: Bool = false, state: State = .ready,
                restoreReason: RestoreReason = .launch) {
        self.id = id
        self.appID = appID
        self.title = title
        self.activityID = activityID
        self.createdAt = createdAt
        self.lastActiveAt = lastActiveAt
        self.restored = restored
        self.state = state
        self.restoreReason = restoreReason
    }
}

/// A continuation that waits for its app: the scene it goes to and what it continues.
public struct PendingContinuation: Equatable, Sendable {
    public var sceneID: String
    public var activityID: String
    /// True when the scene was opened for it (a refusal then closes the scene).
    public var createdScene: Bool
    /// When `Continue` asked for it (microseconds since the epoch).
    public var requestedAt: UInt64
    /// Deliveries tried so far, and why the last one did not arrive.
    public var attempts: Int
    public var lastError: String?

    public init(sceneID: String, activityID: String, createdScene: Bool, requestedAt: UInt64, attempts: Int = 0, lastError: String? = nil) {
        self.sceneID = sceneID
        self.activityID = activityID
        self.createdScene = createdScene
        self.requestedAt = requestedAt
        self.attempts = attempts
        self.lastError = lastError
    }
}

/// A value in scene storage: what `@SceneStorage` holds. RawRepresentable and
/// Codable values travel as strings.
public enum StorageValue: Equatable, Sendable {
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case bytes([UInt8])

    /// What the value counts against the storage limits.
    public var byteSize: Int {
        switch self {
        case .bool: 1
        case .int, .double: 8
        case .string(let text): text.utf8.count
        case .bytes(let bytes): bytes.count
        }
    }

    /// Throws when the value is over the per-value limit or holds text C programs would cut.
    public func validate(key: String, limits: Limits) throws(BatonError) {
        guard byteSize <= limits.storageValueBytes else {
            throw SizeReport.error("the value of '\(printable(key))'", bytes: byteSize, limit: limits.storageValueBytes,
                                   keys: [KeySize(key: key, bytes: key.utf8.count + byteSize)])
        }
        if case .string(let text) = self, containsNUL(text) {
            throw .invalidArgument("the value of '\(printable(key))' contains a NUL byte; store bytes instead")
        }
        if case .double(let number) = self, !number.isFinite {
            throw .invalidArgument("the value of '\(printable(key))' is not a finite number")
        }
    }
}
