import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// The files that make batond a user service: the unit, D-Bus activation, the installer.
@Suite(.serialized)
struct InstallTests {
    static let repository = Repository.root

    @Test func theUnitVerifiesSilently() async throws {
        let analyze = try Executables.require("systemd-analyze", package: "systemd")
        let home = try TemporaryDirectory.make(prefix: "baton-home")
        defer { try? FileManager.default.removeItem(at: home) }
        let runtime = home.appendingPathComponent("run")
        try FileManager.default.createDirectory(at: home.appendingPathComponent(".local/bin"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileManager.default.copyItem(atPath: try Executables.built("batond"), toPath: home.appendingPathComponent(".local/bin/batond").path)
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home.path
        environment["XDG_RUNTIME_DIR"] = runtime.path
        let result = try await Executables.run(analyze, ["verify", "--user", Self.repository.appendingPathComponent("systemd/batond.service").path],
                                               environment: environment)
        // systemd-analyze exits 0 even for unknown keys: its output must be empty too.
        #expect(result.status == 0 && result.stdout.isEmpty && result.stderr.isEmpty, "\(result)")
    }

    @Test func theBusStartsBatondOnFirstUse() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        let bus = world.bus
        let state = bus.directory.appendingPathComponent("state")
        let template = try String(contentsOf: Self.repository.appendingPathComponent("dbus/org.baton.Handoff1.service"), encoding: .utf8)
        let binary = try Executables.built("batond")
        let directory = String(binary[..<(binary.lastIndex(of: "/") ?? binary.endIndex)])
        // As scripts/install writes it, plus a private database for this test.
        let service = template.replacing("@BINDIR@", with: directory)
            .replacing("Exec=\(directory)/batond", with: "Exec=\(directory)/batond --database \(state.path)/baton.sqlite")
        try service.write(to: bus.serviceDirectory.appendingPathComponent("org.baton.Handoff1.service"), atomically: true, encoding: .utf8)

        let client = try bus.connect()
        defer { client.close() }
        #expect(try await client.nameOwner("org.baton.Handoff1") == nil)
        let types = try await client.call("org.baton.Handoff1", "/org/baton/Handoff1", "org.baton.Handoff1.Registry", "ListActivityTypes")
        #expect(types == [.array(.dictionary(key: .string, value: .variant), [])])
        #expect(try await client.nameOwner("org.baton.Handoff1") != nil)
        #expect(FileManager.default.fileExists(atPath: state.appendingPathComponent("baton.sqlite").path))
        // Stop the activated daemon: it is the bus's child, gone with the bus, but say so.
        if let owner = try await client.nameOwner("org.baton.Handoff1") {
            let pid = try await client.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                            "GetConnectionUnixProcessID", [.string(owner)]).first?.uint32Value
            if let pid, pid > 0 { kill(pid_t(pid), SIGTERM) }
        }
    }

    @Test func theInstallerPutsEverythingInTheUsersHome() async throws {
        let home = try TemporaryDirectory.make(prefix: "baton-home")
        defer { try? FileManager.default.removeItem(at: home) }
        let binary = try Executables.built("batond")
        let builtDirectory = String(binary[..<(binary.lastIndex(of: "/") ?? binary.endIndex)])
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home.path
        for key in ["XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "BINDIR"] { environment[key] = nil }
        let result = try await Executables.run(Self.repository.appendingPathComponent("scripts/install").path, ["--from", builtDirectory],
                                               environment: environment, timeout: .seconds(120))
        #expect(result.status == 0, "\(result)")
        let fm = FileManager.default
        #expect(fm.isExecutableFile(atPath: home.appendingPathComponent(".local/bin/batond").path))
        #expect(fm.isExecutableFile(atPath: home.appendingPathComponent(".local/bin/hawk-notes").path))
        #expect(fm.isExecutableFile(atPath: home.appendingPathComponent(".local/bin/baton").path))
        let completion = try String(contentsOf: home.appendingPathComponent(".local/share/bash-completion/completions/baton"), encoding: .utf8)
        #expect(completion.contains("activities") && completion.contains("scenes"))
        #expect(fm.fileExists(atPath: home.appendingPathComponent(".local/share/zsh/site-functions/_baton").path))
        #expect(fm.fileExists(atPath: home.appendingPathComponent(".local/share/fish/vendor_completions.d/baton.fish").path))
        let hawkNotes = try String(contentsOf: home.appendingPathComponent(".local/share/dbus-1/services/com.raywenderlich.hawknotes.service"), encoding: .utf8)
        #expect(hawkNotes.contains("Exec=\(home.path)/.local/bin/hawk-notes serve\n"))
        #expect(fm.fileExists(atPath: home.appendingPathComponent(".config/systemd/user/batond.service").path))
        let service = try String(contentsOf: home.appendingPathComponent(".local/share/dbus-1/services/org.baton.Handoff1.service"), encoding: .utf8)
        #expect(service.contains("Exec=\(home.path)/.local/bin/batond\n"))
        var info = stat()
        #expect(stat(home.appendingPathComponent(".local/state/baton").path, &info) == 0 && info.st_mode & 0o777 == 0o700)
        // Stripped: smaller than what was built, and still runs.
        let installedSize = try #require(try fm.attributesOfItem(atPath: home.appendingPathComponent(".local/bin/batond").path)[.size] as? Int)
        let builtSize = try #require(try fm.attributesOfItem(atPath: binary)[.size] as? Int)
        #expect(installedSize < builtSize, "installed \(installedSize) bytes, built \(builtSize)")
        #expect(try await Executables.run(home.appendingPathComponent(".local/bin/baton").path, ["--version"]).status == 0)
        // Where code generators and batond look.
        #expect(try Data(contentsOf: home.appendingPathComponent(".local/share/dbus-1/interfaces/org.baton.Handoff1.xml"))
            == Data(contentsOf: Self.repository.appendingPathComponent("dbus/org.baton.Handoff1.xml")))
        #expect(fm.fileExists(atPath: home.appendingPathComponent(".local/share/baton/types/com.raywenderlich.hawknotes.json").path))
        // The desktop's search, parsed back as GNOME Shell and KRunner read them.
        let provider = try Self.keyFile(home.appendingPathComponent(".local/share/gnome-shell/search-providers/org.baton.Handoff1.search-provider.ini"))
        #expect(provider["Shell Search Provider"] == [
            "DesktopId": "org.baton.Baton.desktop", "BusName": "org.baton.Handoff1",
            "ObjectPath": "/org/baton/Handoff1/SearchProvider", "Version": "2",
        ])
        let runner = try Self.keyFile(home.appendingPathComponent(".local/share/krunner/dbusplugins/org.baton.Handoff1.desktop"))
        #expect(runner["Desktop Entry"]?["X-Plasma-API"] == "DBus2")
        #expect(runner["Desktop Entry"]?["X-Plasma-DBusRunner-Service"] == "org.baton.Handoff1")
        #expect(runner["Desktop Entry"]?["X-Plasma-DBusRunner-Path"] == "/org/baton/Handoff1/KRunner")
        let validate = try Executables.require("desktop-file-validate", package: "desktop-file-utils")
        for entry in ["krunner/dbusplugins/org.baton.Handoff1.desktop", "applications/org.baton.Baton.desktop",
                      "applications/com.raywenderlich.hawknotes.desktop"] {
            let validated = try await Executables.run(validate, [home.appendingPathComponent(".local/share/" + entry).path])
            #expect(validated.status == 0 && validated.stdout.isEmpty && validated.stderr.isEmpty, "\(entry): \(validated)")
        }
        // The windows' entries run their programs by absolute path (GLib drops an entry whose program
        // is not on the session's PATH, and GNOME Shell the search provider with it), and have icons.
        for (entry, program, icon) in [("org.baton.Baton", "baton-gtk", "org.baton.Baton"),
                                       ("com.raywenderlich.hawknotes", "hawk-notes-gtk", "com.raywenderlich.hawknotes")] {
            let fields = try Self.keyFile(home.appendingPathComponent(".local/share/applications/\(entry).desktop"))["Desktop Entry"]
            let exec = try #require(fields?["Exec"])
            #expect(exec.hasPrefix(home.path + "/.local/bin/" + program), "\(exec)")
            #expect(fm.isExecutableFile(atPath: String(exec.split(separator: " ")[0])))
            #expect(fields?["Icon"] == icon)
            for (size, suffix) in [("scalable", ""), ("symbolic", "-symbolic")] {
                let svg = try String(contentsOf: home.appendingPathComponent(".local/share/icons/hicolor/\(size)/apps/\(icon)\(suffix).svg"), encoding: .utf8)
                #expect(svg.hasPrefix("<svg "), "\(icon)\(suffix)")
            }
        }
        #expect(fm.fileExists(atPath: home.appendingPathComponent(".local/share/hawk-notes/catalog.json").path))
        // The window: the program, the client it imports, its activation by the bus.
        #expect(fm.isExecutableFile(atPath: home.appendingPathComponent(".local/bin/baton-gtk").path))
        #expect(fm.fileExists(atPath: home.appendingPathComponent(".local/share/baton/python/baton.py").path))
        let window = try String(contentsOf: home.appendingPathComponent(".local/share/dbus-1/services/org.baton.Baton.service"), encoding: .utf8)
        #expect(window.contains("Exec=\(home.path)/.local/bin/baton-gtk --gapplication-service\n"))
        let web = try String(contentsOf: home.appendingPathComponent(".local/share/dbus-1/services/org.baton.Web.service"), encoding: .utf8)
        #expect(web.contains("Exec=\(home.path)/.local/bin/baton serve-web\n"))
        let documents = try String(contentsOf: home.appendingPathComponent(".local/share/dbus-1/services/org.baton.RecentDocuments.service"), encoding: .utf8)
        #expect(documents.contains("Exec=\(home.path)/.local/bin/baton serve-documents\n"))
        let media = try String(contentsOf: home.appendingPathComponent(".local/share/dbus-1/services/org.baton.Media.service"), encoding: .utf8)
        #expect(media.contains("Exec=\(home.path)/.local/bin/baton serve-media\n"))
        #expect(fm.fileExists(atPath: home.appendingPathComponent(".local/share/baton/types/org.baton.Web.json").path))
        let dataDirs = try String(contentsOf: home.appendingPathComponent(".config/environment.d/60-baton-data-dirs.conf"), encoding: .utf8)
        #expect(dataDirs.contains("XDG_DATA_DIRS=${HOME}/.local/share:${XDG_DATA_DIRS:-"))
        #expect(result.stdout.contains("install: programs to"), "progress on every step: \(result.stdout)")

        // The browser extension's host, where each browser looks for it; it answers a frame.
        let host = home.appendingPathComponent(".local/bin/baton-browser-host").path
        for (manifest, allowed) in [(".config/chromium/NativeMessagingHosts", "allowed_origins"), (".config/google-chrome/NativeMessagingHosts", "allowed_origins"),
                                    (".mozilla/native-messaging-hosts", "allowed_extensions")] {
            let data = try Data(contentsOf: home.appendingPathComponent(manifest + "/org.baton.browser.json"))
            let fields = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            #expect(fields["name"] as? String == "org.baton.browser" && fields["path"] as? String == host && fields["type"] as? String == "stdio")
            #expect((fields[allowed] as? [String])?.count == 1, "\(manifest): \(fields)")
        }
        let hello = #"{"kind":"hello"}"#, answer = #"{"kind":"hello","version":1}"#
        let frames = try await Executables.run(host, ["chrome-extension://dadpnfjbaklggmnklkpggjdnfejcegin/"], environment: environment,
                                               stdin: String(UnicodeScalar(UInt8(hello.utf8.count))) + "\0\0\0" + hello)
        #expect(frames.status == 0 && frames.stdout == String(UnicodeScalar(UInt8(answer.utf8.count))) + "\0\0\0" + answer, "\(frames)")
        #expect(fm.fileExists(atPath: home.appendingPathComponent(".local/share/baton/browser-extension/manifest.json").path))

        // Uninstalled: every file gone, the data kept and said so.
        let uninstall = try await Executables.run(Self.repository.appendingPathComponent("scripts/uninstall").path, [], environment: environment)
        #expect(uninstall.status == 0, "\(uninstall)")
        #expect(uninstall.stdout.contains("stay in \(home.path)/.local/state/baton"), "\(uninstall)")
        let left = fm.enumerator(atPath: home.path)?.compactMap { $0 as? String }.filter { path in
            var isDirectory: ObjCBool = false
            return fm.fileExists(atPath: home.appendingPathComponent(path).path, isDirectory: &isDirectory) && !isDirectory.boolValue
        } ?? []
        #expect(left.isEmpty, "left after uninstall: \(left)")
    }

    /// A desktop-entry-style key file: its groups' keys and values (comments and blank lines skipped).
    static func keyFile(_ url: URL) throws -> [String: [String: String]] {
        var groups: [String: [String: String]] = [:]
        var group = ""
        for line in try String(contentsOf: url, encoding: .utf8).split(separator: "\n") where !line.hasPrefix("#") {
            if line.hasPrefix("[") && line.hasSuffix("]") {
                group = String(line.dropFirst().dropLast())
            } else if let equals = line.firstIndex(of: "=") {
                groups[group, default: [:]][String(line[..<equals])] = String(line[line.index(after: equals)...])
            }
        }
        return groups
    }
}
