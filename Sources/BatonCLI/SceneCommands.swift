import BatonContract
import ArgumentParser
import BatonCore
import DBus
import Glibc

// MARK: - scenes

private typealias Name = Contract.Scene.Property

struct Scenes: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scenes", abstract: "Open, inspect and close scenes; get and set their storage.",
        subcommands: [List.self, Open.self, Show.self, Get.self, SetValue.self, Remove.self, Handles.self, Restore.self, Close.self],
        defaultSubcommand: List.self)

    /// Every scene's properties, by path, from the root's `ObjectManager.GetManagedObjects`.
    static func managedObjects(_ daemon: Daemon) async throws -> [ObjectPath: [String: DBusValue]] {
        let reply: [DBusValue]
        do {
            reply = try await daemon.connection.call(
                Daemon.busName, Daemon.root, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects", timeout: .seconds(60))
        } catch let error as DBusError {
            throw Daemon.explain(error)
        }
        var scenes: [ObjectPath: [String: DBusValue]] = [:]
        for entry in reply.first?.dictionaryEntries ?? [] {
            guard let path = entry.key.objectPathValue,
                  let properties = entry.value.stringKeyedValue?[Contract.Interface.scene]?.stringKeyedValue else { continue }
            scenes[path] = properties.mapValues(\.unwrapped)
        }
        return scenes
    }

    static func describe(_ value: DBusValue) -> (type: String, text: String) {
        switch value.unwrapped {
        case .boolean(let v): ("bool", v ? "true" : "false")
        case .int64(let v): ("int", String(v))
        case .double(let v): ("double", "\(v)")
        case .string(let v): ("string", v)
        case .bytes(let bytes): ("bytes", bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined())
        case .array(.byte, let bytes): ("bytes", bytes.compactMap(\.byteValue).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined())
        case let other: (other.type.signature, JSONText.value(other))
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List scenes, oldest first.")
        @Option(help: "Only this app's.", completion: .custom(Completions.apps)) var app: String?
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                let paths = try await daemon.call(Contract.Scenes.listScenes, [.string(app ?? "")]).first?.arrayValue?.compactMap(\.objectPathValue) ?? []
                // Every scene's properties in one call: a Properties.GetAll per scene took 15 s for 20 000 scenes.
                let managed = try await Scenes.managedObjects(daemon)
                var records: [DBusValue] = []
                for path in paths {
                    guard var fields = managed[path] else { continue }  // closed meanwhile
                    fields["path"] = .objectPath(path)
                    records.append(.record(fields))
                }
                printRecords(records, global.output, headers: ["ID", "APP", "TITLE", "ACTIVITY", "LAST ACTIVE"]) { r in
                    [r.text(Name.id), r.text(Name.appID), r.text(Name.title), r.text(Name.activityID).isEmpty ? "-" : r.text(Name.activityID),
                     r[Name.lastActiveAt]?.uint64Value.map { relativeTime($0) } ?? ""]
                }
            }
        }
    }

    struct Open: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "open", abstract: "Open an empty scene for an app; prints its path.")
        @ArgumentParser.Argument(help: "The app (reverse-DNS).") var app: String
        @Option(help: "The window title.") var title: String?
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let options = title.map { ["title": $0] } ?? [:]
                let path = try await global.daemon().write(Contract.Scenes.openScene, options: options) { [.string(app), .stringMap($0)] }
                    .first?.stringValue ?? ""
                print(global.json ? "{\"scene\":\(StrictJSON.quote(path))}" : path)
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Show a scene's properties and storage.")
        @ArgumentParser.Argument(help: "The scene's path, its id, or enough of the id's beginning to name one.", completion: .custom(Completions.scenes))
        var scene: String
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                let path = try await daemon.scenePath(scene)
                let properties = try await daemon.properties(of: Contract.Interface.scene, at: path)
                let storage = try await daemon.call(Contract.Scene.getAll, path: path).first ?? .record([:])
                if global.json {
                    return print("{\"properties\":\(JSONText.value(.record(properties), rawJSONKeys: [])),\"storage\":\(JSONText.value(storage, rawJSONKeys: []))}")
                }
                let output = global.output
                print(output.bold("scene".padding(14)) + path.text)
                for key in [Name.id, Name.appID, Name.title, Name.activityID, Name.state, Name.restoreReason, Name.restored] {
                    print(output.bold(key.padding(14)) + Scenes.describe(properties[key] ?? .string("")).text)
                }
                let handles = properties[Name.handlesContent].flatMap([String].init(dbusValue:)) ?? []
                if !handles.isEmpty { print(output.bold(Name.handlesContent.padding(14)) + handles.joined(separator: ", ")) }
                if let last = properties[Name.lastActiveAt]?.uint64Value { print(output.bold(Name.lastActiveAt.padding(14)) + relativeTime(last)) }
                let rows = (storage.stringKeyedValue ?? [:]).sorted { $0.key < $1.key }.map { key, value in
                    let described = Scenes.describe(value)
                    return [key, described.type, described.text]
                }
                print("")
                if rows.isEmpty { print(output.dim("(no storage)")) } else { output.table(["KEY", "TYPE", "VALUE"], rows) }
            }
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "get", abstract: "Print one stored value.")
        @ArgumentParser.Argument(help: "The scene's path, its id, or enough of the id's beginning to name one.", completion: .custom(Completions.scenes))
        var scene: String
        @ArgumentParser.Argument(help: "The key.") var key: String
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                let value = try await daemon.call(Contract.Scene.get, [.string(key)], path: try await daemon.scenePath(scene)).first ?? .string("")
                print(global.json ? JSONText.value(value, rawJSONKeys: []) : Scenes.describe(value).text)
            }
        }
    }

    enum ValueType: String, ExpressibleByArgument, CaseIterable {
        case auto, string, int, double, bool, bytes
    }

    struct SetValue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Store a value in a scene.",
            discussion: """
                The value is stored as text ("007" stays "007"), unless --type says otherwise or the key \
                already holds a value of another kind, which it keeps (a count stored as an int stays \
                one). --type bytes takes hex (00ff…); --type auto guesses from the text: true and false \
                are booleans, whole numbers integers, numbers with a point or an exponent doubles. \
                Negative numbers need no --: baton scenes set SCENE offset -3 --type int.
                """)
        @ArgumentParser.Argument(help: "The scene's path, its id, or enough of the id's beginning to name one.", completion: .custom(Completions.scenes))
        var scene: String
        @ArgumentParser.Argument(help: "The key, like ContentView.CurrentTab.") var key: String
        @ArgumentParser.Argument(help: "The value.") var value: String
        @Option(help: "How to read the value (see above); without it, as text or as the key's kind.") var type: ValueType?
        @OptionGroup var global: GlobalOptions

        /// The kind of value `key` holds in the scene now, if it holds one.
        func existingKind(_ daemon: Daemon, at path: ObjectPath) async throws -> ValueType? {
            let storage = try await daemon.call(Contract.Scene.getAll, path: path).first?.stringKeyedValue ?? [:]
            return storage[key].flatMap { ValueType(rawValue: Scenes.describe($0).type) }
        }

        func typed(as type: ValueType) throws -> DBusValue {
            func fail(_ expected: String) -> CLIError {
                CLIError(description: "'\(printable(value))' is not \(expected)", status: ExitStatus.invalidInput)
            }
            switch type {
            case .string: return .string(value)
            case .bool:
                guard let bool = Bool(value) else { throw fail("true or false") }
                return .boolean(bool)
            case .int:
                guard let int = Int64(value) else { throw fail("a whole number") }
                return .int64(int)
            case .double:
                guard let double = Double(value), double.isFinite else { throw fail("a finite number") }
                return .double(double)
            case .bytes:
                let digits = Array(value.utf8)
                guard digits.count % 2 == 0 else { throw fail("hex bytes (an even number of 0-9a-f)") }
                var bytes: [DBusValue] = []
                for index in stride(from: 0, to: digits.count, by: 2) {
                    guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else {
                        throw fail("hex bytes (an even number of 0-9a-f)")
                    }
                    bytes.append(.byte(byte))
                }
                return .array(.byte, bytes)
            case .auto:
                if let bool = Bool(value) { return .boolean(bool) }
                if let int = Int64(value) { return .int64(int) }
                if value.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }), let double = Double(value), double.isFinite {
                    return .double(double)
                }
                return .string(value)
            }
        }

        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                let path = try await daemon.scenePath(scene)
                var kind = type
                if kind == nil { kind = try await existingKind(daemon, at: path) }
                let typed = try typed(as: kind ?? .string)
                _ = try await daemon.call(Contract.Scene.set, [.string(key), .variant(typed)], path: path)
                let described = Scenes.describe(typed)
                print(global.json
                    ? "{\"key\":\(StrictJSON.quote(key)),\"type\":\(StrictJSON.quote(described.type)),\"value\":\(JSONText.value(typed, rawJSONKeys: []))}"
                    : "\(key) = \(described.text) (\(described.type))")
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove a stored value.")
        @ArgumentParser.Argument(help: "The scene's path, its id, or enough of the id's beginning to name one.", completion: .custom(Completions.scenes))
        var scene: String
        @ArgumentParser.Argument(help: "The key.") var key: String
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                _ = try await daemon.call(Contract.Scene.remove, [.string(key)], path: try await daemon.scenePath(scene))
                print(global.json ? "{\"removed\":\(StrictJSON.quote(key))}" : "removed \(key)")
            }
        }
    }

    struct Handles: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "handles", abstract: "Set the content ids a scene shows: continuing one of them comes into it.",
            discussion: "Replaces the scene's list (SwiftUI's handlesExternalEvents); give no ids to clear it.")
        @ArgumentParser.Argument(help: "The scene's path, its id, or enough of the id's beginning to name one.", completion: .custom(Completions.scenes))
        var scene: String
        @ArgumentParser.Argument(help: "Content ids, as activities give them in target_content_id.") var ids: [String] = []
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                _ = try await daemon.call(Contract.Scene.setHandlesContent, [.strings(ids)], path: try await daemon.scenePath(scene))
                let list = ids.map(StrictJSON.quote).joined(separator: ",")
                print(global.json ? "{\"scene\":\(StrictJSON.quote(scene)),\"handles\":[\(list)]}"
                      : ids.isEmpty ? "\(scene) handles no content" : "\(scene) handles \(ids.joined(separator: ", "))")
            }
        }
    }

    struct Restore: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "restore", abstract: "Hand an app its scenes, as the app does at launch; prints each with why it comes back.",
            discussion: """
                For apps run from a shell: RestoreScenes (reasons: launch, never handed out before; restore, after a \
                clean exit; recover, after a crash), which also delivers continuations waiting for the app; then Detach, \
                since baton exits at once (the run counts as a clean one).
                """)
        @ArgumentParser.Argument(help: "The app id.", completion: .custom(Completions.apps)) var app: String
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                let reply = try await daemon.call(Contract.Scenes.restoreScenes, [.string(app)])
                _ = try await daemon.call(Contract.Scenes.detach, [.string(app)])
                let scenes = Records.restored(reply.first).map { ($0.scene.text, $0.reason.rawValue) }
                if global.json {
                    let items = scenes.map { "{\"scene\":\(StrictJSON.quote($0.0)),\"reason\":\(StrictJSON.quote($0.1))}" }
                    return print("[" + items.joined(separator: ",") + "]")
                }
                if scenes.isEmpty { return print("\(app) has no scenes") }
                for (path, reason) in scenes { print("\(path)  \(reason)") }
            }
        }
    }

    struct Close: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "close", abstract: "Close a scene, discarding its storage.")
        @ArgumentParser.Argument(help: "The scene's path, its id, or enough of the id's beginning to name one.", completion: .custom(Completions.scenes))
        var scene: String
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                _ = try await daemon.call(Contract.Scene.close, path: try await daemon.scenePath(scene))
                print(global.json ? "{\"closed\":\(StrictJSON.quote(scene))}" : "closed \(scene)")
            }
        }
    }
}

// MARK: - status

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "Is batond reachable, and what does it hold?")
    @OptionGroup var global: GlobalOptions
    func run() async throws {
        try await perform {
            let daemon = try global.daemon()
            let types = try await daemon.call(Contract.Registry.listActivityTypes).first?.arrayValue?.count ?? 0
            let activities = try await daemon.call(Contract.Activities.list, [.stringMap([:])]).first?.arrayValue?.count ?? 0
            let scenes = try await daemon.call(Contract.Scenes.listScenes, [.string("")]).first?.arrayValue?.count ?? 0
            let facts = try await daemon.properties(of: Contract.Interface.status)
            let owner = (try? await daemon.connection.nameOwner(Daemon.busName)) ?? nil
            var pid: UInt32?
            if let owner {
                pid = try? await daemon.connection.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                        "GetConnectionUnixProcessID", [.string(owner)]).first?.uint32Value
            }
            let version = facts[Contract.Status.Property.version]?.uint32Value ?? 0
            let path = facts.text(Contract.Status.Property.databasePath)
            let size = facts["DatabaseSize"]?.uint64Value ?? 0
            let started = facts[Contract.Status.Property.startedAt]?.uint64Value ?? 0
            let notifications = facts[Contract.Status.Property.notifications]?.boolValue ?? true
            let sourcesOn = facts[Contract.Status.Property.sources].flatMap([String].init(dbusValue:)) ?? []
            let recentDocuments = sourcesOn.contains(Contract.Sources.RecentDocuments.name)
            // A batond older than the Privacy interface has none: nothing blocked.
            let privacy = (try? await daemon.properties(of: Contract.Interface.privacy)) ?? [:]
            let blocked = privacy[Contract.Privacy.Property.blockedApps].flatMap([String].init(dbusValue:)) ?? []
            let paused = privacy[Contract.Privacy.Property.paused]?.boolValue ?? false
            let pausedUntil = privacy[Contract.Privacy.Property.pausedUntil]?.uint64Value ?? 0
            if global.json {
                print("{\"reachable\":true,\"contract\":\(version),\"unique_name\":\(StrictJSON.quote(owner ?? "")),"
                    + "\"pid\":\(pid.map(String.init) ?? "null"),\"database\":\(StrictJSON.quote(path)),\"database_bytes\":\(size),"
                    + "\"started_at\":\(started),\"types\":\(types),\"activities\":\(activities),\"scenes\":\(scenes),"
                    + "\"blocked_apps\":[\(blocked.map(StrictJSON.quote).joined(separator: ","))],"
                    + "\"paused\":\(paused),\"paused_until\":\(pausedUntil),\"notifications\":\(notifications),"
                    + "\"sources_on\":[\(sourcesOn.map(StrictJSON.quote).joined(separator: ","))]}")
                return
            }
            let uptime = relativeTime(started).replacing(" ago", with: "")
            print("batond is running as \(owner ?? "?") (pid \(pid.map(String.init) ?? "?")) for \(uptime), contract org.baton.Handoff1 version \(version)")
            print("database \(path), \(size / 1024) KiB")
            print([counted(types, "activity type", "activity types"), counted(activities, "live activity", "live activities"),
                   counted(scenes, "scene", "scenes")].joined(separator: ", "))
            print("notifications of other machines' activities \(notifications ? "on" : "off") (baton notifications); "
                  + "recent documents \(recentDocuments ? "recorded" : "not recorded"), "
                  + "media \(sourcesOn.contains(Contract.Sources.Media.name) ? "recorded" : "not recorded") (baton sources)")
            if !blocked.isEmpty { print("blocked (their activities are refused): \(blocked.joined(separator: ", "))") }
            if paused {
                print("recording paused " + (pausedUntil == 0 ? "until baton resume" : "until \(WallClock.text(pausedUntil))")
                      + ": what apps advertise is kept in memory only")
            }
        }
    }
}
