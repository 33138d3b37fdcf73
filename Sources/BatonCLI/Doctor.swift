import BatonContract
import ArgumentParser
import BatonCore
import DBus
import Glibc

/// `baton doctor`: checks everything Baton needs and says how to fix what is wrong.
struct Doctor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check the bus, the daemon, sync, the installed unit and service files, and the state directory.",
        discussion: "Exits 0 when everything is in order, 1 otherwise. It reads files and asks the bus; it changes nothing.")
    @OptionGroup var global: GlobalOptions

    struct Check {
        let name: String
        let ok: Bool
        let detail: String
        let fix: String?
    }

    func run() async throws {
        let environment = ProcessEnvironment.current()
        var checks: [Check] = []
        let home = environment["HOME"] ?? ""
        let configHome = environment["XDG_CONFIG_HOME"] ?? home + "/.config"
        let dataHome = environment["XDG_DATA_HOME"] ?? home + "/.local/share"
        let stateHome = environment["XDG_STATE_HOME"] ?? home + "/.local/state"

        var daemon: Daemon?
        do {
            daemon = try global.daemon()
            checks.append(Check(name: "session bus", ok: true, detail: "reachable", fix: nil))
        } catch let error as CLIError {
            checks.append(Check(name: "session bus", ok: false, detail: error.description,
                                fix: "run baton in your desktop session, or start one with: dbus-run-session -- $SHELL"))
        }
        if let daemon {
            let owner = (try? await daemon.connection.nameOwner(Daemon.busName)) ?? nil
            let activatable = (try? await daemon.connection.call(
                "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "ListActivatableNames"))?
                .first?.arrayValue?.contains(.string(Daemon.busName)) ?? false
            switch (owner, activatable) {
            case (let owner?, _):
                checks.append(Check(name: "batond", ok: true, detail: "running as \(owner)", fix: nil))
                // Asked only of a running batond: a question would start one.
                if let facts = try? await daemon.properties(of: Contract.Interface.sync) { checks.append(Self.syncCheck(facts)) }
                let sources = (try? await daemon.properties(of: Contract.Interface.status))?[Contract.Status.Property.sources]?.arrayValue ?? []
                if sources.contains(.string(Contract.Sources.Clipboard.name)) {
                    let names = (try? await daemon.connection.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "ListNames"))?
                        .first?.arrayValue?.compactMap(\.stringValue) ?? []
                    checks.append(Self.clipboardCheck(agents: names.filter { $0.hasPrefix("org.baton.ClipboardAgent.") }.count))
                }
            case (nil, true): checks.append(Check(name: "batond", ok: true, detail: "not running; the bus starts it on first use", fix: nil))
            case (nil, false):
                checks.append(Check(name: "batond", ok: false, detail: "not running, and the bus cannot start it",
                                    fix: "install it with scripts/install, then: systemctl --user enable --now batond"))
            }
        }

        let unit = configHome + "/systemd/user/batond.service"
        checks.append(access(unit, R_OK) == 0
            ? Check(name: "systemd unit", ok: true, detail: unit, fix: nil)
            : Check(name: "systemd unit", ok: false, detail: "\(unit) is missing", fix: "run scripts/install from the Baton repository"))

        let service = dataHome + "/dbus-1/services/org.baton.Handoff1.service"
        if let exec = Self.execPath(ofServiceFile: service) {
            checks.append(access(exec, X_OK) == 0
                ? Check(name: "D-Bus activation", ok: true, detail: "\(service) runs \(exec)", fix: nil)
                : Check(name: "D-Bus activation", ok: false, detail: "\(service) names \(exec), which is not an executable",
                        fix: "run scripts/install again"))
        } else {
            checks.append(Check(name: "D-Bus activation", ok: false, detail: "\(service) is missing or has no Exec=",
                                fix: "run scripts/install from the Baton repository"))
        }

        let directory = stateHome + "/baton"
        // The running daemon's own file, which --database may have moved elsewhere.
        var database = directory + "/baton.sqlite"
        if let daemon, let running = try? await daemon.connection.call(
            Daemon.busName, Daemon.root, "org.freedesktop.DBus.Properties", "Get",
            [.string(Contract.Interface.status), .string(Contract.Status.Property.databasePath)]).first?.unwrapped.stringValue, !running.isEmpty {
            database = running
        }
        checks.append(Self.quarantineCheck(database))
        var info = stat()
        if lstat(directory, &info) != 0 {
            checks.append(Check(name: "state directory", ok: true, detail: "\(directory) does not exist yet; batond creates it", fix: nil))
        } else if info.st_uid != getuid() || info.st_mode & 0o077 != 0 || info.st_mode & S_IFMT != S_IFDIR {
            checks.append(Check(name: "state directory", ok: false,
                                detail: "\(directory) is not a private directory of yours (mode \(String(info.st_mode & 0o777, radix: 8)))",
                                fix: "chmod 700 \(directory) (batond refuses it otherwise)"))
        } else {
            let database = directory + "/baton.sqlite"
            let writable = access(database, F_OK) != 0 || access(database, W_OK) == 0
            checks.append(writable
                ? Check(name: "state directory", ok: true, detail: "\(directory), private", fix: nil)
                : Check(name: "state directory", ok: false, detail: "\(database) is not writable", fix: "chmod 600 \(database)"))
        }

        let output = global.output
        if global.json {
            let items = checks.map { check in
                "{\"check\":\(StrictJSON.quote(check.name)),\"ok\":\(check.ok),\"detail\":\(StrictJSON.quote(check.detail))"
                    + (check.fix.map { ",\"fix\":\(StrictJSON.quote($0))" } ?? "") + "}"
            }
            print("[" + items.joined(separator: ",") + "]")
        } else {
            for check in checks {
                print("\(check.ok ? "ok  " : "FAIL") \(output.bold(check.name)): \(check.detail)")
                if let fix = check.fix { print("     fix: \(fix)") }
            }
        }
        if checks.contains(where: { !$0.ok }) { throw ExitCode(ExitStatus.failure) }
    }

    /// Databases batond moved aside because it could not trust them, and one it found
    /// damaged while running (moved aside at its next start).
    /// Sync across machines: fine when off, online or connecting; a failure when batond cannot
    /// reach its server, or its synced folder is not there.
    /// Whether this is a GNOME session on Wayland, where no program outside the focused window
    /// can see or set the clipboard (Mutter has no data-control protocol).
    static var isGNOMEOnWayland: Bool {
        let environment = { (name: String) in getenv(name).map { String(cString: $0) } ?? "" }
        let wayland = environment("XDG_SESSION_TYPE") == "wayland" || (!environment("WAYLAND_DISPLAY").isEmpty && environment("DISPLAY").isEmpty)
        return wayland && environment("XDG_CURRENT_DESKTOP").uppercased().contains("GNOME")
    }

    static let gnomeOnWayland = "GNOME on Wayland lets no background program watch or set the clipboard: copies here cannot be sent or offered"

    /// The clipboard source, when it is on: an agent watching this session's clipboard, or why none can.
    static func clipboardCheck(agents: Int) -> Check {
        if agents > 0 { return Check(name: "clipboard", ok: true, detail: "on; \(agents) agent(s) watching a display's clipboard", fix: nil) }
        if isGNOMEOnWayland {
            return Check(name: "clipboard", ok: false, detail: "on, but " + gnomeOnWayland,
                         fix: "use an X11 (GNOME on Xorg) session on this machine, or baton sources disable clipboard")
        }
        return Check(name: "clipboard", ok: false, detail: "on, but no clipboard agent runs in this session",
                     fix: "systemctl --user start baton-clipboard (or run: baton clipboard-agent)")
    }

    static func syncCheck(_ facts: [String: DBusValue]) -> Check {
        typealias Name = Contract.Sync.Property
        let state = facts.text(Name.state), name = facts.text(Name.deviceName)
        let waiting = facts[Name.outbox]?.uint32Value ?? 0
        let queue = counted(waiting, "change", "changes") + " waiting to be sent"
        switch state {
        case "off": return Check(name: "sync", ok: true, detail: "off (baton sync init URL sets it up)", fix: nil)
        case "offline" where facts.text(Name.transport) == "folder":
            return Check(name: "sync", ok: false, detail: "offline as \(name): the synced folder is not there or not writable; \(queue)",
                         fix: "batond's log names the folder (journalctl --user -u batond); mount its disk or let batond write there, and sync resumes by itself")
        case "offline":
            return Check(name: "sync", ok: false, detail: "offline as \(name): batond cannot reach the sync server; \(queue)",
                         fix: "batond's log says why (journalctl --user -u batond); once the server answers and the URL's login works, it reconnects by itself")
        default: return Check(name: "sync", ok: true, detail: "\(state) as \(name); \(queue)", fix: nil)
        }
    }

    static func quarantineCheck(_ database: String) -> Check {
        let slash = database.lastIndex(of: "/") ?? database.startIndex
        let directory = slash == database.startIndex ? "." : String(database[..<slash])
        let prefix = String(database[database.index(after: slash)...]) + ".corrupt-"
        var moved: [String] = []
        if let listing = opendir(directory) {
            defer { closedir(listing) }
            while let entry = readdir(listing) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if name.hasPrefix(prefix), !name.hasSuffix("-wal"), !name.hasSuffix("-shm") { moved.append(directory + "/" + name) }
            }
        }
        moved.sort()
        if access(database + ".damaged", F_OK) == 0 {
            return Check(name: "database", ok: false, detail: "\(database) was found damaged while batond used it; batond writes nothing more to it",
                         fix: "restart batond (systemctl --user restart batond): it moves the file aside and starts a fresh one")
        }
        guard let newest = moved.last else { return Check(name: "database", ok: true, detail: "\(database), nothing quarantined", fix: nil) }
        return Check(name: "database", ok: false,
                     detail: "batond could not trust \(moved.count == 1 ? "a database" : "\(moved.count) databases") and moved it aside: "
                        + moved.joined(separator: ", "),
                     fix: "try to recover its data with: sqlite3 \(newest) .recover | sqlite3 recovered.sqlite; "
                        + "then delete the file with its -wal and -shm")
    }

    /// The program a D-Bus service file starts, or nil when the file is missing.
    static func execPath(ofServiceFile path: String) -> String? {
        guard let contents = readFile(path) else { return nil }
        for line in contents.split(separator: "\n") where line.hasPrefix("Exec=") {
            return line.dropFirst("Exec=".count).split(separator: " ").first.map(String.init)
        }
        return nil
    }
}
