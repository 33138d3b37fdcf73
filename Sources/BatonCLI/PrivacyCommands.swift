import ArgumentParser
import BatonContract
import BatonCore
import DBus
import Glibc

/// `baton block`: refuse an app's activities from now on.
struct Block: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "block",
        abstract: "Refuse an app's activities from now on (its Advertise and Update answer Blocked).",
        discussion: "What the app has already stays until it ends; baton forget removes it. baton status lists blocked apps.")
    @ArgumentParser.Argument(help: "The app id, such as com.example.notes.", completion: .custom(Completions.apps)) var app: String
    @OptionGroup var global: GlobalOptions
    func run() async throws {
        try await perform {
            _ = try await global.daemon().call(Contract.Privacy.blockApp, [.string(app)])
            print(global.json ? "{\"blocked\":\(StrictJSON.quote(app))}" : "blocked \(app): its new activities are refused (baton unblock \(app) to allow them)")
        }
    }
}

/// `baton pause`: record nothing for a while.
struct Pause: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Stop recording: what apps advertise from now on is kept in memory only.",
        discussion: """
            While paused, activities can still be listed, found and continued, but nothing of them is \
            written to disk, to the history or to your other machines, and they are gone at baton resume \
            (or when the pause ends). The pause survives a restart of batond.
            """)
    @Option(name: .customLong("for"), help: ArgumentHelp("End the pause by itself after this long: 90s, 30m, 2h, 7d.", valueName: "duration"))
    var duration: String?
    @OptionGroup var global: GlobalOptions
    func run() async throws {
        try await perform {
            let seconds = try duration.map { try Duration.seconds(parsing: $0, option: "--for") } ?? 0
            _ = try await global.daemon().call(Contract.Privacy.pause, [.uint64(seconds)])
            if global.json { return print("{\"paused\":true,\"seconds\":\(seconds)}") }
            print(seconds == 0 ? "paused: nothing is recorded until baton resume"
                  : "paused for \(duration ?? ""): nothing is recorded until then (or baton resume)")
        }
    }
}

/// `baton resume`.
struct Resume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume", abstract: "Record again; what was advertised while paused is forgotten.")
    @OptionGroup var global: GlobalOptions
    func run() async throws {
        try await perform {
            _ = try await global.daemon().call(Contract.Privacy.resume)
            print(global.json ? "{\"paused\":false}" : "recording again")
        }
    }
}

/// `baton unblock`.
struct Unblock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "unblock", abstract: "Allow a blocked app's activities again.")
    @ArgumentParser.Argument(help: "The app id.", completion: .custom(Completions.apps)) var app: String
    @OptionGroup var global: GlobalOptions
    func run() async throws {
        try await perform {
            _ = try await global.daemon().call(Contract.Privacy.unblockApp, [.string(app)])
            print(global.json ? "{\"unblocked\":\(StrictJSON.quote(app))}" : "unblocked \(app)")
        }
    }
}

/// `baton forget`: remove everything of an app.
struct Forget: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "forget",
        abstract: "Remove everything Baton keeps of an app: types, activities, history, scenes and their storage.",
        discussion: """
            Its live activities end on your other machines too (sync). It cannot be undone: on a terminal \
            baton asks first; elsewhere give --yes. To keep the app from advertising again: baton block. \
            A source's name stands for its app: baton forget terminals --yes forgets every shell the terminals source recorded.
            """)
    @ArgumentParser.Argument(help: "The app id, or a source's name (recent-documents, media, terminals).", completion: .custom(Completions.apps))
    var named: String
    @Flag(help: "Do not ask.") var yes = false
    @OptionGroup var global: GlobalOptions

    /// The sources whose activities belong to an app of Baton's own, by the source's name.
    static let sourceApps = [
        Contract.Sources.RecentDocuments.name: Contract.Sources.RecentDocuments.app, Contract.Sources.Media.name: Contract.Sources.Media.app,
        Contract.Sources.Terminals.name: Contract.Sources.Terminals.app,
    ]

    func run() async throws {
        let app = Self.sourceApps[named] ?? named
        try await perform {
            if !yes {
                guard isatty(0) == 1 else {
                    throw CLIError(description: "forgetting \(app) cannot be undone; give --yes to do it without asking", status: ExitStatus.invalidInput)
                }
                print("Forget everything of \(app)? This cannot be undone. [y/N] ", terminator: "")
                guard let answer = readLine(), answer.lowercased().hasPrefix("y") else { return print("nothing forgotten") }
            }
            let reply = try await global.daemon().call(Contract.Privacy.forgetApp, [.string(app)])
            let counts = Counts(reply)
            if global.json { return print(counts.json) }
            print("forgot \(app): " + [
                counts.text("types", "activity type", "activity types"), counts.text("activities", "live activity", "live activities"),
                counts.text("history", "past activity", "past activities"), counts.text("scenes", "scene", "scenes"),
                counts.text("values", "stored value", "stored values"),
            ].joined(separator: ", "))
        }
    }
}

/// `baton notifications [on|off]`.
struct Notifications: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notifications",
        abstract: "Say whether batond notifies of activities from your other machines, or turn that on or off.",
        discussion: """
            When an activity that can be continued arrives from another machine, batond shows one \
            notification ("continue from your laptop"); its Continue action continues it here. None \
            while recording is paused, for a blocked app, or for what arrives more than a few minutes \
            old. The setting survives restarts.
            """)
    @ArgumentParser.Argument(help: ArgumentHelp("on or off; without it, the current setting.", valueName: "on|off"))
    var setting: Setting?
    @OptionGroup var global: GlobalOptions

    enum Setting: String, ExpressibleByArgument, CaseIterable { case on, off }

    func run() async throws {
        try await perform {
            let daemon = try global.daemon()
            if let setting {
                _ = try await daemon.call(Contract.Status.setNotifications, [.boolean(setting == .on)])
            }
            let on = try await daemon.properties(of: Contract.Interface.status)[Contract.Status.Property.notifications]?.boolValue ?? true
            print(global.json ? "{\"notifications\":\(on)}" : "notifications of other machines' activities: \(on ? "on" : "off")")
        }
    }
}
