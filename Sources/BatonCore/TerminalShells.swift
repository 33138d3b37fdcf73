import Glibc

/// The shells open in terminal windows, as `/proc` tells them: a shell (bash, zsh, fish, …)
/// whose parent is a terminal program this table knows (GNOME Terminal, Console, Konsole,
/// kitty, foot, …), of this user. Its directory is the shell's own word when it says it
/// (`baton shell-init`: a file named by its pid in `TerminalShells.toldDirectory`), else its
/// `/proc/PID/cwd`. A shell whose foreground program is `ssh` is an ssh session to that host.
public enum TerminalShells {
    /// A terminal program: its desktop id (the payload's `terminal`), its name as a person says it,
    /// and the option that opens a window at a directory (nil: it starts where it is started).
    public struct Terminal: Sendable, Equatable {
        public let desktopID: String
        public let name: String
        /// The program that opens a new window.
        public let program: String
        /// The arguments before the directory, joined to it when they end in `=`.
        public let directoryOption: String?
        /// What comes before a command to run in the window instead of the shell.
        public let commandOption: [String]
    }

    /// Terminals by the name of their program (`/proc/PID/exe`'s last part, or the process's `comm`).
    public static let terminals: [String: Terminal] = [
        "gnome-terminal-server": Terminal(desktopID: "org.gnome.Terminal", name: "GNOME Terminal", program: "gnome-terminal",
                                          directoryOption: "--working-directory=", commandOption: ["--"]),
        "kgx": Terminal(desktopID: "org.gnome.Console", name: "Console", program: "kgx", directoryOption: "--working-directory=", commandOption: ["--"]),
        "konsole": Terminal(desktopID: "org.kde.konsole", name: "Konsole", program: "konsole", directoryOption: "--workdir", commandOption: ["-e"]),
        "kitty": Terminal(desktopID: "kitty", name: "kitty", program: "kitty", directoryOption: "--directory", commandOption: []),
        "foot": Terminal(desktopID: "foot", name: "foot", program: "foot", directoryOption: "--working-directory=", commandOption: []),
        "alacritty": Terminal(desktopID: "Alacritty", name: "Alacritty", program: "alacritty", directoryOption: "--working-directory",
                              commandOption: ["-e"]),
        "xfce4-terminal": Terminal(desktopID: "xfce4-terminal", name: "Xfce Terminal", program: "xfce4-terminal",
                                   directoryOption: "--working-directory=", commandOption: ["-x"]),
        "tilix": Terminal(desktopID: "com.gexperts.Tilix", name: "Tilix", program: "tilix", directoryOption: "--working-directory=",
                          commandOption: ["-x"]),
        "wezterm-gui": Terminal(desktopID: "org.wezfurlong.wezterm", name: "WezTerm", program: "wezterm", directoryOption: "start --cwd",
                                commandOption: ["--"]),
        "xterm": Terminal(desktopID: "debian-xterm", name: "XTerm", program: "xterm", directoryOption: nil, commandOption: ["-e"]),
    ]

    /// The programs taken for an interactive shell when a terminal started them.
    static let shells: Set<String> = ["bash", "zsh", "fish", "dash", "sh", "ksh", "mksh", "tcsh", "nu"]

    /// One shell in a terminal window.
    public struct Shell: Sendable, Equatable {
        public var pid: Int32
        /// When it started (clock ticks since boot): with the pid, which process it is.
        public var startTime: UInt64
        public var terminal: Terminal
        /// The directory, as the shell says it, else as the kernel knows it; empty when neither can tell.
        public var directory: String
        /// Whether the shell said it (`baton shell-init`).
        public var told: Bool
        /// Where it is logged in, when its foreground program is `ssh`.
        public var ssh: SSHDestination?

        /// Which process it is, for as long as it runs.
        public var key: String { "\(pid)-\(startTime)" }
    }

    /// The shells of user `uid` in terminal windows, from `proc`; `toldDirectory` reads the
    /// directory a shell said, by its pid (nil when it said none).
    public static func scan(proc: String = "/proc", uid: uid_t = getuid(), toldDirectory: (Int32) -> String? = { _ in nil }) -> [Shell] {
        var processes: [Int32: ProcessStat] = [:]
        for name in DesktopApp.fileNames(in: proc) {
            guard let pid = Int32(name), pid > 0 else { continue }
            var info = stat()
            guard stat("\(proc)/\(name)", &info) == 0, info.st_uid == uid,
                  let text = DesktopApp.readSmallFile("\(proc)/\(name)/stat", limit: 4096), let parsed = ProcessStat(text) else { continue }
            processes[pid] = parsed
        }
        var terminalOf: [Int32: Terminal?] = [:]
        func terminal(_ pid: Int32) -> Terminal? {
            if let known = terminalOf[pid] { return known }
            let exe = readLink("\(proc)/\(pid)/exe").map { String($0.split(separator: "/").last ?? "") }
            let found = exe.flatMap { terminals[$0] } ?? processes[pid].flatMap { terminals[$0.comm] }
            terminalOf[pid] = found
            return found
        }
        var shells: [Shell] = []
        // A shell that exited but was not yet reaped (a zombie) is gone.
        for (pid, process) in processes where shells.count < 1_000 && Self.shells.contains(process.comm) && process.state != "Z" {
            guard let terminal = terminal(process.parent) else { continue }
            let said = toldDirectory(pid)
            // A directory removed while the shell is in it reads "PATH (deleted)": not a place to go back to.
            let directory = said ?? readLink("\(proc)/\(pid)/cwd").flatMap { $0.hasSuffix(" (deleted)") ? nil : $0 } ?? ""
            // The foreground program, when it is not the shell itself: an ssh session, perhaps.
            var ssh: SSHDestination?
            if process.foregroundGroup > 0, process.foregroundGroup != process.group,
               let child = processes.first(where: { $0.value.group == process.foregroundGroup && $0.value.parent == pid && $0.value.comm == "ssh" }),
               let arguments = commandLine("\(proc)/\(child.key)/cmdline") {
                ssh = SSHDestination(arguments: Array(arguments.dropFirst()))
            }
            shells.append(Shell(pid: pid, startTime: process.startTime, terminal: terminal, directory: directory, told: said != nil, ssh: ssh))
        }
        return shells.sorted { ($0.startTime, $0.pid) < ($1.startTime, $1.pid) }
    }

    /// What the shell `pid` last said of its directory in `directory` (`baton shell-init`
    /// writes `$PWD` to a file named by its pid at each prompt), if it said anything.
    public static func toldDirectory(in directory: String, pid: Int32) -> String? {
        guard let text = DesktopApp.readSmallFile("\(directory)/\(pid)", limit: 8_192) else { return nil }
        let line = text.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
        return line.hasPrefix("/") ? line : nil
    }

    /// This boot's id: a shell's pid and start time name it within one boot only.
    public static let bootID: String = {
        let text = DesktopApp.readSmallFile("/proc/sys/kernel/random/boot_id", limit: 128) ?? ""
        return String(text.filter { $0.isHexDigit }.prefix(32))
    }()

    /// `/proc/PID/stat`'s fields this needs.
    struct ProcessStat: Equatable {
        var comm: String
        /// `R`, `S`, `Z` (exited, not yet reaped), …
        var state: Character
        var parent: Int32
        var group: Int32
        var foregroundGroup: Int32
        var startTime: UInt64

        /// Parsed from the file's text: `pid (comm) state ppid pgrp session tty tpgid … starttime(22nd)`;
        /// the name may hold spaces and parentheses, so the fields start after its last `)`.
        init?(_ text: String) {
            guard let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")"), open < close else { return nil }
            let fields = text[text.index(after: close)...].split(separator: " ")
            // fields[0] is the state (field 3); field N is fields[N - 3].
            guard fields.count >= 20, let parent = Int32(fields[1]), let group = Int32(fields[2]), let foreground = Int32(fields[5]),
                  let start = UInt64(fields[19]) else { return nil }
            comm = String(text[text.index(after: open)..<close])
            state = fields[0].first ?? "?"
            self.parent = parent
            self.group = group
            foregroundGroup = foreground
            startTime = start
        }
    }

    /// Where a symbolic link points; nil when it cannot be read.
    static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A process's arguments from its `cmdline` file.
    static func commandLine(_ path: String) -> [String]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 8192)
        let count = read(fd, &bytes, bytes.count)
        guard count > 0 else { return nil }
        return bytes[..<count].split(separator: 0, omittingEmptySubsequences: false).dropLast(bytes[count - 1] == 0 ? 1 : 0)
            .map { String(decoding: $0, as: UTF8.self) }
    }

    /// `directory` as a person says it: under `home` as `~/…`.
    public static func spoken(_ directory: String, home: String?) -> String {
        guard let home, !home.isEmpty, home != "/" else { return directory }
        if directory == home { return "~" }
        if directory.hasPrefix(home + "/") { return "~" + directory.dropFirst(home.count) }
        return directory
    }

    /// Whether `directory` is under one of `patterns` (`:`-separated; `~/` for the home
    /// directory, `*` for any part of one name): the directory itself or anything below it.
    public static func isBlocked(_ directory: String, patterns: String, home: String?) -> Bool {
        for pattern in patterns.split(separator: ":") where !pattern.isEmpty {
            var expanded = String(pattern)
            if expanded == "~" || expanded.hasPrefix("~/") {
                guard let home, !home.isEmpty else { continue }
                expanded = home + expanded.dropFirst()
            }
            while expanded.count > 1, expanded.hasSuffix("/") { expanded.removeLast() }
            let depth = expanded.split(separator: "/").count
            // The directory's leading parts as deep as the pattern: the pattern or below it.
            let parts = directory.split(separator: "/")
            guard parts.count >= depth else { continue }
            let head = "/" + parts.prefix(depth).joined(separator: "/")
            if fnmatch(expanded, head, FNM_PATHNAME) == 0 { return true }
        }
        return false
    }

    /// `file://HOST/PATH`, as OSC 7 says a directory: the path's bytes outside the unreserved
    /// ones and `/` percent-encoded.
    public static func fileURL(host: String, path: String) -> String {
        var encoded = ""
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"):
                encoded.append(Character(Unicode.Scalar(byte)))
            default:
                let digits = Array("0123456789ABCDEF")
                encoded += "%" + String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 15)])
            }
        }
        return "file://\(host)\(encoded)"
    }

    /// `directory` if it is a directory on this machine, else its nearest parent that is (`/` at worst).
    public static func nearestDirectory(_ directory: String) -> String {
        var path = directory.hasPrefix("/") ? directory : "/"
        while true {
            var info = stat()
            if stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR { return path }
            guard let slash = path.lastIndex(of: "/"), path != "/" else { return "/" }
            path = slash == path.startIndex ? "/" : String(path[..<slash])
        }
    }

    /// `text` as one word for a POSIX shell.
    public static func shellQuoted(_ text: String) -> String {
        "'" + text.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }

    /// Whether `program` is an executable file in a directory of `PATH`.
    public static func isOnPath(_ program: String) -> Bool {
        let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").contains { access("\($0)/\(program)", X_OK) == 0 }
    }

    /// This machine's host name, as OSC 7 names it.
    public static func hostName() -> String { ThisMachine.hostName() ?? "localhost" }
}

/// What an activity of the terminals source holds (`{cwd, terminal, host, user}`, and `port`
/// when an ssh session named one): the directory (empty for an ssh session, whose directory on
/// the other host is unknown here), the terminal's desktop id, and where an ssh session is logged in.
public struct TerminalSession: Sendable, Hashable {
    public var cwd: String
    public var terminal: String
    public var host: String?
    public var user: String?
    public var port: String?

    public init(cwd: String, terminal: String, host: String? = nil, user: String? = nil, port: String? = nil) {
        (self.cwd, self.terminal, self.host, self.user, self.port) = (cwd, terminal, host, user, port)
    }

    public init?(payload: String) {
        guard let members = try? StrictJSON.parseObject(payload, maxBytes: 1 << 20, maxDepth: 4), let cwd = members.string("cwd") else { return nil }
        self.init(cwd: cwd, terminal: members.string("terminal") ?? "", host: members.string("host"), user: members.string("user"),
                  port: members.string("port"))
    }

    public var payload: String {
        var json = "{\"cwd\":\(StrictJSON.quote(cwd)),\"terminal\":\(StrictJSON.quote(terminal))"
        if let host { json += ",\"host\":\(StrictJSON.quote(host))" }
        if let user { json += ",\"user\":\(StrictJSON.quote(user))" }
        if let port { json += ",\"port\":\(StrictJSON.quote(port))" }
        return json + "}"
    }

    /// The terminal program that had it, when the table knows its desktop id.
    public var knownTerminal: TerminalShells.Terminal? { TerminalShells.terminals.values.first { $0.desktopID == terminal } }

    /// How to open it here: the program and arguments, and the directory to start them in.
    /// The terminal that had it when `installed` finds its program, else the
    /// `x-terminal-emulator` alternative; at `cwd`, else its nearest parent here; an ssh
    /// session logs in to the same host (and goes to `cwd` there when it is known). Nil when
    /// no terminal program is installed.
    public func opening(home: String, installed: (String) -> Bool) -> (arguments: [String], directory: String)? {
        let directory = host == nil ? TerminalShells.nearestDirectory(cwd) : TerminalShells.nearestDirectory(home)
        var command: [String] = []
        if let host {
            command = ["ssh", "-t"] + (port.map { ["-p", $0] } ?? []) + (user.map { ["-l", $0] } ?? []) + ["--", host]
            if !cwd.isEmpty { command.append("cd \(TerminalShells.shellQuoted(cwd)) && exec \"$SHELL\" -l") }
        }
        if let terminal = knownTerminal, installed(terminal.program) {
            var arguments = [terminal.program]
            if let option = terminal.directoryOption {
                arguments += option.hasSuffix("=") ? [option + directory] : option.split(separator: " ").map(String.init) + [directory]
            }
            if !command.isEmpty { arguments += terminal.commandOption + command }
            return (arguments, directory)
        }
        // Debian's alternative: every terminal it names takes -e and a command.
        guard installed("x-terminal-emulator") else { return nil }
        return (["x-terminal-emulator"] + (command.isEmpty ? [] : ["-e"] + command), directory)
    }
}

/// Where an `ssh` command logs in: its destination (`[user@]host` or `ssh://[user@]host[:port]`)
/// and `-l user`, read from its arguments the way ssh reads them.
public struct SSHDestination: Sendable, Equatable {
    public var host: String
    public var user: String?
    public var port: String?

    public init(host: String, user: String? = nil, port: String? = nil) {
        self.host = host
        self.user = user
        self.port = port
    }

    /// The options of OpenSSH's client that take a value (`ssh(1)`'s synopsis).
    static let withValue = Set("BbcDEeFIiJLlmOoPpQRSWw")

    /// From ssh's arguments (without the program); nil when they name no host.
    public init?(arguments: [String]) {
        var user: String?, port: String?, destination: String?
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let word = arguments[index]
            index += 1
            if word == "--" { destination = index < arguments.endIndex ? arguments[index] : nil; break }
            guard word.hasPrefix("-"), word.count > 1 else { destination = word; break }
            // Flags may be grouped (-tA); the first that takes a value takes the rest of the word or the next.
            var letters = word.dropFirst()
            while let letter = letters.first {
                letters = letters.dropFirst()
                guard Self.withValue.contains(letter) else { continue }
                let value: String?
                if !letters.isEmpty { value = String(letters) } else if index < arguments.endIndex { value = arguments[index]; index += 1 } else { value = nil }
                if letter == "l" { user = value }
                if letter == "p" { port = value }
                break
            }
        }
        guard var destination, !destination.isEmpty else { return nil }
        if destination.hasPrefix("ssh://") {
            destination = String(destination.dropFirst("ssh://".count))
            if let slash = destination.firstIndex(of: "/") { destination = String(destination[..<slash]) }
            if let colon = destination.lastIndex(of: ":"), !destination[colon...].contains("]") {
                port = String(destination[destination.index(after: colon)...])
                destination = String(destination[..<colon])
            }
        }
        if let at = destination.lastIndex(of: "@") {
            user = String(destination[..<at])
            destination = String(destination[destination.index(after: at)...])
        }
        guard !destination.isEmpty, destination.allSatisfy({ !$0.isWhitespace && $0 != "'" && $0 != "\"" }) else { return nil }
        self.init(host: destination, user: user.flatMap { $0.isEmpty ? nil : $0 }, port: port)
    }

    /// `[user@]host`, as ssh takes it.
    public var target: String { user.map { "\($0)@\(host)" } ?? host }
}

/// This machine, as the system names it.
public enum ThisMachine {
    /// Its host name (`gethostname`); nil when it cannot be read.
    public static func hostName() -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
