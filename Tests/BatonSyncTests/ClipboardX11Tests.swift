import Foundation
import Glibc
import Synchronization
import Testing
import TestSupport

/// The clipboard agent on X11: two machines, each with its own bus, batond, Xvfb display and
/// `baton clipboard-agent`, synced through folders; the copies made and pasted with xclip, a
/// program we did not write.
@Suite(.serialized) struct ClipboardX11Tests {
    /// A machine's display and agent, the agent's messages in a file.
    struct Session {
        let display: VirtualDisplay
        let agentProcess: ClipboardAgentProcess
        var agent: Subprocess { agentProcess.process }
        var said: String { agentProcess.said }

        init(_ world: BatonWorld) async throws {
            display = try await VirtualDisplay()
            var environment = world.bus.environment.merging(["DISPLAY": display.name]) { $1 }
            // Exported empty, as some sessions do: the same as not set.
            environment["WAYLAND_DISPLAY"] = ""
            agentProcess = try await ClipboardAgentProcess(world, environment: environment, watching: "X display \(display.name)")
        }

        func close() {
            agent.kill(SIGKILL)
            display.close()
        }
    }

    func xclip(_ arguments: [String], on session: Session, world: BatonWorld, stdin: String? = nil) async throws -> CommandResult {
        let xclip = try Executables.require("xclip", package: "xclip")
        return try await world.run(xclip, ["-selection", "clipboard"] + arguments, environment: ["DISPLAY": session.display.name], stdin: stdin,
                                   timeout: .seconds(10))
    }

    /// The agent reads nothing while the source is off; a second agent for the same display
    /// stops; killing the agent, then the X server, leaves batond answering, and the agent ends
    /// with its display, saying so, with status 0.
    @Test func theAgentComesAndGoesAndBatondStays() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let session = try await Session(world)
        defer { session.close() }
        _ = try await xclip(["-i"], on: session, world: world, stdin: "copied while the source is off")
        // Its Status.Sources read shows the source off: no copy is read or told to batond.
        _ = try await world.baton(["sources", "enable", "clipboard"])
        try await eventually("the agent heard the source is on") { session.said.contains("the clipboard source is on") }
        _ = try await xclip(["-i"], on: session, world: world, stdin: "copied with the source on")
        try await eventually("the agent told batond of the second copy only") { session.said.contains("bytes (text/plain;charset=utf-8): no-sync") }
        #expect(!session.said.contains("a copy of 30 bytes"), "\(session.said)")
        #expect(session.said.components(separatedBy: "a copy of").count == 2, "one copy told: \(session.said)")

        let second = try Subprocess(try Executables.built("baton"), ["clipboard-agent"],
                                    environment: world.bus.environment.merging(["DISPLAY": session.display.name]) { $1 })
        defer { second.kill(SIGKILL) }
        #expect(try await within(.seconds(10), "the second agent") { await second.wait() } == 0, "a second agent for the display stops at once")

        let watched = try await world.baton(["doctor"])
        #expect(watched.stdout.contains("clipboard: on; 1 agent(s) watching"), "\(watched)")
        session.agent.kill(SIGKILL)
        #expect(try await world.call("org.baton.Handoff1.Clipboard", "Offer").first?.stringValue == "", "batond answers without its agent")
        try await eventually("doctor says no agent runs") {
            try await world.baton(["doctor"], environment: ["XDG_SESSION_TYPE": "x11"]).stdout.contains("no clipboard agent runs in this session")
        }
        let gnome = try await world.baton(["doctor"], environment: ["XDG_SESSION_TYPE": "wayland", "XDG_CURRENT_DESKTOP": "GNOME"])
        #expect(gnome.stdout.contains("GNOME on Wayland lets no background program watch or set the clipboard"), "\(gnome)")
        let again = try await Session(world)
        defer { again.close() }
        again.display.close()
        let ended = try await within(.seconds(10), "the agent after its display went") { await again.agent.wait() }
        #expect(ended == 0, "the agent ends with status 0 when its display goes away")
        #expect(again.said.contains("the X display went away"), "\(again.said)")
        #expect(try await world.call("org.baton.Handoff1.Clipboard", "Offer").first?.stringValue == "", "batond still answers")
    }

    /// The user changes a cap while the agent runs: the agent reads it again at once
    /// (`Status.SourceSettingChanged`), so the next copy is read to the new cap, not the old one.
    @Test func aCapChangedWhileTheAgentRunsHoldsForTheNextCopy() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        _ = try await world.baton(["sources", "enable", "clipboard"])
        _ = try await world.baton(["sources", "set", "clipboard", "max-text", "10"])
        let session = try await Session(world)
        defer { session.close() }
        try await eventually("the agent reads copies", context: session.said) { session.said.contains("the clipboard source is on") }
        #expect(session.said.contains("reads text of up to 10 bytes"), "\(session.said)")
        // Raised: a copy of 50 bytes is read whole, and batond takes it (no sync here: no-sync).
        _ = try await world.baton(["sources", "set", "clipboard", "max-text", "100"])
        try await eventually("the agent read the raised cap", context: session.said) { session.said.contains("reads text of up to 100 bytes") }
        let fifty = String(repeating: "5", count: 50)
        _ = try await xclip(["-i"], on: session, world: world, stdin: fifty)
        try await eventually("the copy read to the new cap", context: session.said) {
            session.said.contains("a copy of 50 bytes (text/plain;charset=utf-8): no-sync")
        }
        // Lowered again: the same size is no longer read.
        _ = try await world.baton(["sources", "set", "clipboard", "max-text", "20"])
        try await eventually("the agent read the lowered cap", context: session.said) { session.said.contains("reads text of up to 20 bytes") }
        _ = try await xclip(["-i"], on: session, world: world, stdin: String(repeating: "6", count: 50))
        try await eventually("the copy over the new cap not read", context: session.said) {
            session.said.contains("a copy of 0 bytes (text/plain;charset=utf-8): too-large")
        }
    }

    /// A hostile owner of the clipboard (Tests/Scripts/hostile-owner.c): 10 000 targets, no
    /// answer at all, or a 1 GiB INCR transfer. The agent drops each within its deadline and
    /// its cap, tells batond a copy was made that was not sent, and hears the next copy. A
    /// busy owner, 2 s late with each answer (an app drawing its first frame on a loaded
    /// machine), is no enemy: its copy is read.
    @Test(arguments: ["targets", "silent", "incr", "slow"]) func aHostileOwnerIsDroppedWithinItsDeadline(mode: String) async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        _ = try await world.baton(["sources", "enable", "clipboard"])
        let session = try await Session(world)
        defer { session.close() }
        try await eventually("the agent reads copies") { session.said.contains("the clipboard source is on") }
        let owner = world.bus.directory.appendingPathComponent("hostile-owner").path
        let built = try await world.run(try Executables.require("clang", package: "the Swift toolchain's clang"), [
            "-O2", "-o", owner, Repository.root.appendingPathComponent("Tests/Scripts/hostile-owner.c").path, "-lX11",
        ])
        try #require(built.status == 0, "\(built)")
        let hostile = try Subprocess(owner, [mode], environment: world.bus.environment.merging(["DISPLAY": session.display.name]) { $1 })
        defer { hostile.kill(SIGKILL) }
        let expected = switch mode {
        case "incr": "a copy of 0 bytes (text/plain;charset=utf-8): too-large"
        case "slow": "a copy of 15 bytes (text/plain;charset=utf-8): no-sync"
        default: "a copy of 0 bytes (text/plain;charset=utf-8): unsupported"
        }
        try await eventually("the agent is done with the \(mode) owner", timeout: .seconds(15), context: session.said) { session.said.contains(expected) }
        _ = try await xclip(["-i"], on: session, world: world, stdin: "still listening here")
        try await eventually("the agent hears the next copy", context: session.said) { session.said.contains("a copy of 20 bytes (text/plain;charset=utf-8): no-sync") }
    }

    @Test func copiedWithXclipOnOneMachinePastesWithXclipOnTheOther() async throws {
        let desktop = try await BatonWorld.started(), laptop = try await BatonWorld.started()
        defer { desktop.close(); laptop.close() }
        let (place, _) = try await MachinesMeet.folder.join([desktop, laptop], names: ["desktop", "laptop"])
        defer { place.close() }
        for world in [desktop, laptop] { _ = try await world.baton(["sources", "enable", "clipboard"]) }
        let onDesktop = try await Session(desktop), onLaptop = try await Session(laptop)
        defer { onDesktop.close(); onLaptop.close() }
        @Sendable func agents() -> String { "the desktop's agent said:\n\(onDesktop.said)\nthe laptop's agent said:\n\(onLaptop.said)" }
        for session in [onDesktop, onLaptop] {
            try await eventually("the agent reads copies") { session.said.contains("the clipboard source is on") }
        }

        let text = "Copied on the desktop: ünïcode, \"quotes\" and a newline\n"
        let copied = try await xclip(["-i"], on: onDesktop, world: desktop, stdin: text)
        #expect(copied.status == 0, "\(copied)")
        try await eventually("xclip on the laptop pastes the desktop's copy", timeout: .seconds(15), context: agents()) {
            try await xclip(["-o"], on: onLaptop, world: laptop).stdout == text
        }
        #expect(onDesktop.said.contains("(text/plain;charset=utf-8): sent"), "\(onDesktop.said)")
        #expect(onLaptop.said.contains("offering"), "\(onLaptop.said)")

        // A 300 KB image, offered as image/png on the other side, byte for byte.
        let directory = desktop.bus.directory
        let image = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        let imagePath = directory.appendingPathComponent("copied.png").path, pastedPath = directory.appendingPathComponent("pasted.png").path
        try image.write(to: URL(fileURLWithPath: imagePath))
        _ = try await xclip(["-t", "image/png", "-i", imagePath], on: onDesktop, world: desktop)
        try await eventually("xclip on the laptop pastes the desktop's image", timeout: .seconds(15), context: agents()) {
            _ = try await laptop.run("/bin/sh", ["-c", "xclip -selection clipboard -o -t image/png > '\(pastedPath)'"],
                                     environment: ["DISPLAY": onLaptop.display.name], timeout: .seconds(10))
            return FileManager.default.contents(atPath: pastedPath) == image
        }

        // A password manager's copy (its hint among the types) is never read or sent: the laptop keeps the image.
        _ = try await xclip(["-t", "x-kde-passwordManagerHint", "-i"], on: onDesktop, world: desktop, stdin: "secret")
        try await eventually("the desktop's agent heard the password's copy", context: agents()) { onDesktop.said.contains(": secret") }
        #expect(try await laptop.run("/bin/sh", ["-c", "xclip -selection clipboard -o -t TARGETS"],
                                     environment: ["DISPLAY": onLaptop.display.name]).stdout.contains("image/png"))

        // Copied from a GTK 4 text field (select all, the entry's own copy action, as Ctrl+C does).
        let python = try Executables.require("/usr/bin/python3", package: "python3-gi gir1.2-gtk-4.0")
        /// Tests/Scripts/gtk-clipboard.py on the desktop's display, and what it said so far.
        func gtkClipboard(_ arguments: [String]) throws -> (process: Subprocess, said: @Sendable () -> String) {
            let path = directory.appendingPathComponent("gtk-\(arguments[0]).out").path
            let output = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            defer { Glibc.close(output) }
            let process = try Subprocess(python, [Repository.root.appendingPathComponent("Tests/Scripts/gtk-clipboard.py").path] + arguments,
                                         environment: desktop.bus.environment.merging(["DISPLAY": onDesktop.display.name]) { $1 }, stdout: output)
            return (process, { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" })
        }
        let fromGTK = "Copied from a GTK 4 text field: ünïcode"
        let copier = try gtkClipboard(["copy", fromGTK])
        defer { copier.process.kill(SIGKILL) }
        try await eventually("GTK copied", timeout: .seconds(20)) { copier.said().contains("copied") }
        let lastPaste = Mutex("")
        // Up to 30 s: on a loaded machine GTK may take the agent's whole answer and transfer
        // deadlines (5 s, 10 s) before the copy even leaves the desktop.
        try await eventually("xclip on the laptop pastes what GTK copied on the desktop", timeout: .seconds(30),
                             context: agents() + "\nxclip -o last gave: " + lastPaste.withLock { $0 }) {
            let pasted = try await xclip(["-o"], on: onLaptop, world: laptop)
            lastPaste.withLock { $0 = "\(pasted)" }
            return pasted.stdout == fromGTK
        }

        // And back, without echoing the desktop's copy: the laptop's agent owns the clipboard now.
        let reply = "and a reply from the laptop"
        _ = try await xclip(["-i"], on: onLaptop, world: laptop, stdin: reply)
        try await eventually("xclip on the desktop pastes the laptop's copy", timeout: .seconds(15), context: agents()) {
            try await xclip(["-o"], on: onDesktop, world: desktop).stdout == reply
        }

        // Pasted into a GTK 4 text field (its own paste action, as Ctrl+V does): what a person sees.
        let screenshot = ProcessInfo.processInfo.environment["BATON_SCREENSHOTS"].map { $0 + "/clipboard-pasted-in-gtk.png" }
        let paster = try gtkClipboard(["paste"] + (screenshot.map { [$0] } ?? []))
        defer { paster.process.kill(SIGKILL) }
        try await eventually("GTK on the desktop pastes the laptop's copy", timeout: .seconds(20), context: agents() + "\ngtk-clipboard.py said: " + paster.said()) {
            paster.said().contains("pasted \"\(reply)\"")
        }
        if screenshot != nil {
            try await eventually("the screen photographed", timeout: .seconds(10)) { paster.said().contains("photographed") }
        }
    }

    /// An image larger than one X request (Xvfb's largest is 16 MiB) is sent by INCR, a chunk at
    /// a time, both ways: xclip hands the agent 20 MB that way, and the other machine's agent
    /// hands xclip the same 20 MB that way.
    @Test func anImageLargerThanOneXRequestCrossesByINCR() async throws {
        let desktop = try await BatonWorld.started(), laptop = try await BatonWorld.started()
        defer { desktop.close(); laptop.close() }
        let (place, _) = try await MachinesMeet.folder.join([desktop, laptop], names: ["desktop", "laptop"])
        defer { place.close() }
        for world in [desktop, laptop] {
            _ = try await world.baton(["sources", "enable", "clipboard"])
            _ = try await world.baton(["sources", "set", "clipboard", "max-image", "33554432"])
        }
        let onDesktop = try await Session(desktop), onLaptop = try await Session(laptop)
        defer { onDesktop.close(); onLaptop.close() }
        @Sendable func agents() -> String { "the desktop's agent said:\n\(onDesktop.said)\nthe laptop's agent said:\n\(onLaptop.said)" }
        let block = Data((0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 17) })
        var built = Data()
        for round in 0..<20 { built.append(block); built.append(UInt8(round)) }
        let image = built
        let imagePath = desktop.bus.directory.appendingPathComponent("large.png").path
        let pastedPath = laptop.bus.directory.appendingPathComponent("pasted.png").path
        try image.write(to: URL(fileURLWithPath: imagePath))
        _ = try await xclip(["-t", "image/png", "-i", imagePath], on: onDesktop, world: desktop)
        try await eventually("the desktop's agent sent the large image", timeout: .seconds(30), context: agents()) {
            onDesktop.said.contains("a copy of \(image.count) bytes (image/png): sent")
        }
        try await eventually("xclip on the laptop pastes the 20 MB image", timeout: .seconds(30), context: agents()) {
            _ = try await laptop.run("/bin/sh", ["-c", "xclip -selection clipboard -o -t image/png > '\(pastedPath)'"],
                                     environment: ["DISPLAY": onLaptop.display.name], timeout: .seconds(20))
            return FileManager.default.contents(atPath: pastedPath) == image
        }
    }
}
