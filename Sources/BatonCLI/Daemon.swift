import BatonContract
import ArgumentParser
import BatonCore
import DBus

/// The exit statuses of `baton`, documented in `baton --help`.
public enum ExitStatus {
    public static let failure: Int32 = 1
    public static let notFound: Int32 = 2
    public static let invalidInput: Int32 = 3
    public static let daemonUnavailable: Int32 = 4
    public static let accessDenied: Int32 = 5
    public static let handlerFailed: Int32 = 6
    /// The daemon's storage cannot take the change now (full, locked, damaged).
    public static let storageProblem: Int32 = 7
}

/// A failure told as a sentence with what to do next, and its exit status.
struct CLIError: Error, CustomStringConvertible {
    let description: String
    let status: Int32
}

/// The daemon as the CLI talks to it: one connection, calls by interface and member.
struct Daemon {
    static let busName = Contract.busName
    static let root = Contract.root
    let connection: Connection

    init(address: String?) throws {
        do {
            connection = try Connection(address.map { .address($0) } ?? .session) { _ in }
        } catch {
            throw CLIError(
                description: "cannot reach the session bus (\(error.message)). Is DBUS_SESSION_BUS_ADDRESS set? Run baton inside your desktop session.",
                status: ExitStatus.daemonUnavailable)
        }
    }

    /// Every property of `interface` on the object at `path`, variants unwrapped (`Properties.GetAll`).
    func properties(of interface: String, at path: ObjectPath = root) async throws -> [String: DBusValue] {
        do {
            return try await connection.call(Self.busName, path, "org.freedesktop.DBus.Properties", "GetAll", [.string(interface)])
                .first?.stringKeyedValue?.mapValues(\.unwrapped) ?? [:]
        } catch let error as DBusError {
            throw Self.explain(error)
        }
    }

    func call(_ method: ContractMethod, _ arguments: [DBusValue] = [], path: ObjectPath = root,
              timeout: Duration = .seconds(30)) async throws -> [DBusValue] {
        do {
            return try await connection.call(method, arguments, path: path, timeout: timeout)
        } catch let error as DBusError {
            throw Self.explain(error)
        }
    }

    /// A write the daemon makes idempotent: sent with a `request_id` in its options, and
    /// sent again (same id) when the reply was lost or the database was locked.
    func write(
        _ method: ContractMethod, options: [String: String], _ arguments: ([String: String]) -> [DBusValue]
    ) async throws -> [DBusValue] {
        let options = IdempotentWrite.options(options)
        do {
            return try await IdempotentWrite.run({
                try await connection.call(method, arguments(options), timeout: .seconds(30))
            }, retry: { error in
                switch (error as? DBusError)?.name {
                case DBusError.Name.noReply, DBusError.Name.timeout: .replyLost
                case BatonError(.storageUnavailable, "").dbusName: .storageBusy
                default: nil
                }
            })
        } catch let error as DBusError {
            throw Self.explain(error)
        }
    }

    /// The methods batond's sentences name, as the baton commands that call them: a person at
    /// a shell is told what to type, not what to send.
    static let commandsForMethods = [
        ("RegisterActivityType", "baton types register"), ("DeleteSaved", "baton activities delete-saved"),
        ("ClearHistory", "baton history clear"), ("OpenScene", "baton scenes open"),
        ("RestoreScenes", "baton scenes restore"), ("Resume", "baton resume"),
    ]

    /// `message` with the methods it names replaced by their commands (whole words only).
    static func inCommands(_ message: String) -> String {
        var words: [Substring] = []
        var rest = message[...]
        while let start = rest.firstIndex(where: \.isLetter) {
            words.append(rest[..<start])
            let end = rest[start...].firstIndex { !$0.isLetter } ?? rest.endIndex
            let word = rest[start..<end]
            words.append(commandsForMethods.first { $0.0 == word }.map { Substring($0.1) } ?? word)
            rest = rest[end...]
        }
        return (words + [rest]).joined()
    }

    /// Turns a D-Bus error into a sentence and an exit status.
    static func explain(_ error: DBusError) -> CLIError {
        let error = DBusError(name: error.name, message: inCommands(error.message), details: error.details)
        guard let code = BatonError(error)?.code else {
            switch error.name {
            case DBusError.Name.serviceUnknown, DBusError.Name.nameHasNoOwner:
                return CLIError(description: "batond is not running and the bus cannot start it. Start it with: systemctl --user start batond (or run batond).",
                                status: ExitStatus.daemonUnavailable)
            case DBusError.Name.noReply, DBusError.Name.timeout:
                return CLIError(description: "batond did not answer in time: \(error.message)", status: ExitStatus.daemonUnavailable)
            case DBusError.Name.unknownObject:
                return CLIError(description: "no such scene: \(error.message). List scenes with: baton scenes list", status: ExitStatus.notFound)
            default:
                return CLIError(description: "\(error.message) (\(error.name))", status: ExitStatus.failure)
            }
        }
        switch code {
        case .notFound:
            return CLIError(description: "\(error.message). See what exists with: baton activities list, baton scenes list", status: ExitStatus.notFound)
        case .expired:
            return CLIError(description: "\(error.message); expired activities cannot be used. Advertise it again.", status: ExitStatus.notFound)
        case .invalidPayload:
            return CLIError(description: "the payload was refused: \(error.message). Payloads are JSON objects with the type's required keys.",
                            status: ExitStatus.invalidInput)
        case .invalidArgument, .unknownActivityType, .quotaExceeded:
            return CLIError(description: error.message, status: ExitStatus.invalidInput)
        case .accessDenied:
            return CLIError(description: "\(error.message). Run baton as the user who runs batond.", status: ExitStatus.accessDenied)
        case .handlerFailed where error.message.contains("waits in scene"):
            return CLIError(description: "\(error.message). Start the app, or see where it stands with: baton scenes show SCENE",
                            status: ExitStatus.handlerFailed)
        case .handlerFailed:
            return CLIError(description: "the app could not continue the activity: \(error.message). See the app's log.",
                            status: ExitStatus.handlerFailed)
        case .storageFull, .storageUnavailable, .storageCorrupt:
            return CLIError(description: "\(error.message). Check it with: baton doctor", status: ExitStatus.storageProblem)
        case .limitsExceeded, .notEligible, .blocked, .syncUnavailable:
            return CLIError(description: error.message, status: ExitStatus.failure)
        }
    }

    /// `/org/baton/Handoff1/scene/…` from a path or an id a person typed.
    static func scenePath(_ text: String) throws -> ObjectPath {
        let id: String
        do {
            id = try SceneAddress.id(from: text)
        } catch {
            throw CLIError(description: error.message, status: ExitStatus.invalidInput)
        }
        return SceneAddress.objectPath(forID: id)
    }
}

/// Options every command takes.
struct GlobalOptions: ParsableArguments {
    @Flag(name: .long, help: "Print JSON for scripts instead of tables.")
    var json = false

    @Flag(name: .long, help: "Never colour the output (also: NO_COLOR=1).")
    var noColor = false

    @Option(name: .long, help: ArgumentHelp("A bus address instead of the session bus.", valueName: "address"))
    var address: String?

    var output: Output { Output(json: json, noColor: noColor) }

    func daemon() throws -> Daemon { try Daemon(address: address) }
}

import Glibc

/// Reads a payload given as text, as `@FILE`, or as `-` for standard input.
func readPayload(_ text: String) throws -> String {
    if text == "-" { return readAll(from: 0) }
    if text.hasPrefix("@") {
        let path = String(text.dropFirst())
        guard let contents = readFile(path) else {
            throw CLIError(description: "cannot read \(path): \(String(cString: strerror(errno)))", status: ExitStatus.invalidInput)
        }
        return contents
    }
    return text
}

/// A whole file as text, or nil (with errno set) when it cannot be opened.
func readFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    return readAll(from: fd)
}

func readAll(from fd: Int32) -> String {
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = read(fd, &buffer, buffer.count)
        if count <= 0 { break }
        bytes += buffer[0..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}
