/// The limits every request is checked against (docs/DESIGN.md, "Storage and
/// limits"). Anything over a limit is refused with `QuotaExceeded` or
/// `InvalidArgument`, never truncated.
public struct Limits: Equatable, Sendable {
    /// Bytes of one activity's JSON payload.
    public var payloadBytes = 64 * 1024
    /// Nesting of objects and arrays in a payload; the top-level object is level 1.
    public var payloadDepth = 64
    /// Bytes of a title.
    public var titleBytes = 1024
    /// Keywords on one activity.
    public var keywords = 64
    /// Bytes of one keyword.
    public var keywordBytes = 256
    /// Bytes of one scene storage value (strings and byte arrays).
    public var storageValueBytes = 64 * 1024
    /// Bytes of all storage of one scene: keys plus values.
    public var sceneStorageBytes = 1024 * 1024
    /// Live activities per app; past it the oldest non-persistent ones expire first.
    public var liveActivitiesPerApp = 10_000
    /// Bytes of identifiers, type names, app ids and storage keys.
    public var nameBytes = 255
    /// Bytes of a webpage URL.
    public var urlBytes = 2048
    /// How long the history keeps an activity that ended, in seconds; 0 keeps no history.
    public var historySeconds: UInt64 = 30 * 24 * 3600
    /// Bytes the history may take (its activities' payloads, titles and keywords, and a
    /// little for the rest); past it the oldest go first. 0 keeps no history.
    public var historyBytes = 64 * 1024 * 1024

    public init() {}

    public static let `default` = Limits()
}
