import Foundation
import Glibc
import Testing
import TestSupport

/// The clipboard agent on Wayland: two machines, each with its own bus, batond, headless
/// compositor (sway on one, KWin on the other: wlr-data-control both) and `baton
/// clipboard-agent`, synced through folders; the copies made and pasted with wl-copy and
/// wl-paste, programs we did not write. And GNOME's Mutter, which has no data-control.
@Suite(.serialized) struct ClipboardWaylandTests {
    /// A machine's compositor and agent, the agent's messages in a file.
    struct Session {
        let compositor: HeadlessCompositor
        let agentProcess: ClipboardAgentProcess
        var agent: Subprocess { agentProcess.process }
        var said: String { agentProcess.said }

        init(_ world: BatonWorld, on kind: HeadlessCompositor.Kind) async throws {
            compositor = try await HeadlessCompositor(kind, bus: world.bus.environment)
            var environment = world.bus.environment.merging(compositor.environment) { $1 }
            environment["DISPLAY"] = nil
            agentProcess = try await ClipboardAgentProcess(world, environment: environment, watching: "Wayland display wayland-1")
        }

        /// Copies `text` (or the file at `path`) as `type` with wl-copy, which forks to serve it
        /// until another copy takes the clipboard.
        func copy(_ text: String = "", file path: String? = nil, type: String? = nil, world: BatonWorld) async throws {
            let copier = try Executables.require("wl-copy", package: "wl-clipboard")
            let typed = type.map { " --type '\($0)'" } ?? ""
            let input = path.map { " < '\($0)'" } ?? ""
            let result = try await world.run("/bin/sh", ["-c", "'\(copier)'\(typed)\(input) >/dev/null 2>&1"], environment: compositor.environment,
                                             stdin: path == nil ? text : nil, timeout: .seconds(10))
            #expect(result.status == 0, "\(result)")
        }

        /// What wl-paste pastes now, as `type`, into the file at `path`; its text when no path is given.
        func paste(type: String? = nil, into path: String? = nil, world: BatonWorld) async throws -> String {
            let paster = try Executables.require("wl-paste", package: "wl-clipboard")
            let typed = type.map { " --type '\($0)'" } ?? ""
            let output = path.map { " > '\($0)'" } ?? ""
            return try await world.run("/bin/sh", ["-c", "'\(paster)' --no-newline\(typed)\(output)"], environment: compositor.environment,
                                       timeout: .seconds(10)).stdout
        }

        func close() {
            agent.kill(SIGKILL)
            compositor.close()
        }
    }

    @Test func copiedWithWlCopyOnOneMachinePastesWithWlPasteOnTheOther() async throws {
        let desktop = try await BatonWorld.started(), laptop = try await BatonWorld.started()
        defer { desktop.close(); laptop.close() }
        let (place, _) = try await MachinesMeet.folder.join([desktop, laptop], names: ["desktop", "laptop"])
        defer { place.close() }
        for world in [desktop, laptop] { _ = try await world.baton(["sources", "enable", "clipboard"]) }
        let onDesktop = try await Session(desktop, on: .sway), onLaptop = try await Session(laptop, on: .kwin)
        defer { onDesktop.close(); onLaptop.close() }
        @Sendable func agents() -> String { "the desktop's agent said:\n\(onDesktop.said)\nthe laptop's agent said:\n\(onLaptop.said)" }
        for session in [onDesktop, onLaptop] {
            try await eventually("the agent reads copies", context: agents()) { session.said.contains("the clipboard source is on") }
        }

        let text = "Copied on the desktop under sway, pasted under KWin: ünïcode, \"quotes\" and a newline\n"
        try await onDesktop.copy(text, world: desktop)
        try await eventually("wl-paste on the laptop pastes the desktop's copy", timeout: .seconds(15), context: agents()) {
            try await onLaptop.paste(world: laptop) == text
        }
        #expect(onDesktop.said.contains("(text/plain;charset=utf-8): sent"), "\(agents())")
        #expect(onLaptop.said.contains("offering"), "\(agents())")
        // What the laptop offers lists the names X11 apps ask for through Xwayland too.
        let types = try await laptop.run("/bin/sh", ["-c", "wl-paste --list-types"], environment: onLaptop.compositor.environment).stdout
        #expect(types.contains("UTF8_STRING") && types.contains("text/plain;charset=utf-8"), "\(types)")

        // A 300 KB image, offered as image/png on the other side, byte for byte.
        let directory = desktop.bus.directory
        let image = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        let imagePath = directory.appendingPathComponent("copied.png").path, pastedPath = directory.appendingPathComponent("pasted.png").path
        try image.write(to: URL(fileURLWithPath: imagePath))
        try await onDesktop.copy(file: imagePath, type: "image/png", world: desktop)
        try await eventually("wl-paste on the laptop pastes the desktop's image", timeout: .seconds(15), context: agents()) {
            _ = try await onLaptop.paste(type: "image/png", into: pastedPath, world: laptop)
            return FileManager.default.contents(atPath: pastedPath) == image
        }

        // A password manager's copy (its hint among the types) is never read or sent: the laptop keeps the image.
        try await onDesktop.copy("hunter2", type: "x-kde-passwordManagerHint", world: desktop)
        try await eventually("the desktop's agent heard the password's copy", context: agents()) { onDesktop.said.contains(": secret") }
        #expect(try await laptop.run("/bin/sh", ["-c", "wl-paste --list-types"], environment: onLaptop.compositor.environment)
            .stdout.contains("image/png"), "\(agents())")

        // And back: the desktop's agent owns the clipboard then, and tells batond of no copy of its own.
        let reply = "and a reply from the laptop"
        try await onLaptop.copy(reply, world: laptop)
        try await eventually("wl-paste on the desktop pastes the laptop's copy", timeout: .seconds(15), context: agents()) {
            try await onDesktop.paste(world: desktop) == reply
        }
        #expect(onLaptop.said.contains("a copy of \(reply.utf8.count) bytes (text/plain;charset=utf-8): sent"), "\(agents())")
        #expect(onDesktop.said.components(separatedBy: "a copy of").count == 4, "three copies made on the desktop, no echo: \(agents())")
        #expect(onLaptop.said.components(separatedBy: "a copy of").count == 2, "one copy made on the laptop, no echo: \(agents())")
    }

    /// The compositor going away ends the agent with status 0, saying so; batond answers on.
    @Test func theAgentEndsWithItsCompositor() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        _ = try await world.baton(["sources", "enable", "clipboard"])
        let session = try await Session(world, on: .sway)
        defer { session.close() }
        let watched = try await world.baton(["doctor"])
        #expect(watched.stdout.contains("clipboard: on; 1 agent(s) watching"), "\(watched)")
        session.compositor.close()
        let ended = try await within(.seconds(10), "the agent after its compositor went") { await session.agent.wait() }
        #expect(ended == 0, "the agent ends with status 0 when its compositor goes away: \(session.said)")
        #expect(session.said.contains("the Wayland display went away"), "\(session.said)")
        #expect(try await world.call("org.baton.Handoff1.Clipboard", "Offer").first?.stringValue == "", "batond still answers")
    }

    /// GNOME's compositor has no data-control protocol: the agent says so plainly and stops
    /// with status 3, which the user unit does not restart.
    @Test func underMutterTheAgentSaysItCannotAndStops() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let mutter = try await HeadlessCompositor(.mutter, bus: world.bus.environment)
        defer { mutter.close() }
        var environment = world.bus.environment.merging(mutter.environment) { $1 }
        environment["DISPLAY"] = nil
        let agent = try await Executables.run(try Executables.built("baton"), ["clipboard-agent"], environment: environment, timeout: .seconds(20))
        #expect(agent.status == 3, "\(agent)")
        #expect(agent.stderr.contains("offers no data-control protocol") && agent.stderr.contains("GNOME's Mutter has none"), "\(agent)")
        // And baton says so where the user turns the source on, in GNOME's Wayland session.
        let gnome = ["XDG_SESSION_TYPE": "wayland", "XDG_CURRENT_DESKTOP": "ubuntu:GNOME"]
        let enabled = try await world.baton(["sources", "enable", "clipboard"], environment: gnome)
        #expect(enabled.status == 0 && enabled.stderr.contains("GNOME on Wayland lets no background program watch or set the clipboard"), "\(enabled)")
        let unit = try String(contentsOf: Repository.root.appendingPathComponent("systemd/baton-clipboard.service"), encoding: .utf8)
        #expect(unit.contains("RestartPreventExitStatus=3"), "the unit restarts an agent that cannot")
    }
}
