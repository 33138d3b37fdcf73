import ArgumentParser
import BatonContract
import BatonCore
import DBus
import Glibc

/// `baton shell-init bash|zsh|fish`: what a user adds to their shell's rc file so that the
/// shell says its directory at each prompt — OSC 7 to the terminal (`file://HOST/PATH`, which
/// VTE terminals, Konsole, foot, kitty and WezTerm read), and a word to Baton: `$PWD` in a
/// file named by the shell's pid under `$XDG_RUNTIME_DIR/baton/shells` (written when it
/// changes, by shell builtins only), which batond watches while the terminals source is on.
struct ShellInit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shell-init",
        abstract: "Print the lines that make a shell tell its directory to the terminal and to Baton.",
        discussion: """
            Add to ~/.bashrc: eval "$(baton shell-init bash)"
            Add to ~/.zshrc: eval "$(baton shell-init zsh)"
            Add to ~/.config/fish/config.fish: baton shell-init fish | source
            Without them the terminals source still follows your shells, from /proc, within 3 s of a cd; with them, \
            within 1 s, and the terminal hears the directory too (OSC 7: new tabs open there). Only builtins run at a prompt.
            """)
    @ArgumentParser.Argument(help: ArgumentHelp("bash, zsh or fish.", valueName: "shell")) var shell: String

    func validate() throws {
        guard Self.scripts[shell] != nil else { throw ValidationError("'\(shell)' is not bash, zsh or fish") }
    }

    func run() throws {
        print(Self.scripts[shell] ?? "", terminator: "")
    }

    /// Each shell's lines. They percent-encode `$PWD` byte by byte (`LC_ALL=C`) for OSC 7.
    static let scripts: [String: String] = [
        "bash": #"""
            # Baton: the shell says its directory at each prompt (baton shell-init bash).
            if [[ $- == *i* && -z ${__baton_shell_init-} ]]; then
                __baton_shell_init=1
                __baton_prompt() {
                    local status=$? LC_ALL=C path=$PWD encoded= character i
                    for ((i = 0; i < ${#path}; i++)); do
                        character=${path:i:1}
                        case $character in
                            [a-zA-Z0-9/._~-]) encoded+=$character ;;
                            *) printf -v character '%%%02X' "'$character"; encoded+=$character ;;
                        esac
                    done
                    printf '\e]7;file://%s%s\e\\' "$HOSTNAME" "$encoded"
                    if [[ $PWD != "${__baton_said-}" && -n ${XDG_RUNTIME_DIR-} && -d $XDG_RUNTIME_DIR/baton/shells ]]; then
                        printf '%s\n' "$PWD" > "$XDG_RUNTIME_DIR/baton/shells/$$" && __baton_said=$PWD
                    fi
                    return $status
                }
                PROMPT_COMMAND="__baton_prompt${PROMPT_COMMAND:+;$PROMPT_COMMAND}"
            fi

            """#,
        "zsh": #"""
            # Baton: the shell says its directory at each prompt (baton shell-init zsh).
            if [[ -o interactive && -z ${__baton_shell_init-} ]]; then
                __baton_shell_init=1
                __baton_prompt() {
                    emulate -L zsh
                    local LC_ALL=C path_=$PWD encoded= character i
                    for ((i = 1; i <= ${#path_}; i++)); do
                        character=${path_[i]}
                        case $character in
                            [a-zA-Z0-9/._~-]) encoded+=$character ;;
                            *) encoded+=$(printf '%%%02X' "'$character") ;;
                        esac
                    done
                    printf '\e]7;file://%s%s\e\\' "$HOST" "$encoded"
                    if [[ $PWD != "${__baton_said-}" && -n ${XDG_RUNTIME_DIR-} && -d $XDG_RUNTIME_DIR/baton/shells ]]; then
                        print -r -- "$PWD" > "$XDG_RUNTIME_DIR/baton/shells/$$" && __baton_said=$PWD
                    fi
                }
                autoload -Uz add-zsh-hook
                add-zsh-hook precmd __baton_prompt
            fi

            """#,
        "fish": #"""
            # Baton: the shell says its directory at each prompt (baton shell-init fish | source).
            if status is-interactive; and not set -q __baton_shell_init
                set -g __baton_shell_init 1
                function __baton_prompt --on-event fish_prompt
                    printf '\e]7;file://%s%s\e\\' $hostname (string escape --style=url -- $PWD)
                    if test "$PWD" != "$__baton_said"; and set -q XDG_RUNTIME_DIR; and test -d $XDG_RUNTIME_DIR/baton/shells
                        printf '%s\n' $PWD > $XDG_RUNTIME_DIR/baton/shells/$fish_pid; and set -g __baton_said $PWD
                    end
                end
            end

            """#,
    ]
}

/// `baton serve-terminals`: the handler of `org.baton.Terminals`, which the bus starts to open
/// a terminal continued on this machine: the program that had it (else `x-terminal-emulator`),
/// at its directory or the nearest parent here, or logged in to its ssh host.
struct ServeTerminals: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve-terminals",
        abstract: "Open terminals continued on this machine (the bus starts it as org.baton.Terminals).",
        discussion: "Not for typing: installed as the D-Bus service org.baton.Terminals. Ends after 10 s without a terminal to open.",
        shouldDisplay: false)
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await Opener.serve(Contract.Sources.Terminals.app, address: global.address) { activity, _ in
            guard let session = TerminalSession(payload: activity["payload"]?.unwrapped.stringValue ?? "") else {
                throw BatonError.invalidArgument("the activity names no directory to open a terminal at")
            }
            let home = getenv("HOME").map { String(cString: $0) } ?? "/"
            guard let opening = session.opening(home: home, installed: TerminalShells.isOnPath) else {
                let named = session.knownTerminal.map { "\($0.program), nor " } ?? ""
                throw BatonError.notEligible("no terminal program is installed here (neither \(named)x-terminal-emulator)")
            }
            try Opener.launch(opening.arguments, in: opening.directory)
            return ["directory": .string(opening.directory), "program": .string(opening.arguments[0])]
        }
    }
}

/// `baton terminals [restore]`: the shells the terminals source follows, and reopening those
/// that were open when Baton last stopped following them (a logout, a restart).
struct TerminalsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "terminals",
        abstract: "List the shells open in terminal windows, or reopen those open when Baton last stopped.",
        discussion: """
            With the terminals source on (baton sources enable terminals), each shell in a terminal window is an activity. \
            baton terminals lists them; baton terminals restore reopens, each in the terminal that had it and at its \
            directory, the shells that were open when Baton last stopped following them (a logout, a restart of the \
            machine), except any whose directory is open in that terminal again. Examples: baton terminals; baton terminals restore
            """)
    @ArgumentParser.Argument(help: ArgumentHelp("restore, or nothing to list.", valueName: "action")) var action: String?
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let action, action != "restore" { throw ValidationError("'\(action)' is not restore; baton terminals lists the shells") }
    }

    func run() async throws {
        try await perform {
            let daemon = try global.daemon()
            let app = Contract.Sources.Terminals.app
            let live = try await daemon.call(Contract.Activities.list, [.stringMap(["app_id": app])]).first?.arrayValue ?? []
            guard action == "restore" else {
                return printRecords(live, global.output, headers: ["ID", "TITLE", "DIRECTORY"]) { record in
                    [record.text(Key.id), record.text(Key.title), TerminalSession(payload: record.text(Key.payload))?.cwd ?? ""]
                }
            }
            let past = try await daemon.call(Contract.Archive.history, [.stringMap(["app_id": app])]).first?.arrayValue ?? []
            let open = Set(live.compactMap { $0.stringKeyedValue?.mapValues(\.unwrapped) }.compactMap { TerminalSession(payload: $0.text(Key.payload)) })
            let toRestore = Self.openAtLastStop(past.compactMap { $0.stringKeyedValue?.mapValues(\.unwrapped) })
                .filter { TerminalSession(payload: $0.text(Key.payload)).map { !open.contains($0) } ?? false }
            var failed = 0
            for record in toRestore {
                do {
                    _ = try await daemon.call(Contract.Activities.continue, [.string(record.text(Key.id)), .stringMap([:])])
                    if !global.json { print("reopened \(record.text(Key.title))") }
                } catch let error as DBusError {
                    failed += 1
                    printError("baton: \(record.text(Key.title)) was not reopened: \(error.message)")
                }
            }
            if global.json { print("{\"reopened\":\(toRestore.count - failed),\"failed\":\(failed)}") }
            if toRestore.isEmpty, !global.json { print("no shell was open when Baton last stopped following them, or all are open again") }
            if failed > 0 { throw CLIError(description: "\(failed) of \(toRestore.count) shells were not reopened", status: ExitStatus.failure) }
        }
    }

    /// Of the history's shells, those open when Baton last stopped: each ended so, within a
    /// minute of the newest that did (one stop ends them all at once).
    static func openAtLastStop(_ past: [[String: DBusValue]]) -> [[String: DBusValue]] {
        let atStop = past.filter { $0.text(Key.endDetail) == Contract.Sources.Terminals.openAtStop }
        guard let newest = atStop.compactMap({ $0[Key.endedAt]?.uint64Value }).max() else { return [] }
        return atStop.filter { ($0[Key.endedAt]?.uint64Value ?? 0) + 60_000_000 >= newest }
    }
}
