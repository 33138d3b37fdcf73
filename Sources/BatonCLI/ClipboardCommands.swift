import ArgumentParser
import BatonContract
import BatonCore
import DBus
import ClipboardAgent
import Glibc

/// `baton clipboard`: what the clipboard source last sent and received; `clear` withdraws an offer.
struct Clipboard: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clipboard",
        abstract: "Show the last copy sent to your other machines and the last received from them.",
        discussion: """
            With the clipboard source on (baton sources enable clipboard, on each machine), what you copy here \
            is offered on the clipboards of your other machines for 2 minutes (baton sources set clipboard \
            lifetime SECONDS), and what you copy there is offered here. Shows for each: the machine, when, the \
            type and the size; the received copy's content only with --show (text as it is, an image's bytes \
            only into a file or a pipe). Password managers' copies and the primary selection never leave.
            """,
        subcommands: [Show.self, Clear.self], defaultSubcommand: Show.self)

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Show the last copy sent and received (the default).")
        @Flag(name: .customLong("show"), help: "Print the received copy's content too, while it is offered.") var content = false
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await perform {
                let daemon = try global.daemon()
                let properties = try await daemon.properties(of: Contract.Interface.clipboard)
                let sent = properties[Contract.Clipboard.Property.lastSent]?.stringKeyedValue?.mapValues(\.unwrapped) ?? [:]
                let received = properties[Contract.Clipboard.Property.lastReceived]?.stringKeyedValue?.mapValues(\.unwrapped) ?? [:]
                if content {
                    guard let id = received["id"]?.stringValue else {
                        throw CLIError(description: "nothing was received from another machine", status: ExitStatus.notFound)
                    }
                    let bytes = try await daemon.call(Contract.Clipboard.content, [.string(id)]).first?.bytesValue ?? []
                    if received["mime"]?.stringValue != ClipboardCopy.text, isatty(STDOUT_FILENO) != 0 {
                        throw CLIError(description: "the copy is an image (\(bytes.count) bytes); send it into a file: baton clipboard --show > copy.png",
                                       status: ExitStatus.invalidInput)
                    }
                    var written = 0
                    while written < bytes.count {
                        let n = bytes[written...].withUnsafeBytes { Glibc.write(STDOUT_FILENO, $0.baseAddress, $0.count) }
                        guard n > 0 else { throw CLIError(description: "could not write the copy: \(String(cString: strerror(errno)))", status: ExitStatus.failure) }
                        written += n
                    }
                    return
                }
                if global.json { return print("{\"sent\":\(JSONText.value(.record(sent))),\"received\":\(JSONText.value(.record(received)))}") }
                func row(_ what: String, _ seen: [String: DBusValue]) -> [String] {
                    guard let id = seen["id"]?.stringValue else { return [what, "nothing yet", "", "", ""] }
                    let device = seen["device"]?.stringValue ?? ""
                    return [what, device.isEmpty ? "this machine" : device, seen["at"]?.uint64Value.map { relativeTime($0) } ?? "",
                            seen["mime"]?.stringValue ?? "", "\(seen["size"]?.uint64Value ?? 0) bytes", id]
                }
                global.output.table(["", "MACHINE", "WHEN", "TYPE", "SIZE", "ID"], [row("sent", sent), row("received", received)])
            }
        }
    }

    struct Clear: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "clear", abstract: "Withdraw the copy another machine offers here, now.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await perform {
                _ = try await global.daemon().call(Contract.Clipboard.clear)
                if !global.json { print("withdrawn") }
            }
        }
    }
}

/// `baton clipboard-agent`: the clipboard agent of this graphical session, started with it
/// (the user unit baton-clipboard.service, or the autostart entry).
struct ClipboardAgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clipboard-agent",
        abstract: "Watch and set this session's clipboard for the clipboard source (started with the session).",
        discussion: """
            Not for typing: the session starts it (baton-clipboard.service, or the autostart entry). It tells batond of \
            each copy and offers on the clipboard what your other machines copied: on Wayland through the compositor's \
            data-control protocol (sway and KWin have it), else on X11. Ends when the display goes away \
            (status 0); status 3 when the session offers no way to watch its clipboard (GNOME on Wayland).
            """,
        shouldDisplay: false)
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let status = await ClipboardAgent.run(address: global.address) { line in
            printError("baton clipboard-agent: " + line)
        }
        if status != 0 { throw ExitCode(status) }
    }
}
