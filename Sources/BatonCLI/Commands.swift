import BatonContract
import ArgumentParser
import BatonCore
import DBus
import Glibc

/// `baton`: every capability of batond from a shell.
public struct BatonCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "baton",
        abstract: "Advertise, find and continue user activities; read and write scene storage.",
        discussion: """
            baton talks to batond (org.baton.Handoff1) on the session bus; the bus starts batond if it is \
            installed. Tables are for people; add --json for scripts. Payloads are JSON objects, given \
            inline, as @FILE, or as - for standard input.

            The everyday commands list, search, show and continue are short for baton activities list, … \
            Ids can be shortened to any beginning that names one (baton show 01a2f). Options such as --json \
            may come before or after the command.

            Exit status: 0 success; 1 other failure; 2 not found or expired; 3 invalid input (bad \
            payload, unknown type, over a limit); 4 batond unreachable; 5 access denied; 6 the app's \
            handler failed; 7 batond's storage is full, locked or damaged (see baton doctor); 64 wrong usage.
            """,
        version: "baton 1 (contract org.baton.Handoff1 version 1)",
        subcommands: [Types.self, Activities.self, History.self, Scenes.self, Watch.self, Export.self, Import.self, Pause.self, Resume.self,
                      Block.self, Unblock.self, Forget.self, Notifications.self, OpenPage.self, Sync.self, Devices.self, Status.self, Doctor.self,
                      Sources.self, Clipboard.self, ClipboardAgentCommand.self, ServeWeb.self, ServeDocuments.self, ServeMedia.self, ShellInit.self, ServeTerminals.self, TerminalsCommand.self],
        groupedSubcommands: [
            // The everyday verbs at the top, as git's are: the same commands as under activities.
            CommandGroup(name: "everyday",
                         subcommands: [Activities.List.self, Activities.Search.self, Activities.Show.self, Activities.Continue.self]),
        ])

    public init() {}
}

/// Runs a command body, turning failures into a sentence on stderr and an exit status.
func perform(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as CLIError {
        printError("baton: \(error.description)")
        throw ExitCode(error.status)
    } catch let error as DBusError {
        printError("baton: \(error.message)")
        throw ExitCode(ExitStatus.invalidInput)
    }
}

/// One line on stderr.
func printError(_ line: String) {
    (line + "\n").utf8CString.withUnsafeBufferPointer { _ = write(2, $0.baseAddress, $0.count - 1) }
}

func printRecords(_ records: [DBusValue], _ output: Output, headers: [String], row: ([String: DBusValue]) -> [String]) {
    if output.json {
        print("[" + records.map { JSONText.value($0) }.joined(separator: ",") + "]")
        return
    }
    let rows = records.compactMap { $0.stringKeyedValue?.mapValues(\.unwrapped) }.map(row)
    if rows.isEmpty { print(output.dim("(none)")) } else { output.table(headers, rows) }
}

extension Dictionary where Key == String, Value == DBusValue {
    func text(_ key: String) -> String { self[key]?.stringValue ?? "" }
}

/// The fields of the contract's records, by name.
typealias Key = Records.Key

// MARK: - types

struct Types: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "types", abstract: "List, register and unregister activity types.",
        subcommands: [List.self, Register.self, Unregister.self], defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List registered activity types.")
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let records = try await global.daemon().call(Contract.Registry.listActivityTypes).first?.arrayValue ?? []
                printRecords(records, global.output, headers: ["TYPE", "APP", "HANDLER", "REQUIRED KEYS"]) { r in
                    [r.text(Key.type), r.text(Key.appID), r.text(Key.handler).isEmpty ? "-" : r.text(Key.handler),
                     ([String](dbusValue: r[Key.requiredKeys] ?? .strings([])) ?? []).joined(separator: ",")]
                }
            }
        }
    }

    struct Register: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "register",
            abstract: "Register (or replace) an activity type.",
            discussion: "Example: baton types register com.example.notes.document --app com.example.notes --required-keys id")
        @ArgumentParser.Argument(help: "The reverse-DNS type, like com.example.notes.document.") var type: String
        @Option(help: "The app the type belongs to (reverse-DNS).") var app: String
        @Option(help: "A human title for the type.") var title: String?
        @Option(help: "The bus name batond calls to continue activities of this type.") var handler: String?
        @Option(help: "The object path of the handler (default /).") var handlerPath: String?
        @Option(help: "Comma-separated payload keys every activity must carry.") var requiredKeys: String?
        @Option(help: "The name of the payload's type, for apps that decode it.") var payloadType: String?
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                var options: [String: String] = [:]
                options["title"] = title
                options["handler"] = handler
                options["handler_path"] = handlerPath
                options["required_keys"] = requiredKeys
                options["payload_type"] = payloadType
                _ = try await global.daemon().call(Contract.Registry.registerActivityType, [.string(type), .string(app), .stringMap(options)])
                if global.json { print("{\"registered\":\(StrictJSON.quote(type))}") } else { print("registered \(type) for \(app)") }
            }
        }
    }

    struct Unregister: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "unregister", abstract: "Unregister a type; its activities are removed too.")
        @ArgumentParser.Argument(help: "The type to remove.", completion: .custom(Completions.types)) var type: String
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                _ = try await global.daemon().call(Contract.Registry.unregisterActivityType, [.string(type)])
                print(global.json ? "{\"unregistered\":\(StrictJSON.quote(type))}" : "unregistered \(type)")
            }
        }
    }
}

// MARK: - activities

struct Activities: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "activities", abstract: "Advertise, list, search, continue and remove activities.",
        subcommands: [List.self, Show.self, Advertise.self, Update.self, Invalidate.self, Search.self, Continue.self, Explain.self, DeleteSaved.self],
        defaultSubcommand: List.self)

    static let headers = ["ID", "TYPE", "TITLE", "UPDATED"]
    static func row(_ r: [String: DBusValue]) -> [String] {
        [r.text(Key.id), r.text(Key.type), title(r), r[Key.updatedAt]?.uint64Value.map { relativeTime($0) } ?? ""]
    }

    /// The title, and for a track where it stopped: "Title — Artist (at 1:02 of 3:00)".
    static func title(_ r: [String: DBusValue]) -> String {
        let title = r.text(Key.title)
        guard r.text(Key.type) == Contract.Sources.Media.type, let track = MediaTrack(payload: r.text(Key.payload)) else { return title }
        let length = track.lengthUS > 0 ? " of \(MediaTrack.clockText(track.lengthUS))" : ""
        return "\(title) (at \(MediaTrack.clockText(track.positionUS))\(length))"
    }

    struct AdvertiseOptions: ParsableArguments {
        @Option(help: "What the activity shows, for matching a continuation to content.") var targetContentId: String?
        @Option(help: "An id to delete it by later (delete-saved).") var persistentId: String?
        @Option(name: .customLong("keyword"), help: "A search keyword; repeat for more.") var keywords: [String] = []
        @Option(help: "An http(s) URL where the activity can be continued in a browser.") var webpageUrl: String?
        @Option(help: "Seconds until the activity expires.") var expiresIn: UInt64?
        @Flag(inversion: .prefixedNo, help: "Whether the activity can be continued (advertise's default: yes).") var handoff: Bool?
        @Flag(inversion: .prefixedNo, help: "Whether Search finds it by title and keywords (advertise's default: no).") var searchable: Bool?
        @Flag(inversion: .prefixedNo, help: "Whether the history keeps it once it ends (advertise's default: yes).") var history: Bool?
        @Option(help: "The payload's type name.") var payloadType: String?
        @Option(name: .customLong("field"), help: ArgumentHelp(
            "Any field an app sets, as NAME=VALUE; repeat for more.",
            discussion: "The fields: \(ActivityField.optionNames.joined(separator: ", ")). Lists comma-separated, flags true or false.",
            valueName: "name=value")) var fields: [String] = []

        /// The options to send, only those given; a `--field` wins over its named option. Throws
        /// for a `--field` that is not NAME=VALUE of an option field.
        func options() throws -> [String: String] {
            var options: [String: String] = [:]
            options["target_content_id"] = targetContentId
            options["persistent_id"] = persistentId
            if !keywords.isEmpty { options["keywords"] = keywords.joined(separator: ",") }
            options["webpage_url"] = webpageUrl
            options["expires_in"] = expiresIn.map(String.init)
            if let handoff { options["eligible_for_handoff"] = handoff ? "true" : "false" }
            if let searchable { options["eligible_for_search"] = searchable ? "true" : "false" }
            if let history { options["eligible_for_history"] = history ? "true" : "false" }
            options["payload_type"] = payloadType
            for field in fields {
                let parts = field.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2, ActivityField.optionNames.contains(String(parts[0])) else {
                    throw CLIError(description: "--field takes NAME=VALUE, NAME one of \(ActivityField.optionNames.joined(separator: ", ")); not '\(field)'",
                                   status: ExitStatus.invalidInput)
                }
                options[String(parts[0])] = String(parts[1])
            }
            return options
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List live activities, newest first.")
        @Option(help: "Only this type.", completion: .custom(Completions.types)) var type: String?
        @Option(help: "Only this app's.", completion: .custom(Completions.apps)) var app: String?
        @Option(help: "Only the current activity of this scene (path or id).") var scene: String?
        @Option(help: "Only those with this persistent id.") var persistentId: String?
        @Option(help: "Only those showing this content (target_content_id).") var targetContentId: String?
        @Option(help: "Only this machine's (local), other machines' (remote), or one machine's (its name or id).") var device: String?
        @Option(help: "At most this many.") var limit: Int?
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                var filter: [String: String] = [:]
                filter["type"] = type
                filter["app_id"] = app
                if let scene { filter["scene"] = try await daemon.scenePath(scene).text }
                filter["persistent_id"] = persistentId
                filter["target_content_id"] = targetContentId
                filter["device"] = device
                filter["limit"] = limit.map(String.init)
                let records = try await daemon.call(Contract.Activities.list, [.stringMap(filter)]).first?.arrayValue ?? []
                // Where each came from, once another machine's are among them.
                guard records.contains(where: { $0.stringKeyedValue?[Key.device] != nil }) else {
                    return printRecords(records, global.output, headers: Activities.headers, row: Activities.row)
                }
                printRecords(records, global.output, headers: Activities.headers + ["FROM"]) { r in
                    Activities.row(r) + [r[Key.device] == nil ? "this machine" : r[Key.deviceName]?.stringValue ?? r.text(Key.device)]
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Show one activity with its payload.")
        @ArgumentParser.Argument(help: "The activity id, or enough of its beginning to name one.", completion: .custom(Completions.activityIDs))
        var id: String
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                guard let record = try await daemon.call(Contract.Activities.get, [.string(try await daemon.activityID(id))]).first else { return }
                if global.json { return print(JSONText.value(record)) }
                guard let activity = Records.activity(record) else {
                    throw CLIError(description: "batond sent a record without an id, type or app id", status: ExitStatus.failure)
                }
                // Every declared field that has a value, by its record name; the payload last.
                let deviceName = record.stringKeyedValue?[Key.deviceName]?.unwrapped.stringValue
                for declaration in ActivityField.declarations where declaration.field != .payload {
                    let shown: String? = switch (declaration.origin, declaration.get(activity)) {
                    case (.scene, .optionalText(let id)): id.map { SceneAddress.path(forID: $0) }
                    case (.device, .text(let device)): device.isEmpty ? nil : deviceName.map { "\($0) (\(device))" } ?? device
                    case (_, .text(let text)): text
                    case (_, .optionalText(let text)): text
                    case (_, .flag(let flag)): flag ? "yes" : "no"
                    case (_, .list(let items)): items.joined(separator: ", ")
                    case (_, .time(let time)): relativeTime(time)
                    case (_, .optionalTime(let time)): time.map { relativeTime($0) }
                    }
                    if let shown, !shown.isEmpty { print(global.output.bold(declaration.name.padding(20)) + shown) }
                }
                print(global.output.bold(Key.payload.padding(20)) + activity.payload)
            }
        }
    }

    struct Advertise: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "advertise",
            abstract: "Advertise an activity of a registered type; prints its id.",
            discussion: #"Example: baton activities advertise com.example.notes.document "Chapter 3" '{"id": "c3"}' --keyword draft --searchable"#)
        @ArgumentParser.Argument(help: "The registered type.", completion: .custom(Completions.types)) var type: String
        @ArgumentParser.Argument(help: "The title people see.") var title: String
        @ArgumentParser.Argument(help: "The JSON object payload, @FILE, or - for standard input.") var payload: String = "{}"
        @Option(help: "The advertising scene (path or id): the activity becomes its current one.") var scene: String?
        @OptionGroup var fields: AdvertiseOptions
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                var options = try fields.options()
                if let scene { options["scene"] = try await daemon.scenePath(scene).text }
                let payload = try readPayload(payload)
                let id = try await daemon.write(Contract.Activities.advertise, options: options) {
                    [.string(type), .string(title), .string(payload), .stringMap($0)]
                }.first?.stringValue ?? ""
                print(global.json ? "{\"id\":\(StrictJSON.quote(id))}" : id)
            }
        }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "update",
            abstract: "Merge payload keys into an activity and change its fields.",
            discussion: """
                The payload's top-level keys replace or extend the stored ones (with --replace-payload it replaces the \
                payload whole); omit it to change fields only. Only the options given change. --scene makes the activity \
                that scene's current one (and no other scene's); --resign makes it no scene's.
                """)
        @ArgumentParser.Argument(help: "The activity id, or enough of its beginning to name one.", completion: .custom(Completions.activityIDs))
        var id: String
        @ArgumentParser.Argument(help: "JSON object with the keys to merge, @FILE, or -.") var payload: String = ""
        @Option(help: "A new title.") var title: String?
        @Flag(help: "Replace the payload with the one given instead of merging into it.") var replacePayload = false
        @Option(help: ArgumentHelp("Make it the current activity of this scene (path or id).", valueName: "scene")) var scene: String?
        @Flag(help: "Make it no scene's current activity.") var resign = false
        @OptionGroup var fields: AdvertiseOptions
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            if scene != nil && resign { throw ValidationError("--scene and --resign contradict each other; give one") }
        }

        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                var options = try fields.options()
                options["title"] = title
                if replacePayload { options["replace_payload"] = "true" }
                if let scene { options["scene"] = try await daemon.scenePath(scene).text }
                if resign { options["scene"] = "" }
                let payload = try readPayload(payload)
                let id = try await daemon.activityID(id)
                _ = try await daemon.write(Contract.Activities.update, options: options) { [.string(id), .string(payload), .stringMap($0)] }
                print(global.json ? "{\"updated\":\(StrictJSON.quote(id))}" : "updated \(id)")
            }
        }
    }

    struct Invalidate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "invalidate", abstract: "Remove an activity.")
        @ArgumentParser.Argument(help: "The activity id, or enough of its beginning to name one.", completion: .custom(Completions.activityIDs))
        var id: String
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                _ = try await daemon.call(Contract.Activities.invalidate, [.string(try await daemon.activityID(id))])
                print(global.json ? "{\"invalidated\":\(StrictJSON.quote(id))}" : "invalidated \(id)")
            }
        }
    }

    struct Search: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "search", abstract: "Find searchable activities by title and keywords: title matches first, newest first.")
        @ArgumentParser.Argument(help: "Words to find (each matches as a word prefix).") var query: String
        @Option(help: "At most this many; without it, batond's default (50).") var limit: UInt32?
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let records = try await global.daemon().call(Contract.Activities.search, [.string(query), .uint32(limit ?? 0)]).first?.arrayValue ?? []
                printRecords(records, global.output, headers: Activities.headers, row: Activities.row)
            }
        }
    }

    struct Continue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "continue",
            abstract: "Continue an activity in a scene of its app (the app's handler fills it); prints the scene.",
            discussion: """
                Without --scene, the activity goes to the app's scene that already shows its content (a scene \
                whose current activity has the same target content id, or that handles it: baton scenes handles), \
                and to a new scene when none does or with --new-scene. When the app is not running and cannot be \
                started, the continuation waits in its scene (State pending) and reaches the app when it starts.

                Web pages and recent documents open in the browser or the app that used them, in no scene.

                With --device (a machine's name or id, from baton devices), the activity opens on that machine \
                instead, in its app there; the request is sent when the sync server can be reached.
                """)
        @ArgumentParser.Argument(help: "The activity id (live or in the history), or enough of its beginning to name one.", completion: .custom(Completions.continuableIDs))
        var id: String
        @Option(help: "Continue into this existing scene (path or id).") var scene: String?
        @Flag(help: "Always open a new scene.") var newScene = false
        @Flag(help: "Print the scene at once, before the app has it (its State is pending until then).") var noWait = false
        @Option(help: "Open it on that machine instead (its name or id; see baton devices).") var device: String?
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            if scene != nil && newScene { throw ValidationError("--scene and --new-scene contradict each other; give one") }
            if device != nil && (scene != nil || newScene || noWait) {
                throw ValidationError("--device opens the activity on another machine, which chooses the scene; drop --scene, --new-scene and --no-wait")
            }
        }

        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                var options: [String: String] = [:]
                if let scene { options["scene"] = try await daemon.scenePath(scene).text }
                if newScene { options["new_scene"] = "true" }
                if noWait { options["wait"] = "false" }
                options["device"] = device
                let id = try await daemon.activityID(id, includingHistory: true)
                let path = try await daemon.write(Contract.Activities.continue, options: options) { [.string(id), .stringMap($0)] }
                    .first?.stringValue ?? ""
                if let device {
                    return print(global.json ? "{\"device\":\(StrictJSON.quote(device))}" : "asked \(device) to continue it")
                }
                // "/": opened outside any scene (a web page in the browser, a document in its app).
                if path == "/" { return print(global.json ? "{\"scene\":null}" : "opened it (in the browser or the app that used it)") }
                print(global.json ? "{\"scene\":\(StrictJSON.quote(path))}" : path)
            }
        }
    }

    struct Explain: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "explain", abstract: "Say why an activity can or cannot be continued or found, and how its last continuation went.",
            discussion: "Works for activities that ended too: for 7 days, and for as long as the history keeps them (30 days by default).")
        @ArgumentParser.Argument(help: "The activity id (live or in the history), or enough of its beginning to name one.", completion: .custom(Completions.continuableIDs))
        var id: String
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                guard let record = try await daemon.call(Contract.Activities.explain, [.string(try await daemon.activityID(id, includingHistory: true))]).first
                else { return }
                if global.json { return print(JSONText.value(record)) }
                guard let explained = Records.Explanation(record: record) else {
                    throw CLIError(description: "batond sent an explanation without an id or a state", status: ExitStatus.failure)
                }
                let output = global.output
                print(output.bold("state".padding(14)) + explained.state)
                print(output.bold("continuable".padding(14)) + (explained.continuable ? "yes" : "no"))
                print(output.bold("searchable".padding(14)) + (explained.searchable ? "yes" : "no"))
                for reason in explained.reasons { print("  - " + reason) }
                if let last = explained.lastContinuation {
                    print(output.bold("continued".padding(14)) + "\(last.state) in \(SceneAddress.path(forID: last.scene)), "
                          + relativeTime(last.at) + (last.error.isEmpty ? "" : ": " + last.error))
                }
            }
        }
    }

    struct DeleteSaved: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "delete-saved", abstract: "Delete activities by persistent id, or all of an app's with --app.")
        @ArgumentParser.Argument(help: "Persistent ids.") var persistentIds: [String] = []
        @Option(help: "Delete every activity of this app instead.") var app: String?
        @OptionGroup var global: GlobalOptions
        func validate() throws {
            if (app == nil) == persistentIds.isEmpty { throw ValidationError("give persistent ids, or --app APP, not both") }
        }
        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                let count = try await (app != nil
                    ? daemon.call(Contract.Activities.deleteAllSaved, [.string(app ?? "")])
                    : daemon.call(Contract.Activities.deleteSaved, [.strings(persistentIds)])).first?.uint32Value ?? 0
                print(global.json ? "{\"deleted\":\(count)}" : "deleted \(counted(count, "activity", "activities"))")
            }
        }
    }
}

extension String {
    func padding(_ width: Int) -> String { count >= width ? self + " " : self + String(repeating: " ", count: width - count) }
}
