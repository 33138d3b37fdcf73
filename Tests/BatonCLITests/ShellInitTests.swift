import BatonCore
import Foundation
import Glibc
import Testing
import TestSupport

/// `baton shell-init bash|zsh|fish`: the lines a user adds to their rc file make each of the
/// three shells, interactive on a terminal (`script` gives it one), say its directory at each
/// prompt: OSC 7 to the terminal, the path percent-encoded byte by byte, and `$PWD` into its
/// file under `$XDG_RUNTIME_DIR/baton/shells`.
struct ShellInitTests {
    @Test(arguments: [
        ("bash", "bash --norc --noprofile -i", #"eval "$(BATON shell-init bash)""#),
        ("zsh", "zsh -f -i", #"eval "$(BATON shell-init zsh)""#),
        ("fish", "fish --no-config -i", "BATON shell-init fish | source"),
    ])
    func theShellSaysItsDirectoryToTheTerminalAndToBaton(shell: String, command: String, setup: String) async throws {
        _ = try Executables.require(shell, package: shell)
        let script = try Executables.require("script", package: "util-linux")
        let directory = try TemporaryDirectory.make(prefix: "baton-shell-init")
        defer { try? FileManager.default.removeItem(at: directory) }
        let shells = directory.appendingPathComponent("runtime/baton/shells"), target = directory.appendingPathComponent("a dir é")
        for made in [shells, target] { try FileManager.default.createDirectory(at: made, withIntermediateDirectories: true) }
        let lines = setup.replacingOccurrences(of: "BATON", with: try Executables.built("baton")) + "\ncd '\(target.path)'\nexit\n"
        let ran = try await Executables.run(script, ["-qec", command, "/dev/null"], environment: [
            "XDG_RUNTIME_DIR": directory.appendingPathComponent("runtime").path, "HOME": directory.path, "PATH": "/usr/bin:/bin", "TERM": "xterm",
            "LANG": "C.UTF-8",  // the path has an é: typed into a line editor, it is read in the locale
        ], stdin: lines, timeout: .seconds(20))
        #expect(ran.status == 0, "\(ran)")
        let encoded = target.path.replacingOccurrences(of: " ", with: "%20").replacingOccurrences(of: "é", with: "%C3%A9")
        #expect(ran.stdout.contains("\u{1B}]7;file://\(ThisMachine.hostName() ?? "")\(encoded)\u{1B}\\"), "\(ran.stdout.debugDescription)")
        let said = try FileManager.default.contentsOfDirectory(atPath: shells.path)
        #expect(said.count == 1 && said.allSatisfy { Int32($0) != nil }, "one file, named by the shell's pid: \(said)")
        let told = try said.first.map { try String(contentsOfFile: shells.appendingPathComponent($0).path, encoding: .utf8) }
        #expect(told == target.path + "\n")
    }
}
