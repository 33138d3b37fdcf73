import ArgumentParser
import BatonContract
import BatonCore
import DBus
import Glibc

/// `baton sources`: batond's sources of activities from apps that know nothing of Baton.
struct Sources: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sources",
        abstract: "List the sources of activities from apps that know nothing of Baton, or turn one on or off.",
        discussion: """
            web-pages: the browser extension's pages and baton open (on; baton block org.baton.Web stops them).
            recent-documents: each document an app records as recently used (~/.local/share/recently-used.xbel, and KDE's \
            ~/.local/share/RecentDocuments/), \
            as an activity that continuing opens in that app. Off until turned on: file names would start \
            reaching your other machines. Turning it off keeps what it recorded; baton forget \
            org.baton.RecentDocuments --yes removes that.
            media: each track a media player plays (any MPRIS 2 player that says its track's URL, as mpv does), as an activity kept at \
            the position it reached, that continuing plays from there. Off until turned on; baton forget org.baton.Media \
            --yes removes what it recorded.
            clipboard: what you copy (text, PNG images), offered for 2 minutes on the clipboards of your other machines \
            where it is on too, sealed on the way; a password manager's copies never leave. Needs sync (baton sync init) \
            and the session's clipboard agent (baton-clipboard.service, started with the session), in X11 sessions and \
            under Wayland compositors with a data-control protocol (sway and KWin have it); GNOME on \
            Wayland offers no way for it.
            terminals: each shell open in a terminal window (GNOME Terminal, Console, Konsole, kitty, foot, Alacritty, \
            xterm, …), titled by its directory, kept current as you cd, ended when it exits; continuing opens the same terminal \
            there (an ssh session logs in to the same host). Off until turned on. Shells in ~/.ssh and ~/.gnupg are never \
            recorded (the setting blocked-paths); baton shell-init says how a shell tells its directory at once; baton \
            terminals restore reopens the shells open at the last logout or restart; baton forget terminals --yes removes \
            what it recorded.
            A source's settings: baton sources show SOURCE lists them with their values; baton sources set SOURCE NAME VALUE \
            changes one (seconds and bytes as plain numbers).
            Examples: baton sources; baton sources enable recent-documents; baton sources enable media; baton sources disable media; \
            baton sources enable clipboard; baton sources show clipboard; baton sources set clipboard lifetime 300; \
            baton sources set terminals blocked-paths '~/.ssh:~/.gnupg:~/secret'

            """)
    @ArgumentParser.Argument(help: ArgumentHelp("enable, disable, show or set; nothing to list.", valueName: "action")) var action: String?
    @ArgumentParser.Argument(help: ArgumentHelp("The source: recent-documents, media, clipboard or terminals.", valueName: "source")) var source: String?
    @ArgumentParser.Argument(help: ArgumentHelp("With set: the setting's name.", valueName: "name")) var name: String?
    @ArgumentParser.Argument(help: ArgumentHelp("With set: its new value.", valueName: "value")) var value: String?
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        switch action {
        case "set" where source == nil || name == nil || value == nil:
            throw ValidationError("set takes a source, a setting and a value: baton sources set clipboard lifetime 300")
        case "set": break
        case _ where name != nil:
            throw ValidationError("only set takes a setting and a value")
        default: break
        }
    }

    func run() async throws {
        try await perform {
            let daemon = try global.daemon()
            switch (action, source) {
            case (nil, _):
                let on = try await daemon.properties(of: Contract.Interface.status)[Contract.Status.Property.sources]?.arrayValue?.compactMap(\.stringValue) ?? []
                let blocked = try await daemon.properties(of: Contract.Interface.privacy)[Contract.Privacy.Property.blockedApps]?.arrayValue?
                    .compactMap(\.stringValue) ?? []
                let recentDocuments = Contract.Sources.RecentDocuments.name, media = Contract.Sources.Media.name
                let clipboard = Contract.Sources.Clipboard.name, terminals = Contract.Sources.Terminals.name
                let rows = [
                    ("web-pages", blocked.contains(WebPage.app) ? "blocked" : "on", "the browser extension's pages, baton open"),
                    (recentDocuments, on.contains(recentDocuments) ? "on" : "off", "documents apps record as recently used"),
                    (media, on.contains(media) ? "on" : "off", "tracks media players play, where they stopped"),
                    (clipboard, on.contains(clipboard) ? "on" : "off", "copies, offered on your other machines' clipboards"),
                    (terminals, on.contains(terminals) ? "on" : "off", "shells in terminal windows, at their directories"),
                ]
                if global.json {
                    print("[" + rows.map { "{\"source\":\(StrictJSON.quote($0.0)),\"state\":\(StrictJSON.quote($0.1))}" }.joined(separator: ",") + "]")
                } else {
                    global.output.table(["SOURCE", "STATE", "WHAT"], rows.map { [$0.0, $0.1, $0.2] })
                }
            case ("enable", let source?), ("disable", let source?):
                let method = action == "enable" ? Contract.Status.enableSource : Contract.Status.disableSource
                _ = try await daemon.call(method, [.string(source)])
                if !global.json { print("\(source): \(action == "enable" ? "on" : "off")") }
                if action == "enable", source == Contract.Sources.Clipboard.name, Doctor.isGNOMEOnWayland {
                    printError("baton: \(Doctor.gnomeOnWayland); baton doctor says more")
                }
                if action == "enable", source == Contract.Sources.Terminals.name, !global.json {
                    print("Shells are followed from /proc within 3 s of a cd; to have yours say it at once (and tell the terminal), "
                          + "add eval \"$(baton shell-init bash)\" to ~/.bashrc (baton help shell-init for zsh and fish).")
                }
            case ("show", let source?):
                try await show(source, daemon)
            case ("set", let source?):
                _ = try await daemon.call(Contract.Status.setSourceSetting, [.string(source), .string(name ?? ""), .string(value ?? "")])
                if !global.json { print("\(source): \(name ?? "") is \(value ?? "")") }
            case ("enable", nil), ("disable", nil), ("show", nil):
                throw CLIError(description: "name the source: baton sources \(action ?? "") recent-documents (or media, clipboard, terminals)", status: ExitStatus.invalidInput)
            case (let other?, _):
                throw CLIError(description: "'\(other)' is not enable, disable, show or set; baton sources lists the sources", status: ExitStatus.invalidInput)
            }
        }
    }
}

extension Sources {
    /// `baton sources show SOURCE`: each setting, its value, what it takes and what it decides.
    func show(_ source: String, _ daemon: Daemon) async throws {
        let values = try await daemon.call(Contract.Status.sourceSettings, [.string(source)]).first?.stringKeyedValue?
            .compactMapValues(\.stringValue) ?? [:]
        let declared = Contract.Sources.settings[source] ?? []
        if global.json {
            return print("{" + values.keys.sorted().map { "\(StrictJSON.quote($0)):\(StrictJSON.quote(values[$0] ?? ""))" }.joined(separator: ",") + "}")
        }
        if values.isEmpty { return print("\(source) has no settings") }
        // The daemon's names first, in the order the source declares them; one this CLI does not know after.
        let names = declared.map(\.name).filter { values[$0] != nil } + values.keys.filter { name in !declared.contains { $0.name == name } }.sorted()
        global.output.table(["SETTING", "VALUE", "TAKES", "WHAT"], names.map { name in
            let setting = declared.first { $0.name == name }
            return [name, values[name] ?? "", setting?.takes ?? "", setting.map { "\($0.summary) (default \($0.defaultValue))" } ?? ""]
        })
    }
}

/// `baton serve-documents`: the handler of `org.baton.RecentDocuments`, which the bus starts to
/// open a recent document continued on this machine, in the app that used it: through
/// `org.freedesktop.Application.Open` when its desktop entry says `DBusActivatable=true`, else by
/// its entry's `Exec`.
struct ServeDocuments: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve-documents",
        abstract: "Open recent documents continued on this machine (the bus starts it as org.baton.RecentDocuments).",
        discussion: "Not for typing: installed as the D-Bus service org.baton.RecentDocuments. Ends after 10 s without a document to open.",
        shouldDisplay: false)
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await Opener.serve(Contract.Sources.RecentDocuments.app, address: global.address) { activity, connection in
            let members = (try? StrictJSON.parseObject(activity["payload"]?.unwrapped.stringValue ?? "{}", maxBytes: 1 << 20, maxDepth: 16)) ?? []
            guard let uri = members.string("uri"), let path = RecentlyUsed.localPath(uri),
                  let named = RecentlyUsed.appDescription(for: members) else {
                throw BatonError.invalidArgument("the activity names no file:// document and app to open it with")
            }
            let environment = ["HOME", "XDG_DATA_HOME", "XDG_DATA_DIRS"].reduce(into: [String: String]()) { values, name in
                values[name] = getenv(name).map { String(cString: $0) }
            }
            guard let app = RecentlyUsed.app(for: members, in: XDGData.applicationDirectories(environment: environment)) else {
                throw BatonError.notEligible("the app that used it, \(named), is not installed here")
            }
            if app.dbusActivatable {
                try await Self.openThroughBus(app.id, uri: uri, on: connection)
            } else {
                try Opener.launch(try app.arguments(opening: uri, file: path))
            }
            return ["uri": .string(uri), "app": .string(app.desktopID)]
        }
    }

    /// `org.freedesktop.Application.Open([uri], {})` on the app's bus name (the bus starts it).
    static func openThroughBus(_ id: String, uri: String, on connection: Connection) async throws {
        let path = try ObjectPath(validating: "/" + id.replacingAll(".", with: "/").replacingAll("-", with: "_"))
        do {
            _ = try await connection.call(id, path, "org.freedesktop.Application", "Open", [
                .array(.string, [.string(uri)]), .dictionary(key: .string, value: .variant, []),
            ], timeout: .seconds(25))
        } catch let error as DBusError {
            throw BatonError.handlerFailed("\(id) did not open \(uri): \(error.name): \(error.message)")
        }
    }
}

/// Opening a document with an app, as the freedesktop Desktop Entry Specification says.
extension DesktopApp {
    /// `Exec` as the program and arguments that open `uri` (at `file` here): quoting undone, field codes
    /// expanded (`%f`/`%F` the file's path, `%u`/`%U` the URI, `%i` the icon, `%c` the name,
    /// `%k` the entry's location, `%%` a percent sign; the deprecated ones dropped).
    func arguments(opening uri: String, file: String) throws(BatonError) -> [String] {
        guard let exec, !exec.isEmpty else { throw .handlerFailed("the app's desktop entry has no Exec") }
        var arguments: [String] = []
        for word in try Self.words(exec) {
            switch word {
            case "%f", "%F": arguments.append(file)
            case "%u", "%U": arguments.append(uri)
            case "%i": if let icon { arguments += ["--icon", icon] }
            default:
                var text = ""
                var characters = word.makeIterator()
                while let character = characters.next() {
                    guard character == "%" else { text.append(character); continue }
                    switch characters.next() {
                    case "%": text.append("%")
                    case "f", "F": text += file
                    case "u", "U": text += uri
                    case "c": text += name ?? ""
                    case "k": text += path
                    default: break  // deprecated or unknown: dropped
                    }
                }
                if !text.isEmpty || !word.hasPrefix("%") { arguments.append(text) }
            }
        }
        guard !arguments.isEmpty else { throw .handlerFailed("the app's desktop entry has an empty Exec") }
        return arguments
    }

    /// The words of an `Exec` value: separated by spaces, double quotes keeping spaces, and
    /// backslash escaping `"`, `` ` ``, `$` and `\` inside them.
    static func words(_ exec: String) throws(BatonError) -> [String] {
        var words: [String] = []
        var word: String?
        var quoted = false
        var characters = exec.makeIterator()
        while let character = characters.next() {
            switch character {
            case "\"":
                quoted.toggle()
                word = word ?? ""
            case "\\" where quoted:
                guard let escaped = characters.next() else { throw .handlerFailed("the app's Exec ends inside an escape") }
                word = (word ?? "") + String(escaped)
            case " " where !quoted, "\t" where !quoted:
                if let done = word { words.append(done) }
                word = nil
            default:
                word = (word ?? "") + String(character)
            }
        }
        guard !quoted else { throw .handlerFailed("the app's Exec has an unclosed quote") }
        if let done = word { words.append(done) }
        return words
    }
}

private extension String {
    func replacingAll(_ target: Character, with replacement: Character) -> String { String(map { $0 == target ? replacement : $0 }) }
}
