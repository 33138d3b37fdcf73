/// Where a `Continue` goes, decided from what is known before anything is written: the
/// activity, the caller, the options, its type here, and which sources open outside a scene.
/// A pure function: no store, no bus; the daemon looks up what it names and carries it out.
public enum ContinuationRoute: Equatable, Sendable {
    /// To another of the user's machines (the `device` option, as given: an id or a name).
    case onDevice(String)
    /// Outside any scene, through the source that owns the activity's type (a web page opens in
    /// the browser, a recent document in the app that used it).
    case outside
    /// No app here continues its type, but it has a web page: that page (as Handoff falls back
    /// to Safari).
    case webPage
    /// Into a scene of the activity's app, whose type is registered here as given.
    case scene(ActivityType, SceneChoice, Delivery)

    /// Which scene a continuation goes into.
    public enum SceneChoice: Equatable, Sendable {
        /// The one the caller named (the `scene` option: an object path or an id).
        case named(String)
        /// A live scene of the app whose current activity or `HandlesContent` shows this
        /// content, if there is one; else a new one.
        case showing(String)
        /// A new scene (`new_scene=true`, or an activity without a target content id).
        case new
    }

    /// How the activity reaches the scene's app.
    public enum Delivery: Equatable, Sendable {
        /// Advertised while recording is paused: nothing of it is written; its app's handler
        /// fills the scene, which is never left waiting.
        case unrecorded
        /// The type has no handler: the scene shows the activity at once, for the app to read.
        case withoutHandler
        /// Through the type's handler, durably: the scene waits, pending, until the app takes it.
        case handler
    }

    /// `Continue`'s options, checked before anything is looked up.
    public struct Options: Equatable, Sendable {
        /// The names it takes.
        public static let names = ["scene", "new_scene", "wait", "request_id", "device"]
        /// The scene to continue into, as the caller named it.
        public var scene: String?
        public var newScene = false
        /// Whether the reply waits for the app (default); false replies with the pending scene.
        public var wait = true
        /// The machine to continue on, as the caller named it.
        public var device: String?

        public init(scene: String? = nil, newScene: Bool = false, wait: Bool = true, device: String? = nil) {
            self.scene = scene
            self.newScene = newScene
            self.wait = wait
            self.device = device
        }

        public init(_ options: [String: String]) throws(BatonError) {
            if let unknown = options.keys.sorted().first(where: { !Self.names.contains($0) }) {
                throw .invalidArgument("Continue has no option '\(printable(unknown))'; its options are \(Self.names.joined(separator: ", "))")
            }
            scene = options["scene"]
            newScene = try Self.flag(options, "new_scene") ?? false
            wait = try Self.flag(options, "wait") ?? true
            device = options["device"].flatMap { $0.isEmpty ? nil : $0 }
            if newScene && scene != nil {
                throw .invalidArgument("Continue was given both scene and new_scene=true; give one")
            }
        }

        private static func flag(_ options: [String: String], _ name: String) throws(BatonError) -> Bool? {
            try options[name].map { text throws(BatonError) in try Validate.boolean(text, option: name) }
        }
    }

    /// The route for `activity`, asked by a caller confined to `confinedApp` (nil: a host
    /// client), with `options`, on the machine `thisDevice` (its sync id; "" while sync is
    /// off); `type` is its type as registered here (nil: not); `unrecorded` when it was
    /// advertised while recording is paused; `opensOutside` the types whose sources open them
    /// outside a scene. Throws what the caller is told.
    public static func route(
        for activity: Activity, confinedTo confinedApp: String?, options: Options, thisDevice: String,
        type: ActivityType?, unrecorded: Bool, opensOutside: Set<String>
    ) throws(BatonError) -> ContinuationRoute {
        if let confinedApp, confinedApp != activity.appID { throw .notFound("no activity \(activity.id)") }
        guard activity.eligibleForHandoff else {
            throw .notEligible("activity \(activity.id) was advertised with eligible_for_handoff=false: it cannot be continued")
        }
        if let device = options.device, device != thisDevice {
            if unrecorded {
                throw .notEligible("activity \(activity.id) was advertised while recording was paused: it stays on this machine")
            }
            return .onDevice(device)
        }
        let named = options.scene
        if named == nil && opensOutside.contains(activity.type) { return .outside }
        guard let type else {
            if activity.webpageURL != nil && named == nil { return .webPage }
            throw .unknownActivityType("activity type \(activity.type) is no longer registered")
        }
        let choice: SceneChoice = named.map(SceneChoice.named)
            ?? (options.newScene ? .new : activity.targetContentID.map(SceneChoice.showing) ?? .new)
        return .scene(type, choice, unrecorded ? .unrecorded : type.handler == nil ? .withoutHandler : .handler)
    }

}
