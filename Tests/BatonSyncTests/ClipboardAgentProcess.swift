import Foundation
import Glibc
import TestSupport

/// `baton clipboard-agent` on a world's bus, its messages in a file, started once it says it
/// watches `display` (as it names it: "X display :7", "Wayland display wayland-1").
struct ClipboardAgentProcess {
    let process: Subprocess
    let log: String

    init(_ world: BatonWorld, environment: [String: String], watching display: String) async throws {
        let log = world.bus.directory.appendingPathComponent("agent.log").path
        self.log = log
        let output = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer { Glibc.close(output) }
        process = try Subprocess(try Executables.built("baton"), ["clipboard-agent"], environment: environment, stderr: output)
        let said: @Sendable () -> String = { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        try await eventually("the agent watches \(display)", context: said()) { said().contains("watching the clipboard of \(display)") }
    }

    /// What the agent said so far.
    var said: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
}
