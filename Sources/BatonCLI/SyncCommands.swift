import ArgumentParser
import BatonContract
import BatonCore
import DBus
import Glibc

// MARK: - sync

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync", abstract: "Sync activities across your machines: through a folder you already sync, or a PostgreSQL server you run.",
        discussion: """
            Each machine keeps its own database and works without the others; what changes is sent when they \
            can be reached. Everything meaningful is encrypted on the machine with your key before it leaves: \
            the folder or the server sees device ids, sequence numbers, times and ciphertext.

            Through a folder that Syncthing, Nextcloud or a similar tool keeps the same on your machines: on the \
            first, baton sync init file:///home/you/Sync/baton (or just the path), and write down the recovery \
            words it prints; on every other, baton sync join with that folder's path there, and type them. Each \
            machine writes only files of its own in it, so the tool never meets a conflict.

            Through a server: an administrator runs scripts/sync-server-setup on the server and gives each machine its \
            URL (postgres://ROLE:PASSWORD@HOST:5432/DATABASE). On the first machine: baton sync init URL, and \
            write down the recovery words it prints. On every other machine: baton sync join URL, and type them.
            """,
        subcommands: [Init.self, Join.self, Status.self, Revoke.self, Leave.self], defaultSubcommand: Status.self)

    struct Init: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "init", abstract: "Set up your first machine: make your key and print its recovery words, once.")
        @ArgumentParser.Argument(help: "The synced folder (file:///PATH or a path), or this machine's postgres:// URL from scripts/sync-server-setup add-device.")
        var url: String
        @Option(help: "What to call this machine on the others (default: its host name).") var name: String?
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let words = try await global.daemon().call(Contract.Sync.initialize, [.string(url), .stringMap(Sync.options(name))])
                    .first?.stringValue ?? ""
                if global.json { return print("{\"recovery_words\":\(StrictJSON.quote(words))}") }
                print("Sync is on. Your recovery words (shown this once; every other machine needs them to join):")
                print("")
                print("    " + global.output.bold(words))
                print("")
                print("Keep them somewhere safe: whoever has them and a login to the server can read your activities.")
            }
        }
    }

    struct Join: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "join", abstract: "Add this machine to your others, with the recovery words `baton sync init` printed.",
            discussion: "The words are read from standard input (asked for when it is a terminal). Wrong words change nothing.")
        @ArgumentParser.Argument(help: "The synced folder here (file:///PATH or a path), or this machine's postgres:// URL from scripts/sync-server-setup add-device.")
        var url: String
        @Option(help: "What to call this machine on the others (default: its host name).") var name: String?
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                if isatty(0) != 0 { printError("Recovery words: ") }
                let words = readAll(from: 0).split(whereSeparator: { $0.isNewline }).first.map(String.init) ?? ""
                guard !words.isEmpty else {
                    throw CLIError(description: "no recovery words were given on standard input", status: ExitStatus.invalidInput)
                }
                _ = try await global.daemon().call(Contract.Sync.join, [.string(url), .string(words), .stringMap(Sync.options(name))])
                print(global.json ? "{\"joined\":true}" : "This machine joined; its activities and the others' now follow each other.")
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "status", abstract: "Is sync on, connected, and is anything waiting to be sent?")
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                typealias Name = Contract.Sync.Property
                let facts = try await global.daemon().properties(of: Contract.Interface.sync)
                let state = facts.text(Name.state)
                let outbox = facts[Name.outbox]?.uint32Value ?? 0
                let last = facts[Name.lastSyncAt]?.uint64Value ?? 0
                let transport = facts.text(Name.transport)
                if global.json {
                    return print("{\"state\":\(StrictJSON.quote(state)),\"transport\":\(StrictJSON.quote(transport)),\"device_id\":\(StrictJSON.quote(facts.text(Name.deviceID))),"
                        + "\"device_name\":\(StrictJSON.quote(facts.text(Name.deviceName))),\"last_sync_at\":\(last),\"outbox\":\(outbox)}")
                }
                guard state != "off" else { return print("sync is off; set it up with baton sync init URL (see baton sync --help)") }
                typealias Key = Contract.Sync.DeviceKey
                let devices = (try await global.daemon().call(Contract.Sync.devices).first?.arrayValue ?? [])
                    .compactMap { $0.stringKeyedValue?.mapValues(\.unwrapped) }
                let folder = devices.first { $0[Key.thisDevice]?.boolValue == true }?[Key.folder]?.stringValue
                let place = transport == "folder" ? "the synced folder \(folder ?? "")" : "a PostgreSQL server"
                print("sync is \(state) through \(place) as \(facts.text(Name.deviceName)) (\(facts.text(Name.deviceID)))")
                print("last synced \(last == 0 ? "never" : relativeTime(last)); \(counted(outbox, "change", "changes")) waiting to be sent")
                let others = devices.filter { $0[Key.thisDevice]?.boolValue != true }
                for other in others {
                    let seen = other[Key.lastSeen]?.uint64Value ?? 0
                    print("  \(other.text(Key.name)): last seen \(seen == 0 ? "never" : relativeTime(seen))\(other[Key.revoked]?.boolValue == true ? " (revoked)" : "")")
                }
                if state == "offline" {
                    print(transport == "folder" ? "the synced folder is not there or not writable; batond's log says which"
                        : "batond cannot reach the sync server; baton doctor says what to check")
                }
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke", abstract: "Shut a lost or sold machine out: it cannot read what is synced from now on.",
            discussion: """
                Begins a new key epoch whose key only your other machines get, and marks the machine revoked on \
                the server, so it can add nothing. Then remove its login on the server too: \
                scripts/sync-server-setup remove-device ROLE.
                """)
        @ArgumentParser.Argument(help: "The machine's name or id (see baton devices).") var device: String
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                _ = try await global.daemon().call(Contract.Sync.revokeDevice, [.string(device)])
                print(global.json ? "{\"revoked\":\(StrictJSON.quote(device))}" : "revoked \(device); what is synced from now on is sealed with a key it does not have")
            }
        }
    }

    struct Leave: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "leave", abstract: "Stop syncing this machine; the other machines' activities are removed here.",
            discussion: """
                What this machine changed and has not sent yet (baton sync status counts it) never reaches \
                the other machines once it left: then baton asks first on a terminal; elsewhere give --yes.
                """)
        @Flag(help: "Leave even when changes are still waiting to be sent.") var yes = false
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                if !yes {
                    typealias Name = Contract.Sync.Property
                    let facts = try await daemon.properties(of: Contract.Interface.sync)
                    let waiting = facts[Name.outbox]?.uint32Value ?? 0
                    if waiting > 0 {
                        let what = counted(waiting, "change made here has", "changes made here have") + " not reached "
                            + "the sync server yet (sync is \(facts.text(Name.state))) and would never reach your other machines"
                        guard isatty(0) == 1 else {
                            throw CLIError(description: "\(what); wait until baton sync status shows none waiting, or give --yes to leave anyway",
                                           status: ExitStatus.invalidInput)
                        }
                        print("\(what). Leave anyway? [y/N] ", terminator: "")
                        guard let answer = readLine(), answer.lowercased().hasPrefix("y") else { return print("still syncing") }
                    }
                }
                _ = try await daemon.call(Contract.Sync.leave)
                print(global.json ? "{\"left\":true}" : "sync is off on this machine")
            }
        }
    }

    static func options(_ name: String?) -> [String: String] {
        name.map { ["device_name": $0] } ?? [:]
    }
}

// MARK: - devices

struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "devices", abstract: "List your machines that sync.")
    @OptionGroup var global: GlobalOptions
    func run() async throws {
        typealias Key = Contract.Sync.DeviceKey
        try await perform {
            let records = try await global.daemon().call(Contract.Sync.devices).first?.arrayValue ?? []
            printRecords(records, global.output, headers: ["NAME", "ID", "LAST SEEN"]) { r in
                [r.text(Key.name) + (r[Key.thisDevice]?.boolValue == true ? " (this machine)" : ""), r.text(Key.id),
                 (r[Key.lastSeen]?.uint64Value).map { $0 == 0 ? "-" : relativeTime($0) } ?? "-"]
            }
        }
    }
}

