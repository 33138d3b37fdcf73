import ArgumentParser
import BatonContract
import BatonCore
import DBus

/// `baton history`: activities that ended, to find and continue them later.
struct History: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "List, search and clear the activities that ended (continue one with: baton activities continue ID).",
        discussion: """
            When an activity is invalidated, expires or is removed to keep its app under its quota, \
            batond keeps a copy in the history, unless it was advertised with eligible_for_history=false \
            (baton activities advertise --no-history). The history keeps 30 days and 64 MiB by default \
            (batond --history-days and --history-size); the activities that ended first go first.
            """,
        subcommands: [List.self, Search.self, Clear.self], defaultSubcommand: List.self)

    static let headers = ["ID", "TYPE", "TITLE", "ENDED", "HOW"]
    static func row(_ r: [String: DBusValue]) -> [String] {
        [r.text(Key.id), r.text(Key.type), r.text(Key.title), r[Key.endedAt]?.uint64Value.map { relativeTime($0) } ?? "", r.text(Key.endReason)]
    }

    /// Prints the past activities `History` gives for `options`.
    static func show(_ options: [String: String], limit: Int?, _ global: GlobalOptions) async throws {
        var options = options
        options["limit"] = limit.map(String.init)
        let records = try await global.daemon().call(Contract.Archive.history, [.stringMap(options)]).first?.arrayValue ?? []
        printRecords(records, global.output, headers: headers, row: row)
    }

    /// The filters list and clear share.
    struct Filter: ParsableArguments {
        @Option(help: "Only this app's.", completion: .custom(Completions.apps)) var app: String?
        @Option(help: "Only this type.", completion: .custom(Completions.types)) var type: String?
        @Option(help: ArgumentHelp("Only those that ended within this long: 90s, 30m, 2h, 7d.", valueName: "duration")) var since: String?

        func options() throws -> [String: String] {
            var filter: [String: String] = [:]
            filter["app_id"] = app
            filter["type"] = type
            if let since {
                let seconds = try Duration.seconds(parsing: since, option: "--since")
                let now = WallClock.nowMicroseconds()
                filter["since"] = String(now > seconds * 1_000_000 ? now - seconds * 1_000_000 : 0)
            }
            return filter
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the activities that ended, the most recent first.")
        @OptionGroup var filter: Filter
        @Option(help: "At most this many.") var limit: Int?
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform { try await History.show(try filter.options(), limit: limit, global) }
        }
    }

    struct Search: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "search", abstract: "Find activities that ended by title and keywords (searchable ones), the most recent first.")
        @ArgumentParser.Argument(help: "Words to find (each matches as a word prefix).") var query: String
        @OptionGroup var filter: Filter
        @Option(help: "At most this many.") var limit: Int?
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform { try await History.show(try filter.options().merging(["query": query]) { $1 }, limit: limit, global) }
        }
    }

    struct Clear: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "clear", abstract: "Remove activities from the history: those the filters match, or --all.")
        @OptionGroup var filter: Filter
        @Option(help: "Only those whose title or keywords match these words.") var query: String?
        @Flag(help: "Remove the whole history.") var all = false
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                var options = try filter.options()
                options["query"] = query
                guard all != !options.isEmpty else {
                    throw CLIError(description: all ? "give --all or filters, not both" : "give filters (--app, --type, --since, --query), or --all to remove the whole history",
                                   status: ExitStatus.invalidInput)
                }
                let removed = try await global.daemon().call(Contract.Archive.clearHistory, [.stringMap(options)]).first?.uint32Value ?? 0
                print(global.json ? "{\"removed\":\(removed)}" : "removed \(counted(removed, "activity", "activities")) from the history")
            }
        }
    }
}

extension Duration {
    /// Seconds in `text`: a whole number with a unit, s, m, h or d (`90s`, `30m`, `2h`, `7d`).
    static func seconds(parsing text: String, option: String) throws -> UInt64 {
        let units: [Character: UInt64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        guard let unit = text.last.flatMap({ units[$0] }), let amount = UInt64(text.dropLast()), amount > 0,
              amount <= UInt64.max / 1_000_000 / unit else {
            throw CLIError(description: "\(option) takes a duration such as 90s, 30m, 2h or 7d, not '\(text)'", status: ExitStatus.invalidInput)
        }
        return amount * unit
    }
}
