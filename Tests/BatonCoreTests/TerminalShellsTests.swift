@testable import BatonCore
import Foundation
import Testing

/// What the terminals source reads of a shell and makes of it: `/proc`'s stat line, ssh's
/// arguments, blocked paths, titles, OSC 7's URL and how a terminal is opened again.
struct TerminalShellsTests {
    @Test func aStatLineIsReadAfterItsNamesLastParenthesis() throws {
        let line = "4242 (we (ird) name) S 4200 4242 4242 34816 4300 4194560 1 2 3 4 5 6 7 8 20 0 1 0 987654 0 0"
        let parsed = try #require(TerminalShells.ProcessStat(line))
        #expect(parsed.comm == "we (ird) name" && parsed.parent == 4200 && parsed.group == 4242)
        #expect(parsed.foregroundGroup == 4300 && parsed.startTime == 987654 && parsed.state == "S")
        #expect(TerminalShells.ProcessStat("4242 (cut short) S 1 2") == nil)
        #expect(TerminalShells.ProcessStat("no name at all") == nil)
    }

    @Test func sshsDestinationIsReadAsSshReadsIt() {
        #expect(SSHDestination(arguments: ["build.example.org"]) == SSHDestination(host: "build.example.org"))
        #expect(SSHDestination(arguments: ["-t", "ana@build"]) == SSHDestination(host: "build", user: "ana"))
        #expect(SSHDestination(arguments: ["-p", "2222", "-l", "ana", "-i", "key", "build"]) == SSHDestination(host: "build", user: "ana", port: "2222"))
        #expect(SSHDestination(arguments: ["-tAp2222", "build", "uptime"]) == SSHDestination(host: "build", port: "2222"))
        #expect(SSHDestination(arguments: ["ssh://ana@build:2222/"]) == SSHDestination(host: "build", user: "ana", port: "2222"))
        #expect(SSHDestination(arguments: ["--", "build"]) == SSHDestination(host: "build"))
        #expect(SSHDestination(arguments: ["-o", "ProxyJump=gate"]) == nil)
        #expect(SSHDestination(arguments: []) == nil)
        #expect(SSHDestination(arguments: ["host'; rm -rf ~"]) == nil)
    }

    @Test func aBlockedPathHoldsItsDirectoryAndWhatIsBelow() {
        let patterns = "~/.ssh:~/.gnupg:/srv/secr*"
        #expect(TerminalShells.isBlocked("/home/ana/.ssh", patterns: patterns, home: "/home/ana"))
        #expect(TerminalShells.isBlocked("/home/ana/.gnupg/private-keys-v1.d", patterns: patterns, home: "/home/ana"))
        #expect(TerminalShells.isBlocked("/srv/secrets/db", patterns: patterns, home: "/home/ana"))
        #expect(!TerminalShells.isBlocked("/home/ana/.sshx", patterns: patterns, home: "/home/ana"))
        #expect(!TerminalShells.isBlocked("/home/ana", patterns: patterns, home: "/home/ana"))
        #expect(!TerminalShells.isBlocked("/srv", patterns: patterns, home: "/home/ana"))
        #expect(!TerminalShells.isBlocked("/home/ana/.ssh", patterns: "", home: "/home/ana"))
        // Without a home, a pattern in it blocks nothing rather than the root.
        #expect(!TerminalShells.isBlocked("/x", patterns: "~", home: nil))
    }

    @Test func aDirectoryIsSaidAsAPersonSaysIt() {
        #expect(TerminalShells.spoken("/home/ana/src/baton", home: "/home/ana") == "~/src/baton")
        #expect(TerminalShells.spoken("/home/ana", home: "/home/ana") == "~")
        #expect(TerminalShells.spoken("/home/anabel", home: "/home/ana") == "/home/anabel")
        #expect(TerminalShells.fileURL(host: "desk", path: "/tmp/a dir é") == "file://desk/tmp/a%20dir%20%C3%A9")
    }

    @Test func aTerminalIsOpenedWhereItWasOrAsNearAsThisMachineHas() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("terminal-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let everything: (String) -> Bool = { _ in true }

        let here = TerminalSession(cwd: directory, terminal: "foot")
        #expect(here.opening(home: "/", installed: everything)?.arguments == ["foot", "--working-directory=\(directory)"])
        let gone = TerminalSession(cwd: directory + "/not/here", terminal: "org.kde.konsole")
        let opened = try #require(gone.opening(home: "/", installed: everything))
        #expect(opened.arguments == ["konsole", "--workdir", directory] && opened.directory == directory)

        let ssh = TerminalSession(cwd: "/srv/it's", terminal: "org.gnome.Terminal", host: "build", user: "ana")
        #expect(ssh.opening(home: directory, installed: everything)?.arguments == [
            "gnome-terminal", "--working-directory=\(directory)", "--", "ssh", "-t", "-l", "ana", "--", "build", #"cd '/srv/it'\''s' && exec "$SHELL" -l"#,
        ])
        // Its own terminal not installed: Debian's alternative, started in the directory.
        let fallback = try #require(here.opening(home: "/", installed: { $0 == "x-terminal-emulator" }))
        #expect(fallback.arguments == ["x-terminal-emulator"] && fallback.directory == directory)
        #expect(here.opening(home: "/", installed: { _ in false }) == nil)
        #expect(TerminalSession(payload: here.payload) == here && TerminalSession(payload: ssh.payload) == ssh)
        let ported = TerminalSession(cwd: "", terminal: "foot", host: "build", port: "2222")
        #expect(ported.opening(home: directory, installed: everything)?.arguments == [
            "foot", "--working-directory=\(directory)", "ssh", "-t", "-p", "2222", "--", "build",
        ])
        #expect(TerminalSession(payload: ported.payload) == ported)
    }
}
