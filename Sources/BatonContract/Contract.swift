/// The names of the `org.baton.Handoff1` D-Bus contract, declared once for the daemon,
/// BatonKit and `baton` (`dbus/org.baton.Handoff1.xml` is its text; a test compares the
/// running daemon with it). No Foundation, so that `baton` stays quick to start.
public enum Contract {
    /// The daemon's well-known bus name.
    public static let busName = "org.baton.Handoff1"
    /// The root object: Registry, Activities, Scenes, Status and the ObjectManager.
    public static let rootPath = "/org/baton/Handoff1"
    /// Scene objects live below this path, one per scene (`SceneAddress`).
    public static let scenesPath = rootPath + "/scene"

    /// The interfaces.
    public enum Interface {
        public static let registry = busName + ".Registry"
        public static let activities = busName + ".Activities"
        public static let scenes = busName + ".Scenes"
        public static let scene = busName + ".Scene"
        public static let status = busName + ".Status"
        /// Implemented by apps, at the path their activity type names.
        public static let handler = busName + ".Handler"
    }

    /// Signals, by interface.
    public enum Signal {
        public static let advertised = "Advertised"
        public static let invalidated = "Invalidated"
        public static let continued = "Continued"
        public static let storageChanged = "StorageChanged"
    }

    /// Error names are `org.baton.Handoff1.Error.<Code>`.
    public static let errorPrefix = busName + ".Error."

    /// The error name for a code (`BatonError.Code`'s raw value).
    public static func errorName(_ code: String) -> String { errorPrefix + code }

    /// The code in a contract error name, or nil for another name.
    public static func errorCode(_ name: String) -> String? {
        name.hasPrefix(errorPrefix) ? String(name.dropFirst(errorPrefix.count)) : nil
    }
}
