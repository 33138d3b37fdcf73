import Foundation
import Glibc

/// An X display of its own (Xvfb) for a test. Xvfb picks a free display number and writes it
/// once it accepts connections (`-displayfd`): choosing a number ourselves collided with the
/// sockets that earlier, killed Xvfbs leave in /tmp/.X11-unix, which look like a listening server.
public final class VirtualDisplay: Sendable {
    /// The value for `DISPLAY`, such as ":7".
    public let name: String
    private let server: Subprocess
    private let directory: URL

    public init(width: Int = 800, height: Int = 600, timeout: Duration = .seconds(20)) async throws {
        let xvfb = try Executables.require("Xvfb", package: "xvfb")
        directory = try TemporaryDirectory.make(prefix: "baton-xvfb")
        let numberFile = directory.appendingPathComponent("display").path
        let output = open(numberFile, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw TestSupportError("could not create \(numberFile)") }
        defer { Glibc.close(output) }
        let errors = open("/dev/null", O_WRONLY | O_CLOEXEC)
        defer { Glibc.close(errors) }
        server = try Subprocess(xvfb, ["-displayfd", "1", "-screen", "0", "\(width)x\(height)x24", "-nolisten", "tcp"],
                                stdout: output, stderr: errors)
        let named: @Sendable () -> String? = {
            let written = (try? String(contentsOfFile: numberFile, encoding: .utf8)) ?? ""
            return written.hasSuffix("\n") ? written.trimmingCharacters(in: .whitespacesAndNewlines) : nil
        }
        do {
            try await eventually("Xvfb names its display", timeout: timeout) { [server] in
                guard !server.hasExited else { throw TestSupportError("Xvfb ended before it named its display") }
                return named() != nil
            }
        } catch {
            server.kill(SIGKILL)
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        name = ":" + (named() ?? "")
    }

    /// Stops the server and removes its files.
    public func close() {
        server.kill(SIGKILL)
        try? FileManager.default.removeItem(at: directory)
    }
}
