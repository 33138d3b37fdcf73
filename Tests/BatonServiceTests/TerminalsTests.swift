import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// The terminals source with a real terminal nobody here wrote: foot under a headless sway,
/// its shells typed into at their terminals, batond
/// following them from `/proc` (a stock shell) or from what `baton shell-init` makes a shell
/// say, and the real handler `baton serve-terminals` opening a new foot where one was.
@Suite(.serialized) struct TerminalsTests {
    static let activities = "org.baton.Handoff1.Activities"

    /// A compositor, a runtime directory shared by batond and the shells, and foot.
    struct Stage {
        let world: BatonWorld
        let compositor: HeadlessCompositor
        let runtime: URL
        let places: URL
        /// What foot runs with: this bus, the compositor's socket by its full path, our runtime directory.
        var environment: [String: String] {
            var environment = world.bus.environment
            environment["WAYLAND_DISPLAY"] = compositor.environment["XDG_RUNTIME_DIR"].map { $0 + "/wayland-1" }
            environment["XDG_RUNTIME_DIR"] = runtime.path
            environment["DISPLAY"] = nil
            return environment
        }

        static func make() async throws -> Stage {
            _ = try Executables.require("foot", package: "foot")
            let world = try BatonWorld()
            let runtime = world.bus.directory.appendingPathComponent("runtime")
            let places = world.bus.directory.appendingPathComponent("places")
            try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true)
            chmod(runtime.path, 0o700)
            world.extraEnvironment = ["XDG_RUNTIME_DIR": runtime.path]
            do {
                try await world.startDaemon()
                let compositor = try await HeadlessCompositor(.sway)
                let stage = Stage(world: world, compositor: compositor, runtime: runtime, places: places)
                let environment = stage.environment
                let exported = ["WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "XDG_DATA_HOME"].map { "\($0)=\(environment[$0] ?? "")" }.joined(separator: " ")
                try world.bus.installService(name: "org.baton.Terminals", exec: "/usr/bin/env \(exported) \(try Executables.built("baton")) serve-terminals")
                return stage
            } catch {
                world.close()
                throw error
            }
        }

        func close() {
            // Every foot of this test (and its shells) goes with the compositor.
            compositor.close()
            world.close()
        }

        /// A directory of the test's own, made.
        func place(_ name: String) throws -> String {
            let url = places.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            return url.path
        }

        /// foot at `directory`, running `shell`.
        func foot(at directory: String, _ shell: [String]) throws -> Subprocess {
            let log = open(places.appendingPathComponent("foot.log").path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            defer { Glibc.close(log) }
            return try Subprocess(try Executables.require("foot", package: "foot"), ["--working-directory=\(directory)"] + shell, environment: environment,
                                  stdout: log, stderr: log)
        }

        /// Types `line` and Return into the shell of the activity `id` (its persistent id names
        /// the shell's pid), at its terminal, as keys would come (TIOCSTI). wtype, a virtual
        /// keyboard, lost the first keys of a line now and then while sway took its keymap.
        func type(_ line: String, into id: String) async throws {
            let persistent = try #require(try await sessions()[id]?.persistentID)
            let pid = try #require(persistent.split(separator: "-").dropLast().last.flatMap { Int32($0) }, "\(persistent)")
            let tty = open("/proc/\(pid)/fd/0", O_RDWR | O_NOCTTY | O_CLOEXEC)
            guard tty >= 0 else { throw TestSupportError("the shell \(pid)'s terminal: \(String(cString: strerror(errno)))") }
            defer { Glibc.close(tty) }
            for var byte in Array((line + "\n").utf8) {
                guard ioctl(tty, UInt(TIOCSTI), &byte) == 0 else { throw TestSupportError("TIOCSTI: \(String(cString: strerror(errno)))") }
            }
        }

        /// The terminals source's live activities: id → (title, payload's members).
        func sessions() async throws -> [String: (title: String, payload: [String: String], persistentID: String)] {
            let records = try await world.call(TerminalsTests.activities, "List", [.stringMap(["app_id": "org.baton.Terminals"])]).first?.arrayValue ?? []
            var found: [String: (title: String, payload: [String: String], persistentID: String)] = [:]
            for record in records {
                guard let fields = record.stringKeyedValue?.mapValues(\.unwrapped), let id = fields["id"]?.stringValue,
                      let json = fields["payload"]?.stringValue?.data(using: .utf8),
                      let payload = try JSONSerialization.jsonObject(with: json) as? [String: String] else { continue }
                found[id] = (fields["title"]?.stringValue ?? "", payload, fields["persistent_id"]?.stringValue ?? "")
            }
            return found
        }

        /// The one live session whose `cwd` is `directory`, once there is one.
        func session(at directory: String, _ what: String) async throws -> String {
            do {
                try await eventually(what, timeout: .seconds(15)) {
                    try await sessions().filter { $0.value.payload["cwd"] == directory }.count == 1
                }
            } catch {
                let now = try await sessions().map { "\($0.key): \($0.value.title) \($0.value.payload)" }
                let shells = try await world.run("/bin/sh", ["-c", "for p in $(pgrep -x bash); do echo $p $(cat /proc/$p/comm) $(readlink /proc/$p/cwd) parent $(cat /proc/$(cut -d' ' -f4 /proc/$p/stat)/comm); done"])
                throw TestSupportError("\(error); the sessions now: \(now); the shells: \(shells.stdout); foot said: \((try? String(contentsOfFile: places.appendingPathComponent("foot.log").path, encoding: .utf8)) ?? ""); batond said: \(world.daemonLog.suffix(2_000))")
            }
            return try #require(try await sessions().first { $0.value.payload["cwd"] == directory }?.key)
        }
    }

    @Test func aStockShellInFootIsFollowedEndedAndContinued() async throws {
        let stage = try await Stage.make()
        defer { stage.close() }
        let first = try stage.place("first"), second = try stage.place("second dir é"), third = try stage.place("third")
        let enabled = try await stage.world.baton(["sources", "enable", "terminals"])
        #expect(enabled.status == 0 && enabled.stdout.contains("shell-init"), "\(enabled)")

        // A stock shell: no rc file, so no OSC 7 and no word to Baton; /proc tells.
        let foot = try stage.foot(at: first, ["bash", "--norc", "--noprofile", "-i"])
        defer { foot.kill(SIGKILL) }
        let id = try await stage.session(at: first, "the shell in foot became an activity at its directory")
        var session = try #require(try await stage.sessions()[id])
        #expect(session.payload["terminal"] == "foot" && session.payload["host"] == nil, "\(session)")
        #expect(session.title == "\(first) — foot", "\(session.title)")

        // cd twice: the same activity follows (an Update, never a new one).
        try await stage.type("cd '\(second)'", into: id)
        #expect(try await stage.session(at: second, "the activity followed the first cd") == id)
        try await stage.type("cd '\(third)'", into: id)
        #expect(try await stage.session(at: third, "the activity followed the second cd") == id)
        session = try #require(try await stage.sessions()[id])
        #expect(session.title == "\(third) — foot")

        // A blocked directory is never recorded: the activity stays where it was.
        let secret = try stage.place("secret")
        _ = try await stage.world.baton(["sources", "set", "terminals", "blocked-paths", "~/.ssh:\(stage.places.path)/secr*"])
        try await stage.type("cd '\(secret)'", into: id)
        // Looked at twice (batond's log says each look) while the shell is there: not recorded.
        let pid = try #require(try await stage.sessions()[id]?.persistentID.split(separator: "-").dropLast().last.map(String.init))
        try await eventually("the shell is in the blocked directory", timeout: .seconds(10)) {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/cwd")) == secret
        }
        let looks = stage.world.daemonLog.components(separatedBy: "terminals: 1 shells open").count
        try await eventually("batond looked at the shells twice", timeout: .seconds(15)) {
            stage.world.daemonLog.components(separatedBy: "terminals: 1 shells open").count >= looks + 2
        }
        #expect(try await stage.sessions()[id]?.payload["cwd"] == third)
        try await stage.type("cd '\(first)'", into: id)
        #expect(try await stage.session(at: first, "the activity followed past the blocked directory") == id)
        #expect(!stage.world.daemonLog.contains(secret), "the blocked directory reached batond's log")

        // The shell exits: its activity ends, into the history.
        try await stage.type("exit", into: id)
        try await eventually("foot closed with its shell", timeout: .seconds(15)) { foot.hasExited }
        try await eventually("the activity ended with its shell", timeout: .seconds(15)) { try await stage.sessions()[id] == nil }
        let history = try await stage.world.call("org.baton.Handoff1.Archive", "History", [.stringMap(["app_id": "org.baton.Terminals"])])
        #expect(history.first?.arrayValue?.contains { $0.stringKeyedValue?["id"]?.unwrapped.stringValue == id } == true, "\(history)")

        // Continued from the history: the bus starts baton serve-terminals, which opens a new foot
        // there; its shell, at that directory, is a new activity.
        _ = try await stage.world.call(Self.activities, "Continue", [.string(id), .stringMap([:])])
        let reopened = try await stage.session(at: first, "a new foot's shell at the same directory")
        #expect(reopened != id)
        #expect(try await stage.sessions()[reopened]?.payload["terminal"] == "foot")

        // Forgotten by the source's name.
        let forgot = try await stage.world.baton(["forget", "terminals", "--yes"])
        #expect(forgot.status == 0, "\(forgot)")
        #expect(try await stage.sessions().isEmpty)
    }

    @Test func aShellThatSaysItsDirectoryIsFollowedByItsWord() async throws {
        let stage = try await Stage.make()
        defer { stage.close() }
        let start = try stage.place("start"), real = try stage.place("real")
        // A link: the shell says the path it was given ($PWD), /proc the directory it points to.
        let link = stage.places.appendingPathComponent("link").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
        let rc = stage.places.appendingPathComponent("bashrc").path
        try "eval \"$('\(try Executables.built("baton"))' shell-init bash)\"\n".write(toFile: rc, atomically: true, encoding: .utf8)
        _ = try await stage.world.baton(["sources", "enable", "terminals"])

        let foot = try stage.foot(at: start, ["bash", "--rcfile", rc, "--noprofile", "-i"])
        defer { foot.kill(SIGKILL) }
        let id = try await stage.session(at: start, "the shell became an activity")
        try await stage.type("cd '\(link)'", into: id)
        #expect(try await stage.session(at: link, "the activity followed the shell's word, the link's path") == id)
    }
}
