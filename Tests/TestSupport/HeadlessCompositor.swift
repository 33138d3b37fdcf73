import Foundation
import Glibc

/// A Wayland compositor of its own for a test, headless, in a runtime directory of its own, its
/// display always `wayland-1` there:
/// - sway (wlroots' headless backend). sway refuses to run as root, so as root it runs as the
///   unprivileged user 65534 (nobody), which owns the directory; root's clients reach its socket.
/// - KWin (`kwin_wayland --virtual`), on the given session bus. Debian installs it with a file
///   capability (CAP_SYS_NICE), which a container may refuse to exec: a copy without it runs.
/// - Mutter (GNOME's compositor, `mutter --headless`), on the given session bus.
public final class HeadlessCompositor: Sendable {
    public enum Kind: String, Sendable { case sway, kwin, mutter }

    /// `XDG_RUNTIME_DIR` and `WAYLAND_DISPLAY` for the compositor's clients.
    public let environment: [String: String]
    private let server: Subprocess
    private let directory: URL

    /// `bus`: the session bus's environment, for KWin and Mutter, which use it.
    public init(_ kind: Kind = .sway, bus: [String: String] = [:], timeout: Duration = .seconds(30)) async throws {
        let directory = try TemporaryDirectory.make(prefix: "baton-\(kind.rawValue)")
        self.directory = directory
        var command: [String]
        var serverEnvironment = ProcessInfo.processInfo.environment.filter { !["DISPLAY", "WAYLAND_DISPLAY", "SWAYSOCK"].contains($0.key) }
        serverEnvironment.merge(bus) { $1 }
        serverEnvironment["XDG_RUNTIME_DIR"] = directory.path
        switch kind {
        case .sway:
            let config = directory.appendingPathComponent("config").path
            try "output HEADLESS-1 resolution 800x600\nxwayland disable\n".write(toFile: config, atomically: true, encoding: .utf8)
            command = [try Executables.require("sway", package: "sway"), "-c", config]
            serverEnvironment.merge(["WLR_BACKENDS": "headless", "WLR_LIBINPUT_NO_DEVICES": "1", "WLR_RENDERER": "pixman"]) { $1 }
            if getuid() == 0 {
                let nobody: uid_t = 65534
                guard chown(directory.path, nobody, gid_t(nobody)) == 0, chown(config, nobody, gid_t(nobody)) == 0 else {
                    throw TestSupportError("could not hand \(directory.path) to user 65534: \(String(cString: strerror(errno)))")
                }
                command = [try Executables.require("setpriv", package: "util-linux"), "--reuid=65534", "--regid=65534", "--clear-groups"] + command
            }
        case .kwin:
            let copy = directory.appendingPathComponent("kwin_wayland").path
            // Copied by cp, not in this process: a test forking meanwhile would inherit our descriptor
            // open for writing, and exec would fail with ETXTBSY.
            let copied = try await Executables.run("/bin/cp", [try Executables.require("kwin_wayland", package: "kwin-wayland"), copy])
            guard copied.status == 0 else { throw TestSupportError("could not copy kwin_wayland: \(copied)") }
            command = [copy, "--virtual", "--no-lockscreen", "--socket", "wayland-1", "--width", "800", "--height", "600"]
            serverEnvironment["QT_QPA_PLATFORM"] = "offscreen"
        case .mutter:
            command = [try Executables.require("mutter", package: "mutter"), "--wayland", "--headless", "--no-x11",
                       "--virtual-monitor", "800x600", "--wayland-display", "wayland-1"]
        }
        chmod(directory.path, 0o700)
        let log = open(directory.appendingPathComponent("compositor.log").path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        defer { Glibc.close(log) }
        server = try Subprocess(command[0], Array(command.dropFirst()), environment: serverEnvironment, stdout: log, stderr: log)
        environment = ["XDG_RUNTIME_DIR": directory.path, "WAYLAND_DISPLAY": "wayland-1"]
        let socket = directory.appendingPathComponent("wayland-1").path
        do {
            try await eventually("\(kind.rawValue) listens on its Wayland socket", timeout: timeout, context: Self.said(in: directory)) { [server] in
                guard !server.hasExited else { throw TestSupportError("\(kind.rawValue) ended before it listened: \(Self.said(in: directory))") }
                var info = stat()
                return stat(socket, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
            }
        } catch {
            server.kill(SIGKILL)
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// The end of the compositor's log.
    private static func said(in directory: URL) -> String {
        String(((try? String(contentsOfFile: directory.appendingPathComponent("compositor.log").path, encoding: .utf8)) ?? "").suffix(2_000))
    }

    /// Stops the compositor and removes its files.
    public func close() {
        server.kill(SIGKILL)
        try? FileManager.default.removeItem(at: directory)
    }
}
