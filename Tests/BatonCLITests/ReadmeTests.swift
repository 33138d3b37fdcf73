import Foundation
import Testing
import TestSupport

/// The shell examples of the README and the guide (docs/guide.md), run as a newcomer runs
/// them: pasted into the shell that `scripts/dev` opens (here with the programs this test run
/// built, a bus and a development directory of its own). Blocks marked `sh` are run, in order,
/// in one shell that stops at the first failing command; `console` blocks show output and are
/// not run.
@Suite(.serialized)
struct ReadmeTests {
    static let repository = Repository.root

    /// The `sh` blocks of `document`'s sections whose heading begins with one of `headings`.
    static func shellBlocks(of document: String, under headings: [String]) throws -> [String] {
        let readme = try String(contentsOf: repository.appendingPathComponent(document), encoding: .utf8)
        var blocks: [String] = []
        var inSection = false
        var block: [Substring]?
        for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
            if block == nil, line.hasPrefix("#") {
                let title = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces)
                inSection = headings.contains { title.hasPrefix($0) }
            } else if block == nil, line == "```sh" {
                block = []
            } else if let lines = block, line == "```" {
                if inSection { blocks.append(lines.joined(separator: "\n")) }
                block = nil
            } else if block != nil {
                block?.append(line)
            }
        }
        return blocks
    }

    func runInDevShell(_ script: String) async throws -> CommandResult {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("baton-readme-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let built = (try Executables.built("batond") as NSString).deletingLastPathComponent
        var environment = ProcessInfo.processInfo.environment
        environment["BATON_DEV_DIR"] = directory.appendingPathComponent("dev").path
        environment.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        let dev = Self.repository.appendingPathComponent("scripts/dev").path
        return try await Executables.run("/bin/bash", ["-c", "cd \"$1\" && exec \"$2\" --bin \"$3\" bash -euo pipefail -c \"$4\"", "bash",
                                                       directory.path, dev, built, "set -x\n" + script], environment: environment)
    }

    @Test func theREADMEsTourWorksAsWritten() async throws {
        let blocks = try Self.shellBlocks(of: "README.md", under: ["A short tour"])
        #expect(blocks.count == 1, "the README's tour moved: \(blocks.count) blocks found")
        let result = try await runInDevShell(blocks.joined(separator: "\n"))
        #expect(result.status == 0, "\(result.stderr.suffix(3000))")
        #expect(result.stdout.contains("Chapter 3") && result.stdout.contains("ContentView.CurrentTab"), "\(result.stdout.suffix(2000))")
    }

    @Test func theGuidesShellExamplesWorkAsWritten() async throws {
        let blocks = try Self.shellBlocks(of: "docs/guide.md", under: ["Try it from a shell", "The `baton` command line", "History",
                                                                     "Export and import", "Pausing", "Blocking and forgetting", "Hawk Notes"])
        #expect(blocks.count >= 7, "the guide's sections moved: \(blocks.count) blocks found")
        let result = try await runInDevShell(blocks.joined(separator: "\n"))
        #expect(result.status == 0, "\(result.stderr.suffix(3000))")
        #expect(result.stdout.contains("[ The Good Hawk ]"), "\(result.stdout.suffix(2000))")
        #expect(result.stdout.contains("forgot com.example.notes"), "\(result.stdout.suffix(2000))")
    }
}
