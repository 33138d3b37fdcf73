import Foundation
import Glibc

/// A Wayland compositor of its own for a test: sway on wlroots' headless backend, in a runtime
/// directory of its own, so that its display is always `wayland-1` there. sway refuses to run as
/// root, so as root it runs as the unprivileged user 65534 (nobody), which owns the directory;
/// root's clients reach its socket all the same.
public final class HeadlessCompositor: Sendable {
    /// `XDG_RUNTIME_DIR` and `WAYLAND_DISPLAY` for the compositor's clients.
    public let environment: [String: String]
    private let server: Subprocess
    private let directory: URL

    public init(timeout: Duration = .seconds(20)) async throws {
        let sway = try Executables.require("sway", package: "sway")
        let directory = try TemporaryDirectory.make(prefix: "baton-sway")
        self.directory = directory
        let config = directory.appendingPathComponent("config").path
        try "output HEADLESS-1 resolution 800x600\nxwayland disable\n".write(toFile: config, atomically: true, encoding: .utf8)
        var command = [sway, "-c", config]
        if getuid() == 0 {
            let nobody: uid_t = 65534
            guard chown(directory.path, nobody, gid_t(nobody)) == 0, chown(config, nobody, gid_t(nobody)) == 0 else {
                throw TestSupportError("could not hand \(directory.path) to user 65534: \(String(cString: strerror(errno)))")
            }
            command = [try Executables.require("setpriv", package: "util-linux"), "--reuid=65534", "--regid=65534", "--clear-groups"] + command
        }
        chmod(directory.path, 0o700)
        let log = open(directory.appendingPathComponent("sway.log").path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        defer { Glibc.close(log) }
        var serverEnvironment = ProcessInfo.processInfo.environment.filter { !["DISPLAY", "WAYLAND_DISPLAY", "SWAYSOCK"].contains($0.key) }
        serverEnvironment.merge(["XDG_RUNTIME_DIR": directory.path, "WLR_BACKENDS": "headless", "WLR_LIBINPUT_NO_DEVICES": "1",
                                 "WLR_RENDERER": "pixman"]) { $1 }
        server = try Subprocess(command[0], Array(command.dropFirst()), environment: serverEnvironment, stdout: log, stderr: log)
        environment = ["XDG_RUNTIME_DIR": directory.path, "WAYLAND_DISPLAY": "wayland-1"]
        let socket = directory.appendingPathComponent("wayland-1").path
        do {
            try await eventually("sway listens on its Wayland socket", timeout: timeout, context: Self.said(in: directory)) { [server] in
                guard !server.hasExited else { throw TestSupportError("sway ended before it listened: \(Self.said(in: directory))") }
                var info = stat()
                return stat(socket, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
            }
        } catch {
            server.kill(SIGKILL)
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// The end of sway's log.
    private static func said(in directory: URL) -> String {
        String(((try? String(contentsOfFile: directory.appendingPathComponent("sway.log").path, encoding: .utf8)) ?? "").suffix(2_000))
    }

    /// Stops the compositor and removes its files.
    public func close() {
        server.kill(SIGKILL)
        try? FileManager.default.removeItem(at: directory)
    }
}
