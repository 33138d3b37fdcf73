import Foundation

/// A client in a sandbox as Flatpak makes one: bubblewrap with a `/.flatpak-info` naming the
/// app, reaching the bus through xdg-dbus-proxy (Tests/Scripts/sandboxed-client.py, whose
/// modes say what it does there).
extension BatonWorld {
    /// Runs the client script in `mode` in a sandbox of `app`, `shared` (if given) bound at the
    /// same path inside; returns the JSON object it printed.
    public func runSandboxed(as app: String, _ mode: String, _ argument: String, sharing shared: URL? = nil) async throws -> [String: Any] {
        let bwrap = try Executables.require("bwrap", package: "bubblewrap")
        let directory = try TemporaryDirectory.make(prefix: "baton-sandbox")
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try await run(bwrap, try sandboxArguments(as: app, mode, argument, sharing: shared, in: directory))
        guard result.status == 0,
              let printed = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] else {
            throw TestSupportError("the sandboxed client (\(mode), \(app)) failed: \(result)")
        }
        return printed
    }

    /// bwrap's arguments for the client script in a sandbox of `app` (its `/.flatpak-info`
    /// written into `directory`), `shared` bound at the same path inside.
    public func sandboxArguments(
        as app: String, _ mode: String, _ argument: String, sharing shared: URL?, in directory: URL
    ) throws -> [String] {
        _ = try Executables.require("xdg-dbus-proxy", package: "xdg-dbus-proxy")
        let info = directory.appendingPathComponent("flatpak-info")
        try "[Application]\nname=\(app)\nruntime=runtime/org.freedesktop.Platform/x86_64/23.08\n".write(to: info, atomically: true, encoding: .utf8)
        let script = Repository.root.appendingPathComponent("Tests/Scripts/sandboxed-client.py").path
        let bus = bus.directory.path
        return [
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
            "--ro-bind", info.path, "/.flatpak-info", "--bind", bus, bus, "--ro-bind", script, "/client.py",
        ] + (shared.map { ["--bind", $0.path, $0.path] } ?? []) + [
            // The bus starts a service through a helper process that ends once the service has
            // its name: the app started for `handle` must outlive it, as an app flatpak runs does.
            "--unshare-pid",
        ] + (mode == "handle" ? [] : ["--die-with-parent"]) + ["--", "/usr/bin/python3", "/client.py", mode, app, argument]
    }
}
