import ArgumentParser
import BatonContract
import BatonCore
import DBus
import Glibc

/// `baton export`: everything Baton keeps, as one JSON document.
struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write the types, live activities, history and scenes Baton keeps as one JSON document.",
        discussion: """
            The document (format org.baton.Handoff1.export, version 1; the guide, "Export and import") \
            is what baton import reads back, here or on another machine. Other machines' activities \
            (sync) are theirs to export. The file is made readable by you only: it holds what you did. \
            batond writes the document itself, to this command's standard output or the file, so a \
            store of any size can be exported.
            """)
    @Option(help: "Only this app's.", completion: .custom(Completions.apps)) var app: String?
    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("Write to this file instead of standard output.", valueName: "file"))
    var output: String?
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await perform {
            var filter: [String: String] = [:]
            filter["app_id"] = app
            let fd: Int32
            if let output {
                fd = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                guard fd >= 0 else { throw CLIError(description: "cannot write \(output): \(String(cString: strerror(errno)))", status: ExitStatus.failure) }
                progress("exporting…")
            } else {
                fd = STDOUT_FILENO
            }
            defer { if fd != STDOUT_FILENO { close(fd) } }
            let descriptor = try FileDescriptor.duplicating(fd)
            _ = try await global.daemon().call(Contract.Archive.exportTo, [.unixFD(descriptor), .stringMap(filter)], timeout: .seconds(600))
            guard let output else { return }
            var info = stat()
            let size = fstat(fd, &info) == 0 ? Int(info.st_size) : 0
            progress("exported \(SizeReport.text(size)) to \(output)")
        }
    }
}

/// `baton import`: adds what an export holds.
struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Add what an export holds and this machine lacks; importing twice changes nothing.",
        discussion: """
            Ids are kept: what is here already (an activity, past activity or scene by id, a type by name) \
            stays as it is. The document is checked whole, as batond checks every call; if anything in it \
            is wrong, nothing is imported and the error says where.
            """)
    @ArgumentParser.Argument(help: "The export, or - for standard input.") var file: String
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await perform {
            let text = try readPayload(file == "-" ? "-" : "@" + file)
            progress("importing \(file == "-" ? "standard input" : file) (\(SizeReport.text(text.utf8.count)))…")
            let reply = try await global.daemon().call(Contract.Archive.import, [.string(text), .stringMap([:])], timeout: .seconds(600))
            let counts = Counts(reply)
            if global.json { return print(counts.json) }
            let added = [counts.text("types", "type", "types"), counts.text("activities", "activity", "activities"),
                         counts.text("history", "past activity", "past activities"), counts.text("scenes", "scene", "scenes")]
            let unchanged = counts.values["unchanged", default: 0]
            print("imported " + added.joined(separator: ", ") + (unchanged == 0 ? "" : "; \(unchanged) already here, left as they were"))
        }
    }
}

/// A reply's counts (`a{su}`), for people and for scripts.
struct Counts {
    let values: [String: Int]

    init(_ reply: [DBusValue]) {
        values = Records.counts(reply)
    }

    /// `{"key":n,…}`, keys sorted.
    var json: String {
        "{" + values.sorted { $0.key < $1.key }.map { "\(StrictJSON.quote($0.key)):\($0.value)" }.joined(separator: ",") + "}"
    }

    /// "1 scene", "3 scenes".
    func text(_ key: String, _ one: String, _ many: String) -> String {
        counted(values[key, default: 0], one, many)
    }
}

/// A line on standard error saying what a long command is doing.
func progress(_ line: String) {
    printError("baton: " + line)
}
