import Foundation
import Testing
import TestSupport

/// One machine on X11 (Xvfb), the other on Wayland (headless sway), synced through PostgreSQL:
/// what is copied with xsel on one is pasted with wl-paste on the other and back, each copy is
/// exactly one record on the server (no echo), a password manager's copy and text over the
/// source's 256 KiB are not sent, and once its time is over the offer leaves the clipboard.
@Suite struct ClipboardMixedSessionsTests {
    @Test func xselOnX11AndWlPasteOnWaylandThroughTheServer() async throws {
        let xsel = try Executables.require("xsel", package: "xsel")
        // Clocks the test holds: an offer's time is over when the test says so.
        let desktop = try await BatonWorld.started(["--test-clock"]), laptop = try await BatonWorld.started(["--test-clock"])
        defer { desktop.close(); laptop.close() }
        let sync = try await SyncServer.fresh()
        _ = try await sync.join([desktop, laptop], names: ["desktop", "laptop"])
        for world in [desktop, laptop] { _ = try await world.baton(["sources", "enable", "clipboard"]) }

        let display = try await VirtualDisplay()
        defer { display.close() }
        var x11 = desktop.bus.environment.merging(["DISPLAY": display.name]) { $1 }
        x11["WAYLAND_DISPLAY"] = nil
        let onDesktop = try await ClipboardAgentProcess(desktop, environment: x11, watching: "X display \(display.name)")
        defer { onDesktop.process.kill(SIGKILL) }
        let sway = try await HeadlessCompositor(.sway)
        defer { sway.close() }
        var wayland = laptop.bus.environment.merging(sway.environment) { $1 }
        wayland["DISPLAY"] = nil
        let onLaptop = try await ClipboardAgentProcess(laptop, environment: wayland, watching: "Wayland display wayland-1")
        defer { onLaptop.process.kill(SIGKILL) }
        @Sendable func agents() -> String { "the desktop's agent said:\n\(onDesktop.said)\nthe laptop's agent said:\n\(onLaptop.said)" }
        for agent in [onDesktop, onLaptop] {
            try await eventually("the agent reads copies", context: agents()) { agent.said.contains("the clipboard source is on") }
        }
        @Sendable func records() async throws -> Int { Int(try await sync.psql("SELECT count(*) FROM baton.record").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1 }
        let before = try await records()

        func copyOnDesktop(_ text: String) async throws {
            // xsel forks to serve the selection; its output goes nowhere, so the run ends with the parent.
            let result = try await desktop.run("/bin/sh", ["-c", "'\(xsel)' --clipboard --input >/dev/null 2>&1"], environment: ["DISPLAY": display.name],
                                               stdin: text, timeout: .seconds(10))
            #expect(result.status == 0, "\(result)")
        }
        @Sendable func pasteOnLaptop() async throws -> String {
            try await laptop.run("/bin/sh", ["-c", "wl-paste --no-newline"], environment: sway.environment, timeout: .seconds(10)).stdout
        }
        func copyOnLaptop(_ text: String) async throws {
            let result = try await laptop.run("/bin/sh", ["-c", "wl-copy >/dev/null 2>&1"], environment: sway.environment, stdin: text, timeout: .seconds(10))
            #expect(result.status == 0, "\(result)")
        }
        @Sendable func pasteOnDesktop() async throws -> String {
            try await desktop.run(xsel, ["--clipboard", "--output"], environment: ["DISPLAY": display.name], timeout: .seconds(10)).stdout
        }

        let first = "copied with xsel on X11, pasted with wl-paste on Wayland: ünïcode"
        try await copyOnDesktop(first)
        try await eventually("wl-paste on the laptop pastes the desktop's copy", timeout: .seconds(15), context: agents()) { try await pasteOnLaptop() == first }
        let reply = "and back, from Wayland to X11"
        try await copyOnLaptop(reply)
        try await eventually("xsel on the desktop pastes the laptop's copy", timeout: .seconds(15), context: agents()) { try await pasteOnDesktop() == reply }
        // A third copy after the reply: the desktop's outbox sends in order, so an echo of the
        // reply, had there been one, would be on the server before it.
        let third = "a third copy, on the desktop"
        // Later than the laptop's reply on the clocks the test holds (each began when its daemon
        // started, the laptop's later): an older copy would lose to the laptop's own.
        _ = try await desktop.call("org.baton.Handoff1.Testing", "AdvanceClock", [.uint64(10_000_000)])
        try await copyOnDesktop(third)
        try await eventually("wl-paste on the laptop pastes the third copy", timeout: .seconds(15), context: agents()) { try await pasteOnLaptop() == third }
        #expect(try await records() == before + 3, "one record per copy, none for an echo: \(agents())")

        // A password manager's copy on the desktop (its hint the only type xclip offers) is not read: no record.
        let hinted = try await desktop.run("/bin/sh", ["-c", "xclip -selection clipboard -t x-kde-passwordManagerHint -i >/dev/null 2>&1"],
                                           environment: ["DISPLAY": display.name], stdin: "hunter2", timeout: .seconds(10))
        #expect(hinted.status == 0, "\(hinted)")
        try await eventually("the desktop's agent heard the password's copy", context: agents()) { onDesktop.said.contains("): secret") }
        #expect(try await records() == before + 3, "nothing sent for it: \(agents())")
        #expect(try await pasteOnLaptop() == third, "the laptop keeps what it had: \(agents())")

        // The third copy's time is over on the laptop (its 120 s, on the laptop's clock): batond
        // withdraws it, and the agent lets the clipboard go.
        _ = try await laptop.call("org.baton.Handoff1.Testing", "AdvanceClock", [.uint64(200_000_000)])
        try await eventually("wl-paste on the laptop finds the clipboard empty", timeout: .seconds(15), context: agents()) {
            try await pasteOnLaptop() != third
        }
        #expect(try await pasteOnLaptop() == "", "\(agents())")

        // Text over the source's 256 KiB is read no further than the cap, and not sent.
        try await copyOnLaptop(String(repeating: "x", count: 262_145))
        try await eventually("the laptop's agent refused the large copy", context: agents()) { onLaptop.said.contains("): too-large") }
        #expect(try await records() == before + 3, "nothing sent for it: \(agents())")
        #expect(!(try await pasteOnDesktop()).hasPrefix("xxxx"), "the desktop keeps its own last copy: \(agents())")
    }
}
