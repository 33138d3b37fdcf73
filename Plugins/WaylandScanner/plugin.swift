import Foundation
import PackagePlugin

/// Generates the interface tables of the Wayland protocols the clipboard agent speaks, at
/// build time, with Debian's `wayland-scanner` (libwayland-bin): one C file for each of the
/// target's `protocols/*.xml`, and one for Wayland's core protocol (libwayland-dev's
/// wayland.xml), whose `wl_seat` and `wl_registry` the others name.
@main struct WaylandScanner: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        guard let target = target as? SourceModuleTarget else { return [] }
        let scanner = try Self.find("wayland-scanner", package: "libwayland-bin")
        let core = URL(fileURLWithPath: "/usr/share/wayland/wayland.xml")
        guard FileManager.default.fileExists(atPath: core.path) else {
            throw PluginError("\(core.path) is missing: apt-get install libwayland-dev")
        }
        let protocols = target.directoryURL.appending(path: "protocols")
        let described = try FileManager.default.contentsOfDirectory(at: protocols, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "xml" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        return ([core] + described).map { xml in
            let output = context.pluginWorkDirectoryURL.appending(path: xml.deletingPathExtension().lastPathComponent + "-protocol.c")
            return .buildCommand(displayName: "wayland-scanner private-code \(xml.lastPathComponent)", executable: scanner,
                                 arguments: ["--strict", "private-code", xml.path, output.path], inputFiles: [xml], outputFiles: [output])
        }
    }

    /// A program on PATH.
    static func find(_ name: String, package: String) throws -> URL {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appending(path: name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw PluginError("\(name) is not on PATH: apt-get install \(package)")
    }
}

struct PluginError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
