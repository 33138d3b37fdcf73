import Foundation
import Glibc

/// `dbus-monitor` on a private bus, its output in a file: what the bus carried, as a
/// client we did not write prints it.
public final class BusMonitor: @unchecked Sendable {
    private let process: Subprocess
    private let output: String

    /// Starts monitoring `rules` (dbus-monitor's match expressions) and returns once it watches.
    public init(bus: PrivateBus, rules: [String]) async throws {
        let monitor = try Executables.require("dbus-monitor", package: "dbus-bin")
        output = bus.directory.appendingPathComponent("monitor-\(UUID().uuidString.prefix(8)).txt").path
        let fd = open(output, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        defer { close(fd) }
        process = try Subprocess(monitor, ["--address", bus.address] + rules, stdout: fd, stderr: fd)
        // It says NameLost once it has become a monitor (and so sees everything after).
        try await eventually("dbus-monitor watches the bus") { [output] in
            ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").contains("NameLost")
        }
    }

    /// Everything printed so far.
    public var text: String { (try? String(contentsOfFile: output, encoding: .utf8)) ?? "" }

    public func stop() {
        process.kill(SIGKILL)
    }

    deinit { stop() }
}
