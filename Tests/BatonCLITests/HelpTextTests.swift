import Foundation
import Testing
import TestSupport

/// Every help text of the programs we ship reads as prose: no run of spaces inside a sentence
/// (a multi-line string literal without its `\` line continuations puts the source's indentation
/// there, as `baton help pause` once showed), no tab, no space at a line's end.
@Suite struct HelpTextTests {
    @Test(arguments: ["baton", "batond", "hawk-notes"]) func everyHelpTextIsUnbroken(program: String) async throws {
        let dumped = try await Executables.run(try Executables.built(program), ["--experimental-dump-help"])
        #expect(dumped.status == 0, "\(dumped)")
        let tree = try #require(try JSONSerialization.jsonObject(with: Data(dumped.stdout.utf8)) as? [String: Any])
        var read = 0
        var broken: [String] = []
        func walk(_ command: [String: Any], _ path: String) {
            let arguments = command["arguments"] as? [[String: Any]] ?? []
            for item in [command] + arguments {
                for key in ["abstract", "discussion"] {
                    guard let text = item[key] as? String, !text.isEmpty else { continue }
                    read += 1
                    if text.contains("\t") || text.contains(" \n") || text.hasSuffix(" ")
                        || text.split(separator: "\n").contains(where: { $0.drop(while: { $0 == " " }).contains("  ") }) {
                        broken.append("\(path) \(item["valueName"] as? String ?? "") \(key): \(text)")
                    }
                }
            }
            for sub in command["subcommands"] as? [[String: Any]] ?? [] {
                walk(sub, path + " " + (sub["commandName"] as? String ?? "?"))
            }
        }
        walk(try #require(tree["command"] as? [String: Any]), program)
        #expect(read >= 10, "the dump had \(read) texts: not the tree it should be")
        #expect(broken.isEmpty, "\(broken.joined(separator: "\n"))")
    }
}
