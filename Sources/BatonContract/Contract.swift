import DBus

/// The `org.baton.Handoff1` D-Bus contract, declared once for the daemon, BatonKit and
/// `baton`: names, object paths, every method and signal with its arguments, the error
/// mapping (`Errors.swift`), scene addresses (`SceneAddress.swift`) and the records
/// (`Records.swift`). `dbus/org.baton.Handoff1.xml` is its text; a test compares the
/// running daemon with it. No Foundation, so that `baton` stays quick to start.
public enum Contract {
    /// The daemon's well-known bus name.
    public static let busName = "org.baton.Handoff1"
    /// The root object: Registry, Activities, Scenes, Status and the ObjectManager.
    public static let rootPath = "/org/baton/Handoff1"
    /// The root object's path, typed.
    public static let root = ObjectPath(stringLiteral: rootPath)
    /// Scene objects live below this path, one per scene (`SceneAddress`).
    public static let scenesPath = rootPath + "/scene"

    /// The interfaces.
    public enum Interface {
        public static let registry = busName + ".Registry"
        public static let activities = busName + ".Activities"
        public static let scenes = busName + ".Scenes"
        public static let scene = busName + ".Scene"
        public static let status = busName + ".Status"
        public static let sync = busName + ".Sync"
        public static let archive = busName + ".Archive"
        public static let privacy = busName + ".Privacy"
        /// The clipboard source, for the clipboard agent and `baton clipboard` (host clients only).
        public static let clipboard = busName + ".Clipboard"
        /// Implemented by apps, at the path their activity type names.
        public static let handler = busName + ".Handler"
        /// Only on a batond started with `--test-clock`, for tests; not part of the contract's XML.
        public static let testing = busName + ".Testing"
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

/// A method of the contract: its interface, name and arguments. The daemon serves it
/// (`Method(_:ordering:handler:)`), clients call it by this value.
public struct ContractMethod: Sendable {
    public let interface: String
    public let name: String
    public let inputs: [Argument]
    public let outputs: [Argument]

    init(_ interface: String, _ name: String, in inputs: [Argument] = [], out outputs: [Argument] = []) {
        self.interface = interface
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
    }
}

/// A signal of the contract: its interface, name and arguments.
public struct ContractSignal: Sendable {
    public let interface: String
    public let name: String
    public let arguments: [Argument]
    /// Its body's signature, as declared.
    public var signature: Signature { Signature(arguments.map(\.type)) }

    init(_ interface: String, _ name: String, _ arguments: [Argument]) {
        self.interface = interface
        self.name = name
        self.arguments = arguments
    }
}

extension Contract {
    /// `org.baton.Handoff1.Registry` on the root object.
    public enum Registry {
        static let interface = Contract.Interface.registry
        public static let registerActivityType = ContractMethod(
            interface, "RegisterActivityType", in: [Argument("type", "s"), Argument("app_id", "s"), Argument("options", "a{ss}")])
        public static let unregisterActivityType = ContractMethod(interface, "UnregisterActivityType", in: [Argument("type", "s")])
        public static let listActivityTypes = ContractMethod(interface, "ListActivityTypes", out: [Argument("types", "aa{sv}")])
    }

    /// `org.baton.Handoff1.Activities` on the root object.
    public enum Activities {
        static let interface = Contract.Interface.activities
        public static let advertise = ContractMethod(
            interface, "Advertise",
            in: [Argument("type", "s"), Argument("title", "s"), Argument("payload_json", "s"), Argument("options", "a{ss}")],
            out: [Argument("id", "s")])
        public static let update = ContractMethod(
            interface, "Update", in: [Argument("id", "s"), Argument("payload_json", "s"), Argument("options", "a{ss}")])
        public static let invalidate = ContractMethod(interface, "Invalidate", in: [Argument("id", "s")])
        public static let get = ContractMethod(interface, "Get", in: [Argument("id", "s")], out: [Argument("activity", "a{sv}")])
        public static let list = ContractMethod(
            interface, "List", in: [Argument("filter", "a{ss}")], out: [Argument("activities", "aa{sv}")])
        public static let search = ContractMethod(
            interface, "Search", in: [Argument("query", "s"), Argument("limit", "u")], out: [Argument("activities", "aa{sv}")])
        public static let deleteSaved = ContractMethod(
            interface, "DeleteSaved", in: [Argument("persistent_ids", "as")], out: [Argument("deleted", "u")])
        public static let deleteAllSaved = ContractMethod(
            interface, "DeleteAllSaved", in: [Argument("app_id", "s")], out: [Argument("deleted", "u")])
        /// Why an activity is (or is not) continuable and searchable, and how its last continuation went.
        public static let explain = ContractMethod(interface, "Explain", in: [Argument("id", "s")], out: [Argument("explanation", "a{sv}")])
        public static let `continue` = ContractMethod(
            interface, "Continue", in: [Argument("id", "s"), Argument("options", "a{ss}")], out: [Argument("scene", "o")])

        public static let advertised = ContractSignal(
            interface, "Advertised", [Argument("id", "s"), Argument("type", "s"), Argument("title", "s")])
        public static let invalidated = ContractSignal(interface, "Invalidated", [Argument("id", "s")])
        public static let updated = ContractSignal(interface, "Updated", [Argument("id", "s")])
        /// `created`: the scene was opened for it (false: it went into a scene that was there).
        public static let continued = ContractSignal(
            interface, "Continued", [Argument("id", "s"), Argument("scene", "o"), Argument("created", "b")])
    }

    /// `org.baton.Handoff1.Scenes` on the root object.
    public enum Scenes {
        static let interface = Contract.Interface.scenes
        public static let openScene = ContractMethod(
            interface, "OpenScene", in: [Argument("app_id", "s"), Argument("options", "a{ss}")], out: [Argument("scene", "o")])
        public static let listScenes = ContractMethod(interface, "ListScenes", in: [Argument("app_id", "s")], out: [Argument("scenes", "ao")])
        public static let closeScene = ContractMethod(interface, "CloseScene", in: [Argument("scene", "o")])
        /// At an app's launch: its scenes, each with why it comes back (`RestoreReason`).
        public static let restoreScenes = ContractMethod(
            interface, "RestoreScenes", in: [Argument("app_id", "s")], out: [Argument("scenes", "a(os)")])
        /// At an app's clean exit.
        public static let detach = ContractMethod(interface, "Detach", in: [Argument("app_id", "s")])
    }

    /// `org.baton.Handoff1.Scene`, on every scene object.
    public enum Scene {
        static let interface = Contract.Interface.scene
        public static let get = ContractMethod(interface, "Get", in: [Argument("key", "s")], out: [Argument("value", "v")])
        public static let set = ContractMethod(interface, "Set", in: [Argument("key", "s"), Argument("value", "v")])
        public static let setMany = ContractMethod(interface, "SetMany", in: [Argument("values", "a{sv}")])
        public static let remove = ContractMethod(interface, "Remove", in: [Argument("key", "s")])
        public static let getAll = ContractMethod(interface, "GetAll", out: [Argument("values", "a{sv}")])
        public static let close = ContractMethod(interface, "Close")
        public static let setHandlesContent = ContractMethod(interface, "SetHandlesContent", in: [Argument("ids", "as")])
        /// The app restored the scene fine (it is no longer suspected of crashing it).
        public static let acknowledge = ContractMethod(interface, "Acknowledge")

        public static let storageChanged = ContractSignal(
            interface, "StorageChanged", [Argument("changed", "a{sv}"), Argument("removed", "as")])

        /// The scene's properties, by name.
        public enum Property {
            public static let id = "Id"
            public static let appID = "AppId"
            public static let title = "Title"
            public static let activityID = "ActivityId"
            public static let createdAt = "CreatedAt"
            public static let lastActiveAt = "LastActiveAt"
            public static let restored = "Restored"
            public static let handlesContent = "HandlesContent"
            public static let state = "State"
            public static let restoreReason = "RestoreReason"
        }
    }

    /// GNOME Shell's search provider interface, on its own object (docs/DESIGN.md, "Desktop
    /// surfaces"): results are activity ids.
    public enum SearchProvider {
        public static let interface = "org.gnome.Shell.SearchProvider2"
        public static let path = ObjectPath(stringLiteral: rootPath + "/SearchProvider")
        public static let getInitialResultSet = ContractMethod(
            interface, "GetInitialResultSet", in: [Argument("terms", "as")], out: [Argument("results", "as")])
        public static let getSubsearchResultSet = ContractMethod(
            interface, "GetSubsearchResultSet", in: [Argument("previous_results", "as"), Argument("terms", "as")],
            out: [Argument("results", "as")])
        public static let getResultMetas = ContractMethod(
            interface, "GetResultMetas", in: [Argument("identifiers", "as")], out: [Argument("metas", "aa{sv}")])
        public static let activateResult = ContractMethod(
            interface, "ActivateResult", in: [Argument("identifier", "s"), Argument("terms", "as"), Argument("timestamp", "u")])
        public static let launchSearch = ContractMethod(
            interface, "LaunchSearch", in: [Argument("terms", "as"), Argument("timestamp", "u")])
    }

    /// KRunner's D-Bus runner interface (API DBus2), on its own object: match ids are activity ids.
    public enum KRunner {
        public static let interface = "org.kde.krunner1"
        public static let path = ObjectPath(stringLiteral: rootPath + "/KRunner")
        public static let actions = ContractMethod(interface, "Actions", out: [Argument("matches", "a(sss)")])
        public static let match = ContractMethod(interface, "Match", in: [Argument("query", "s")], out: [Argument("matches", "a(sssida{sv})")])
        public static let run = ContractMethod(interface, "Run", in: [Argument("matchId", "s"), Argument("actionId", "s")])
        public static let config = ContractMethod(interface, "Config", out: [Argument("config", "a{sv}")])
        public static let teardown = ContractMethod(interface, "Teardown")

        /// The action ids (docs/DESIGN.md): continue here, in a new scene, on the machine it came from.
        public enum Action {
            public static let continueHere = "continue"
            public static let newScene = "new-scene"
            public static let onDevice = "on-device"
        }
    }

    /// `org.baton.Handoff1.Testing` on the root object of a batond started with `--test-clock`:
    /// tests move its clock ahead instead of sleeping. Not part of the contract.
    public enum Testing {
        public static let advanceClock = ContractMethod(
            Contract.Interface.testing, "AdvanceClock", in: [Argument("microseconds", "t")], out: [Argument("now", "t")])
    }

    /// `org.baton.Handoff1.Archive` on the root object: the user's history.
    public enum Archive {
        public static let history = ContractMethod(
            Contract.Interface.archive, "History", in: [Argument("filter", "a{ss}")], out: [Argument("activities", "aa{sv}")])
        public static let clearHistory = ContractMethod(
            Contract.Interface.archive, "ClearHistory", in: [Argument("filter", "a{ss}")], out: [Argument("removed", "u")])
        public static let export = ContractMethod(
            Contract.Interface.archive, "Export", in: [Argument("filter", "a{ss}")], out: [Argument("json", "s")])
        public static let exportTo = ContractMethod(
            Contract.Interface.archive, "ExportTo", in: [Argument("fd", "h"), Argument("filter", "a{ss}")])
        public static let `import` = ContractMethod(
            Contract.Interface.archive, "Import", in: [Argument("json", "s"), Argument("options", "a{ss}")], out: [Argument("counts", "a{su}")])
        /// The filters `History` and `ClearHistory` take.
        public static let filters = ["app_id", "type", "query", "id_prefix", "since", "limit"]
    }

    /// `org.baton.Handoff1.Privacy` on the root object: what the user lets be kept.
    public enum Privacy {
        public static let blockApp = ContractMethod(Contract.Interface.privacy, "BlockApp", in: [Argument("app_id", "s")])
        public static let unblockApp = ContractMethod(Contract.Interface.privacy, "UnblockApp", in: [Argument("app_id", "s")])
        public static let forgetApp = ContractMethod(
            Contract.Interface.privacy, "ForgetApp", in: [Argument("app_id", "s")], out: [Argument("counts", "a{su}")])
        public static let pause = ContractMethod(Contract.Interface.privacy, "Pause", in: [Argument("seconds", "t")])
        public static let resume = ContractMethod(Contract.Interface.privacy, "Resume")

        public enum Property {
            public static let blockedApps = "BlockedApps"
            public static let paused = "Paused"
            public static let pausedUntil = "PausedUntil"
        }
    }

    /// `org.baton.Handoff1.Status` on the root object: read-only facts for `baton status`.
    public enum Status {
        public enum Property {
            public static let version = "Version"
            public static let databasePath = "DatabasePath"
            public static let databaseSize = "DatabaseSize"
            public static let startedAt = "StartedAt"
            public static let notifications = "Notifications"
            public static let sources = "Sources"
        }

        /// Turns notifications of other machines' activities on or off (`baton notifications`).
        public static let setNotifications = ContractMethod(Contract.Interface.status, "SetNotifications", in: [Argument("enabled", "b")])
        /// Turns one of batond's sources of activities on or off (`baton sources`).
        public static let enableSource = ContractMethod(Contract.Interface.status, "EnableSource", in: [Argument("source", "s")])
        public static let disableSource = ContractMethod(Contract.Interface.status, "DisableSource", in: [Argument("source", "s")])
        /// A source's settings and their values (`baton sources show`), the defaults where unset.
        public static let sourceSettings = ContractMethod(
            Contract.Interface.status, "SourceSettings", in: [Argument("source", "s")], out: [Argument("settings", "a{ss}")])
        /// Sets one (`baton sources set`); `InvalidArgument` for an unknown source or name, or a value it does not take.
        public static let setSourceSetting = ContractMethod(
            Contract.Interface.status, "SetSourceSetting", in: [Argument("source", "s"), Argument("name", "s"), Argument("value", "s")])
        /// One setting's new value, as `SourceSettings` gives it (the clipboard agent reads its caps again).
        public static let sourceSettingChanged = ContractSignal(
            Contract.Interface.status, "SourceSettingChanged", [Argument("source", "s"), Argument("name", "s"), Argument("value", "s")])
    }

    /// `org.baton.Handoff1.Clipboard` on the root object: between batond and the clipboard agent
    /// of each graphical session (docs/DESIGN.md, "The clipboard"). Copies never travel in a
    /// signal: an agent asks for the content of the offer it was told of.
    public enum Clipboard {
        /// The agent saw the user copy: `mime` (`text/plain;charset=utf-8` or `image/png`),
        /// the content, and the offer's other types as `hints` (`x-kde-passwordManagerHint` and
        /// its value, `selection`: `clipboard` or `primary`). Replies what became of it: `sent`,
        /// or why not (`Outcome`).
        public static let copied = ContractMethod(
            Contract.Interface.clipboard, "Copied", in: [Argument("mime", "s"), Argument("content", "ay"), Argument("hints", "a{ss}")],
            out: [Argument("outcome", "s")])
        /// The copy another machine made that this one offers now: id ("" for none), type, size,
        /// until when (µs since the epoch), the machine's name.
        public static let offer = ContractMethod(
            Contract.Interface.clipboard, "Offer",
            out: [Argument("id", "s"), Argument("mime", "s"), Argument("size", "t"), Argument("expires_at", "t"), Argument("device", "s")])
        /// The content of the offer `id`, or of the last copy sent while it lasts; `NotFound` once it is over.
        public static let content = ContractMethod(Contract.Interface.clipboard, "Content", in: [Argument("id", "s")], out: [Argument("content", "ay")])
        /// Withdraws the offer now (`baton clipboard clear`).
        public static let clear = ContractMethod(Contract.Interface.clipboard, "Clear")

        public static let offered = ContractSignal(
            Contract.Interface.clipboard, "Offered",
            [Argument("id", "s"), Argument("mime", "s"), Argument("size", "t"), Argument("expires_at", "t"), Argument("device", "s")])
        public static let withdrawn = ContractSignal(Contract.Interface.clipboard, "Withdrawn", [Argument("id", "s")])

        public enum Property {
            /// `a{sv}`: `id`, `mime`, `size`, `at` (when copied), `device` (the machine's name;
            /// empty for this one's); empty before the first.
            public static let lastSent = "LastSent"
            public static let lastReceived = "LastReceived"
        }

        /// What became of a copy the agent reported (`Copied`'s reply).
        public enum Outcome {
            public static let sent = "sent"
            /// The source is off here, or sync is.
            public static let off = "off"
            public static let noSync = "no-sync"
            public static let paused = "paused"
            /// This machine only receives (`direction`).
            public static let receiveOnly = "receive-only"
            /// A password manager's copy, or the primary selection: never leaves.
            public static let secret = "secret"
            public static let primary = "primary"
            /// Over `max-text` or `max-image`.
            public static let tooLarge = "too-large"
            /// Neither text nor PNG, or the owner did not hand it over in time: the agent sent no content.
            public static let unsupported = "unsupported"
            /// What Baton itself offered (an app that rewrote it, a clipboard manager that took it over): sending it would echo.
            public static let offered = "offered"
        }
    }

    /// `org.baton.Handoff1.Sync` on the root object: this machine's place among the user's devices.
    public enum Sync {
        public static let initialize = ContractMethod(
            Contract.Interface.sync, "Init", in: [Argument("url", "s"), Argument("options", "a{ss}")], out: [Argument("recovery_words", "s")])
        public static let join = ContractMethod(
            Contract.Interface.sync, "Join", in: [Argument("url", "s"), Argument("recovery_words", "s"), Argument("options", "a{ss}")])
        public static let leave = ContractMethod(Contract.Interface.sync, "Leave")
        public static let devices = ContractMethod(Contract.Interface.sync, "Devices", out: [Argument("devices", "aa{sv}")])
        public static let revokeDevice = ContractMethod(Contract.Interface.sync, "RevokeDevice", in: [Argument("device_id", "s")])

        public enum Property {
            public static let state = "State"
            public static let deviceID = "DeviceId"
            public static let deviceName = "DeviceName"
            public static let lastSyncAt = "LastSyncAt"
            public static let outbox = "Outbox"
            /// `postgresql` or `folder` (empty while off).
            public static let transport = "Transport"
        }

        /// The keys of a `Devices` record.
        public enum DeviceKey {
            public static let id = "id"
            public static let name = "name"
            public static let lastSeen = "last_seen"
            public static let revoked = "revoked"
            public static let thisDevice = "this_device"
            /// This device's only, when the devices meet in a synced folder: the folder's path here.
            public static let folder = "folder"
        }
    }

    /// The sources of activities from apps that know nothing of Baton (docs/DESIGN.md,
    /// "Sources"): each one's activity type and app. The app's name is also its handler's bus
    /// name, answering at `handlerPath`: a process of its own that the bus starts.
    public enum Sources {
        /// Pages from the browser extension's host and `baton open`.
        public enum WebPages {
            public static let type = "org.baton.web.page"
            public static let app = "org.baton.Web"
        }

        /// Documents apps record in `recently-used.xbel`; off until the user turns it on.
        public enum RecentDocuments {
            public static let type = "org.freedesktop.RecentDocument"
            public static let app = "org.baton.RecentDocuments"
            /// Its name for `Status.EnableSource`, `Status.DisableSource` and `baton sources`.
            public static let name = "recent-documents"
        }

        /// What MPRIS 2 media players play; off until the user turns it on.
        public enum Media {
            public static let type = "org.baton.media.track"
            public static let app = "org.baton.Media"
            /// Its name for `Status.EnableSource`, `Status.DisableSource` and `baton sources`.
            public static let name = "media"
        }

        /// The sources the user turns on and off, by name (`Status.Sources` lists those on).
        public static let switchable = [RecentDocuments.name, Media.name, Clipboard.name, Terminals.name]
        /// Where a source's handler answers `Handler.ContinueActivity`.
        public static let handlerPath = "/"
    }

    /// `org.baton.Handoff1.Handler`, implemented by apps.
    public enum Handler {
        public static let continueActivity = ContractMethod(
            Contract.Interface.handler, "ContinueActivity",
            in: [Argument("scene", "o"), Argument("activity", "a{sv}")], out: [Argument("storage", "a{sv}")])
        /// Told to the app that advertised an activity once it was continued (optional for apps).
        public static let activityContinued = ContractMethod(
            Contract.Interface.handler, "ActivityContinued", in: [Argument("id", "s"), Argument("scene", "o"), Argument("device", "s")])
    }
}

extension Method {
    /// Serves a contract method with `handler`.
    public init(_ method: ContractMethod, ordering: Ordering = .inOrder, handler: @escaping Handler) {
        self.init(method.name, in: method.inputs, out: method.outputs, ordering: ordering, handler: handler)
    }

    /// Serves a contract method whose reply writes itself (`Method.encoded`).
    public static func encoded(_ method: ContractMethod, ordering: Ordering = .inOrder, handler: @escaping EncodingHandler) -> Method {
        encoded(method.name, in: method.inputs, out: method.outputs, ordering: ordering, handler: handler)
    }
}

extension Signal {
    /// Declares a contract signal on its interface.
    public init(_ signal: ContractSignal) {
        self.init(signal.name, signal.arguments)
    }
}

extension Connection {
    /// Calls a contract method of batond; `timeout` as `call(_:_:_:_:_:timeout:)` takes it.
    public func call(
        _ method: ContractMethod, _ arguments: [DBusValue] = [], path: ObjectPath = Contract.root, timeout: Duration = .seconds(25)
    ) async throws -> [DBusValue] {
        try await call(Contract.busName, path, method.interface, method.name, arguments, timeout: timeout)
    }

    /// Emits a contract signal from the object at `path`, heard by `audience` (see `Connection.emit`).
    /// A body that is not what the signal declares is refused (`InvalidArgs`), not sent.
    public func emit(
        _ signal: ContractSignal, path: ObjectPath = Contract.root, _ body: [DBusValue], to audience: Audience? = nil
    ) throws(DBusError) {
        let signature = Signature(body.map(\.type))
        guard signature == signal.signature else {
            throw .invalidArgs("\(signal.interface).\(signal.name) declares '\(signal.signature)'; its body was '\(signature)'")
        }
        try emit(path: path, interface: signal.interface, member: signal.name, body, to: audience)
    }
}
