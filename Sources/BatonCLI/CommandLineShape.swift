import ArgumentParser
import Glibc

/// What `baton` does with its command line before ArgumentParser reads it, so that it reads
/// as people type it:
/// - the options every command takes (`--json`, `--no-color`, `--address`) may come before
///   the subcommand too (`baton --json list`): they are moved after it;
/// - negative numbers are values, not options (`baton scenes set S offset -3 --type int`);
/// - a mistyped subcommand gets a suggestion (`baton activities serch` → did you mean search?).
extension BatonCommand {
    /// `baton`'s entry point: the command line shaped as above, then ArgumentParser's `main`.
    public static func runFromCommandLine() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if let mistake = CommandLineShape.unknownSubcommand(in: arguments) {
            printError("baton: " + mistake)
            Glibc.exit(ExitCode.validationFailure.rawValue)
        }
        await main(CommandLineShape.normalized(arguments))
    }
}

enum CommandLineShape {
    /// The global flags, and the global options that take a value.
    static let globalFlags: Set<String> = ["--json", "--no-color"]
    static let globalOptions: Set<String> = ["--address"]

    /// How many words a global option takes at `word` (itself, and its value if separate); 0 for any other word.
    static func globalWidth(_ word: String) -> Int {
        if globalFlags.contains(word) || globalOptions.contains(where: { word.hasPrefix($0 + "=") }) { return 1 }
        return globalOptions.contains(word) ? 2 : 0
    }

    static func normalized(_ arguments: [String]) -> [String] {
        let end = arguments.firstIndex(of: "--") ?? arguments.endIndex
        var kept: [String] = []
        var global: [String] = []
        var negatives: [String] = []
        var index = 0
        while index < end {
            let argument = arguments[index]
            let width = globalWidth(argument)
            if width > 0, index + width <= end {
                global += arguments[index..<index + width]
                index += width
                continue
            } else if isNegativeNumber(argument) {
                negatives.append(argument)
            } else {
                kept.append(argument)
            }
            index += 1
        }
        // Positional values go last, after `--`, where nothing is read as an option.
        let rest = Array(arguments[end...].dropFirst())
        let positional = negatives + rest
        return kept + global + (positional.isEmpty ? [] : ["--"] + positional)
    }

    /// `-3`, `-0.5`, `-1e3`: a value, never one of baton's options (none is a digit).
    static func isNegativeNumber(_ argument: String) -> Bool {
        argument.count > 1 && argument.hasPrefix("-") && Double(argument) != nil
    }

    /// A sentence for the first word that is neither a subcommand of the command it follows
    /// nor plausibly one of its arguments, with the subcommands it is closest to; nil when
    /// there is none (ArgumentParser then reads the line as usual).
    static func unknownSubcommand(in arguments: [String]) -> String? {
        var command: any ParsableCommand.Type = BatonCommand.self
        var path = ["baton"]
        var index = 0
        while index < arguments.count {
            let word = arguments[index]
            if word == "--" { return nil }
            if word.hasPrefix("-") {
                // --help, --version, --generate-completion-script SHELL and the like are ArgumentParser's.
                let width = globalWidth(word)
                guard width > 0 else { return nil }
                // A global option's value is not a word of the command line.
                index += width
                continue
            }
            let subcommands = command.configuration.subcommands
            if subcommands.isEmpty || word == "help" { return nil }
            if let next = subcommands.first(where: { names(of: $0).contains(word) }) {
                command = next
                path.append(word)
                index += 1
                continue
            }
            // Commands not for typing (the bus's handlers) are never suggested.
            let shown = subcommands.filter { $0.configuration.shouldDisplay }
            let close = shown.flatMap(names).filter { isClose(word, to: $0) }
            // With a default subcommand, the word may be that subcommand's argument.
            if close.isEmpty && command.configuration.defaultSubcommand != nil { return nil }
            let all = shown.compactMap { $0.configuration.commandName }
            let suggestion = close.isEmpty
                ? "its commands are \(all.joined(separator: ", "))"
                : "did you mean \(close.map { "'\($0)'" }.joined(separator: " or "))?"
            return "'\(word)' is not a \(path.joined(separator: " ")) command; \(suggestion) (see \(path.joined(separator: " ")) --help)"
        }
        return nil
    }

    private static func names(of command: any ParsableCommand.Type) -> [String] {
        [command.configuration.commandName].compactMap { $0 } + command.configuration.aliases
    }

    /// Within two edits (one for short words), or a beginning of the name.
    static func isClose(_ word: String, to name: String) -> Bool {
        guard word.count >= 2 else { return false }
        if name.hasPrefix(word) { return true }
        return editDistance(word, name) <= (name.count <= 4 ? 1 : 2)
    }

    /// Levenshtein distance, transpositions counting as one edit.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        guard !a.isEmpty, !b.isEmpty else { return max(a.count, b.count) }
        var rows = [Array(0...b.count), [Int](repeating: 0, count: b.count + 1), [Int](repeating: 0, count: b.count + 1)]
        for i in 1...a.count {
            let (previous, current) = ((i - 1) % 3, i % 3)
            rows[current][0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var best = min(rows[previous][j] + 1, rows[current][j - 1] + 1, rows[previous][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { best = min(best, rows[(i - 2) % 3][j - 2] + 1) }
                rows[current][j] = best
            }
        }
        return rows[a.count % 3][b.count]
    }
}
