import BatonCore
import DBus
import Foundation
import Glibc
import Synchronization
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
            // A home of the test's own: a shell started without a command reads no rc file of this machine's user.
            environment["HOME"] = places.path
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
                try FileManager.default.createDirectory(at: places, withIntermediateDirectories: true)
                let exported = ["WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "HOME"].map { "\($0)=\(environment[$0] ?? "")" }.joined(separator: " ")
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

        var shells: ShellSessions { ShellSessions(world: world, terminalLog: places.appendingPathComponent("foot.log").path) }
        func type(_ line: String, into id: String) async throws { try await shells.type(line, into: id) }
        func sessions() async throws -> [String: ShellSessions.Session] { try await shells.all() }
        func session(at directory: String, _ what: String) async throws -> String { try await shells.one(at: directory, what) }
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

    /// An ssh session typed into a stock shell (to an sshd of the test's own on loopback) is
    /// recorded as one, and continues as an ssh session to the same host and port.
    @Test func anSSHSessionContinuesAsAnSSHSessionToTheSameHost() async throws {
        let sshd = try Executables.require("/usr/sbin/sshd", package: "openssh-server")
        let stage = try await Stage.make()
        defer { stage.close() }
        let keys = try stage.place("ssh")
        for (name, comment) in [("host", "the test's sshd"), ("id", "the test's user")] {
            let made = try await stage.world.run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", "\(keys)/\(name)"])
            #expect(made.status == 0, "\(made)")
        }
        try FileManager.default.copyItem(atPath: "\(keys)/id.pub", toPath: "\(keys)/authorized_keys")
        let port = try freePort()
        try """
            ListenAddress 127.0.0.1
            Port \(port)
            HostKey \(keys)/host
            AuthorizedKeysFile \(keys)/authorized_keys
            PidFile \(keys)/sshd.pid
            StrictModes no
            UsePAM no
            PermitRootLogin yes
            LogLevel VERBOSE

            """.write(toFile: "\(keys)/sshd_config", atomically: true, encoding: .utf8)
        mkdir("/run/sshd", 0o755)  // its privilege separation directory, which the package's unit makes
        let log = open("\(keys)/sshd.log", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        let server = try Subprocess(sshd, ["-D", "-e", "-f", "\(keys)/sshd_config"], stderr: log)
        Glibc.close(log)
        defer { server.kill(SIGKILL) }
        let said: @Sendable () -> String = { (try? String(contentsOfFile: "\(keys)/sshd.log", encoding: .utf8)) ?? "" }
        try await eventually("sshd listens", timeout: .seconds(10), context: said()) { said().contains("Server listening on 127.0.0.1") }
        _ = try await stage.world.baton(["sources", "enable", "terminals"])

        let start = try stage.place("start")
        let foot = try stage.foot(at: start, ["bash", "--norc", "--noprofile", "-i"])
        defer { foot.kill(SIGKILL) }
        let id = try await stage.session(at: start, "the shell became an activity")
        try await stage.type("ssh -t -p \(port) -i '\(keys)/id' -o StrictHostKeyChecking=no -o UserKnownHostsFile='\(keys)/known' root@127.0.0.1", into: id)
        try await eventually("the activity is an ssh session to the test's sshd", timeout: .seconds(15), context: said()) {
            try await stage.sessions()[id]?.payload == ["cwd": "", "terminal": "foot", "host": "127.0.0.1", "user": "root", "port": "\(port)"]
        }
        #expect(try await stage.sessions()[id]?.title == "ssh root@127.0.0.1 — foot")
        try await eventually("the shell's ssh logged in", timeout: .seconds(15), context: said()) { said().contains("Accepted publickey for root") }

        // Continued: a new foot runs ssh to the same host, port and user (the host's key is new
        // to it, so it asks; reaching the same sshd is what is checked).
        let connections = said().components(separatedBy: "Connection from 127.0.0.1").count
        _ = try await stage.world.call(Self.activities, "Continue", [.string(id), .stringMap([:])])
        try await eventually("the continuation's ssh reached the same sshd", timeout: .seconds(15), context: said()) {
            said().components(separatedBy: "Connection from 127.0.0.1").count > connections
        }
        let continued = try await stage.world.run("/bin/sh", ["-c", "for p in $(pgrep -x ssh); do tr '\\0' ' ' < /proc/$p/cmdline; echo; done"])
        #expect(continued.stdout.contains("ssh -t -p \(port) -l root -- 127.0.0.1"), "\(continued.stdout)")
    }

    /// GNOME Terminal, as Debian ships it (its server started by this bus, under Xvfb): a stock
    /// shell, which says nothing, and one with baton shell-init, which sends OSC 7 and tells
    /// Baton; both followed through a cd, and one continued in a new GNOME Terminal window there.
    /// batond with the terminals source on, an X display, and what a terminal there runs with:
    /// `baton serve-terminals` (and `services`, name → program) started by the test's bus.
    struct XStage {
        let world: BatonWorld
        let display: VirtualDisplay
        let places: String
        /// The bus and the session: what a terminal started here runs with.
        let environment: [String: String]

        static func make(services: [String: String] = [:]) async throws -> XStage {
            let world = try BatonWorld()
            let runtime = world.bus.directory.appendingPathComponent("runtime").path, places = world.bus.directory.appendingPathComponent("places").path
            do {
                try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
                chmod(runtime, 0o700)
                world.extraEnvironment = ["XDG_RUNTIME_DIR": runtime]
                try await world.startDaemon()
                let display = try await VirtualDisplay()
                // What GNOME's and KDE's terminals need in a test (FIELD-NOTES): a UTF-8 locale,
                // settings in memory, no accessibility bus; HOME of the test's own, so that a new
                // window's shell reads no rc file of this machine's user.
                try FileManager.default.createDirectory(atPath: places, withIntermediateDirectories: true)
                let session = ["DISPLAY": display.name, "LANG": "C.UTF-8", "GSETTINGS_BACKEND": "memory", "NO_AT_BRIDGE": "1",
                               "XDG_RUNTIME_DIR": runtime, "HOME": places]
                let exported = session.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
                for (name, program) in services { try world.bus.installService(name: name, exec: "/usr/bin/env \(exported) \(program)") }
                try world.bus.installService(name: "org.baton.Terminals", exec: "/usr/bin/env \(exported) \(try Executables.built("baton")) serve-terminals")
                _ = try await world.baton(["sources", "enable", "terminals"])
                return XStage(world: world, display: display, places: places,
                              environment: world.bus.environment.merging(session) { $1 }.filter { $0.key != "WAYLAND_DISPLAY" })
            } catch {
                world.close()
                throw error
            }
        }

        /// A directory of the test's own, made.
        func place(_ name: String) throws -> String {
            let path = places + "/" + name
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            return path
        }

        func close() {
            display.close()
            world.close()
        }
    }

    @Test func shellsInGNOMETerminalAreFollowedAndContinuedThere() async throws {
        let server = try Executables.require("/usr/libexec/gnome-terminal-server", package: "gnome-terminal")
        let client = try Executables.require("gnome-terminal", package: "gnome-terminal")
        let stage = try await XStage.make(services: ["org.gnome.Terminal": server])
        defer { stage.close() }
        let world = stage.world, environment = stage.environment
        let rc = world.bus.directory.appendingPathComponent("bashrc").path
        try "eval \"$('\(try Executables.built("baton"))' shell-init bash)\"\n".write(toFile: rc, atomically: true, encoding: .utf8)

        let stock = try stage.place("stock"), told = try stage.place("told"), first = try stage.place("first stop"), elsewhere = try stage.place("elsewhere")
        for (directory, shell) in [(stock, ["bash", "--norc", "--noprofile", "-i"]), (told, ["bash", "--rcfile", rc, "-i"])] {
            let opened = try await world.run(client, ["--working-directory=\(directory)", "--"] + shell, environment: environment)
            #expect(opened.status == 0, "\(opened)")
        }
        let shells = ShellSessions(world: world)
        let stockID = try await shells.one(at: stock, "the stock shell in GNOME Terminal became an activity")
        let toldID = try await shells.one(at: told, "the shell that says its directory became an activity")
        for id in [stockID, toldID] { #expect(try await shells.all()[id]?.payload["terminal"] == "org.gnome.Terminal") }
        // cd twice: each activity follows its shell (the same activity, updated).
        for directory in [first, elsewhere] {
            for id in [stockID, toldID] { try await shells.type("cd '\(directory)'", into: id) }
            try await eventually("both followed their cd to \(directory)", timeout: .seconds(15)) {
                try await shells.all().filter { $0.value.payload["cwd"] == directory }.keys.sorted() == [stockID, toldID].sorted()
            }
        }

        _ = try await world.call(Self.activities, "Continue", [.string(stockID), .stringMap([:])])
        try await eventually("a third shell, in a new GNOME Terminal window, at the same directory", timeout: .seconds(20)) {
            try await shells.all().filter { $0.value.payload["cwd"] == elsewhere && $0.value.payload["terminal"] == "org.gnome.Terminal" }.count == 3
        }
        // A shell of a terminal this machine lacks (Xfce Terminal, advertised as another machine's
        // would arrive): Debian's x-terminal-emulator opens it, here GNOME Terminal, at its
        // directory. Console and Konsole have GNOME Terminal's priority among the alternatives:
        // the test asks which one it is.
        let alternative = try await world.run("/bin/sh", ["-c", "readlink -f \"$(command -v x-terminal-emulator)\""])
        if alternative.stdout.contains("gnome-terminal"), !TerminalShells.isOnPath("xfce4-terminal") {
            let xfce = try stage.place("Xfce's")
            let id = try #require(try await world.call(Self.activities, "Advertise", [
                .string("org.baton.terminal.session"), .string("~/Xfce's — Xfce Terminal"),
                .string(TerminalSession(cwd: xfce, terminal: "xfce4-terminal").payload), .stringMap([:]),
            ]).first?.stringValue)
            _ = try await world.call(Self.activities, "Continue", [.string(id), .stringMap([:])])
            try await eventually("x-terminal-emulator's window, at Xfce Terminal's directory", timeout: .seconds(20)) {
                try await shells.all().contains { $0.value.payload["cwd"] == xfce && $0.value.payload["terminal"] == "org.gnome.Terminal" }
            }
            _ = try await world.call(Self.activities, "Invalidate", [.string(id)])
        }
        if let directory = ProcessInfo.processInfo.environment["BATON_SCREENSHOTS"] {
            // The newest window, by its own pixels (the root window's show nothing of it here).
            let path = directory + "/gnome-terminal-continued.png"
            let shot = try await world.run("/bin/sh", ["-c", """
                xwd -silent -id "$(xdotool search --class gnome-terminal | tail -1)" | xwdtopnm 2>/dev/null | pnmtopng > '\(path)'
                """], environment: environment)
            #expect(shot.status == 0, "\(shot)")
        }
        try await shells.exitEach()
    }

    /// The other terminals a user may have, each a program nobody here wrote, under Xvfb: a
    /// stock shell opened in it at a directory is followed through a cd, continued in a new
    /// window of the same program at that directory, and ended as each shell exits.
    @Test(arguments: [
        (program: "konsole", package: "konsole", desktopID: "org.kde.konsole", at: ["--workdir"]),
        (program: "kitty", package: "kitty", desktopID: "kitty", at: ["--directory"]),
        (program: "kgx", package: "gnome-console", desktopID: "org.gnome.Console", at: ["--working-directory"]),
        (program: "alacritty", package: "alacritty", desktopID: "Alacritty", at: ["--working-directory"]),
    ]) func aShellInAnotherTerminalIsFollowedAndContinuedThere(terminal: (program: String, package: String, desktopID: String, at: [String])) async throws {
        let program = try Executables.require(terminal.program, package: terminal.package)
        let stage = try await XStage.make()
        defer { stage.close() }
        let world = stage.world, shells = ShellSessions(world: world, terminalLog: stage.places + "/terminal.log")
        let opened = try stage.place("opened"), moved = try stage.place("moved on")
        let log = open(shells.terminalLog, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        // kitty and Alacritty draw with OpenGL: Mesa's software renderer, as on any machine without a GPU.
        let first = try Subprocess(program, terminal.at + [opened], environment: stage.environment.merging(["LIBGL_ALWAYS_SOFTWARE": "1"]) { $1 },
                                   stdout: log, stderr: log)
        Glibc.close(log)
        defer { first.kill(SIGKILL) }
        let id = try await shells.one(at: opened, "the shell in \(terminal.program) became an activity")
        #expect(try await shells.all()[id]?.payload["terminal"] == terminal.desktopID)
        try await shells.type("cd '\(moved)'", into: id)
        try await eventually("the activity followed the cd", timeout: .seconds(15)) { try await shells.all()[id]?.payload["cwd"] == moved }

        _ = try await world.call(Self.activities, "Continue", [.string(id), .stringMap([:])])
        try await eventually("a second shell, in a new \(terminal.program) window, at the same directory", timeout: .seconds(20)) {
            try await shells.all().filter { $0.value.payload["cwd"] == moved && $0.value.payload["terminal"] == terminal.desktopID }.count == 2
        }
        try await shells.exitEach()
    }

    /// Another machine continues a shell at the same path when it has it, else at the nearest
    /// parent it has, and Explain says which: two daemons syncing through a folder (on one
    /// file system, so the path is taken away to be missing), the laptop's own handler opening foot.
    @Test func anotherMachineContinuesAtTheSamePathOrTheNearestParent() async throws {
        let stage = try await Stage.make()
        defer { stage.close() }
        let laptop = try BatonWorld()
        defer { laptop.close() }
        let laptopRuntime = laptop.bus.directory.appendingPathComponent("runtime").path
        try FileManager.default.createDirectory(atPath: laptopRuntime, withIntermediateDirectories: true)
        chmod(laptopRuntime, 0o700)
        laptop.extraEnvironment = ["XDG_RUNTIME_DIR": laptopRuntime]
        try await laptop.startDaemon()
        let exported = ["WAYLAND_DISPLAY": stage.environment["WAYLAND_DISPLAY"] ?? "", "XDG_RUNTIME_DIR": laptopRuntime, "HOME": stage.places.path]
            .sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        try laptop.bus.installService(name: "org.baton.Terminals", exec: "/usr/bin/env \(exported) \(try Executables.built("baton")) serve-terminals")
        let (place, _) = try await MachinesMeet.folder.join([stage.world, laptop], names: ["desktop", "laptop"])
        defer { place.close() }
        _ = try await stage.world.baton(["sources", "enable", "terminals"])

        let parent = try stage.place("tree/project"), deep = try stage.place("tree/project/build")
        let rc = stage.places.appendingPathComponent("bashrc").path
        try "eval \"$('\(try Executables.built("baton"))' shell-init bash)\"\n".write(toFile: rc, atomically: true, encoding: .utf8)
        let foot = try stage.foot(at: deep, ["bash", "--rcfile", rc, "--noprofile", "-i"])
        defer { foot.kill(SIGKILL) }
        let id = try await stage.session(at: deep, "the desktop's shell became an activity")
        try await eventually("the laptop has the desktop's shell", timeout: .seconds(20)) {
            let listed = try await laptop.call(Self.activities, "List", [.stringMap(["app_id": "org.baton.Terminals"])]).first?.arrayValue ?? []
            return listed.contains { $0.stringKeyedValue?["id"]?.unwrapped.stringValue == id }
        }

        // The path is there: the laptop opens foot at it (its shell is this file system's, so the desktop sees it).
        var reasons = try await explained(id, on: laptop)
        #expect(reasons.contains { $0.contains("continuing opens foot at \(deep)") }, "\(reasons)")
        _ = try await laptop.call(Self.activities, "Continue", [.string(id), .stringMap([:])])
        try await eventually("a shell the laptop opened, at the same path", timeout: .seconds(15)) {
            try await stage.sessions().filter { $0.value.payload["cwd"] == deep }.count == 2
        }

        // Gone from "the laptop": its nearest parent, and Explain says so.
        for other in try await stage.sessions() where other.key != id { try await stage.type("exit", into: other.key) }
        try await eventually("only the first shell is left", timeout: .seconds(15)) { try await stage.sessions().count == 1 }
        try FileManager.default.removeItem(atPath: deep)
        reasons = try await explained(id, on: laptop)
        #expect(reasons.contains { $0.contains("continuing opens foot at \(parent), the nearest folder this machine has of \(deep)") }, "\(reasons)")
        _ = try await laptop.call(Self.activities, "Continue", [.string(id), .stringMap([:])])
        try await eventually("a shell the laptop opened, at the nearest parent", timeout: .seconds(15)) {
            try await stage.sessions().contains { $0.value.payload["cwd"] == parent }
        }
    }

    /// Explain's reasons for `id` on `world`.
    func explained(_ id: String, on world: BatonWorld) async throws -> [String] {
        let fields = try #require(try await world.call(Self.activities, "Explain", [.string(id)]).first?.stringKeyedValue).mapValues(\.unwrapped)
        #expect(fields["continuable"]?.boolValue == true, "\(fields)")
        return fields["reasons"].flatMap([String].init(dbusValue:)) ?? []
    }

    /// The shells open when batond stopped (a logout, a restart) end so, and `baton terminals
    /// restore` reopens each in its terminal at its directory, once.
    @Test func shellsOpenAtAStopAreRestoredInOneGo() async throws {
        let stage = try await Stage.make()
        defer { stage.close() }
        _ = try await stage.world.baton(["sources", "enable", "terminals"])
        let first = try stage.place("first"), second = try stage.place("second")
        let feet = try [first, second].map { try stage.foot(at: $0, ["bash", "--norc", "--noprofile", "-i"]) }
        defer { for foot in feet { foot.kill(SIGKILL) } }
        let ids = [try await stage.session(at: first, "the first shell"), try await stage.session(at: second, "the second shell")]

        // batond stops, then the session's terminals go; batond starts again.
        await stage.world.stopDaemon()
        for foot in feet {
            foot.kill(SIGKILL)
            _ = await foot.wait()
        }
        try await stage.world.startDaemon()
        try await eventually("both ended as open at the stop", timeout: .seconds(15)) { try await stage.sessions().isEmpty }
        let history = try await stage.world.baton(["history", "list", "--app", "org.baton.Terminals", "--json"])
        #expect(history.stdout.components(separatedBy: "open when Baton last stopped following it").count == 3, "\(history.stdout) \(history.stderr)")

        let restored = try await stage.world.baton(["terminals", "restore"])
        #expect(restored.status == 0 && restored.stdout.components(separatedBy: "reopened").count == 3, "\(restored)")
        try await eventually("both shells are open again where they were", timeout: .seconds(15)) {
            let open = try await stage.sessions()
            return open.count == 2 && Set(open.values.compactMap { $0.payload["cwd"] }) == [first, second] && Set(open.keys).isDisjoint(with: ids)
        }
        let listed = try await stage.world.baton(["terminals"])
        #expect(listed.stdout.contains(first) && listed.stdout.contains(second), "\(listed)")
        // Once: what is open again is not reopened twice.
        let again = try await stage.world.baton(["terminals", "restore"])
        #expect(again.status == 0 && !again.stdout.contains("reopened") && again.stdout.contains("all are open again"), "\(again)")
    }

    /// A blocked source records nothing until unblocked; a shell opened while recording is
    /// paused is kept in memory only, and recorded once recording resumes.
    @Test func blockAndPauseAreObeyed() async throws {
        let stage = try await Stage.make()
        defer { stage.close() }
        _ = try await stage.world.baton(["sources", "enable", "terminals"])
        _ = try await stage.world.baton(["block", "org.baton.Terminals"])
        let blocked = try stage.place("blocked"), paused = try stage.place("paused")
        let first = try stage.foot(at: blocked, ["bash", "--norc", "--noprofile", "-i"])
        defer { first.kill(SIGKILL) }
        // Looked at twice with the shell open (batond's log says each look): nothing recorded.
        let looks: @Sendable () -> Int = { stage.world.daemonLog.components(separatedBy: "terminals: 1 shells open").count }
        try await eventually("batond looked at the shell twice", timeout: .seconds(15)) { looks() >= 3 }
        #expect(try await stage.sessions().isEmpty)
        _ = try await stage.world.baton(["unblock", "org.baton.Terminals"])
        _ = try await stage.session(at: blocked, "recorded once unblocked")

        _ = try await stage.world.baton(["pause"])
        let second = try stage.foot(at: paused, ["bash", "--norc", "--noprofile", "-i"])
        defer { second.kill(SIGKILL) }
        let unrecorded = try await stage.session(at: paused, "advertised while paused")
        let explained = try await stage.world.call(Self.activities, "Explain", [.string(unrecorded)]).first?.stringKeyedValue
        #expect(explained?["reasons"]?.unwrapped.arrayValue?.contains { $0.stringValue?.contains("while recording was paused") == true } == true,
                "\(String(describing: explained))")
        _ = try await stage.world.baton(["resume"])
        let recorded = try await stage.session(at: paused, "recorded once recording resumed")
        #expect(recorded != unrecorded)
        #expect(try await stage.world.call(Self.activities, "Explain", [.string(recorded)]).first?.stringKeyedValue?["state"]?.unwrapped
            == .string("live"))
    }

    /// A TCP port on loopback nobody listens on now.
    func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { Glibc.close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw TestSupportError("no free port: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// The terminals source's activities on a world's batond, and the shells behind them.
struct ShellSessions {
    typealias Session = (title: String, payload: [String: String], persistentID: String)
    let world: BatonWorld
    /// What the terminal said, shown when a wait times out.
    var terminalLog = ""

    /// Types `line` and Return into the shell of the activity `id` (its persistent id names
    /// the shell's pid), at its terminal, as keys would come (TIOCSTI). wtype, a virtual
    /// keyboard, lost the first keys of a line now and then while sway took its keymap.
    func type(_ line: String, into id: String) async throws {
        let persistent = try #require(try await all()[id]?.persistentID)
        let pid = try #require(persistent.split(separator: "-").dropLast().last.flatMap { Int32($0) }, "\(persistent)")
        let tty = open("/proc/\(pid)/fd/0", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard tty >= 0 else { throw TestSupportError("the shell \(pid)'s terminal: \(String(cString: strerror(errno)))") }
        defer { Glibc.close(tty) }
        for var byte in Array((line + "\n").utf8) {
            guard ioctl(tty, UInt(TIOCSTI), &byte) == 0 else { throw TestSupportError("TIOCSTI: \(String(cString: strerror(errno)))") }
        }
    }

    /// The terminals source's live activities: id → (title, payload's members).
    func all() async throws -> [String: Session] {
        let records = try await world.call(TerminalsTests.activities, "List", [.stringMap(["app_id": "org.baton.Terminals"])]).first?.arrayValue ?? []
        var found: [String: Session] = [:]
        for record in records {
            guard let fields = record.stringKeyedValue?.mapValues(\.unwrapped), let id = fields["id"]?.stringValue,
                  let json = fields["payload"]?.stringValue?.data(using: .utf8),
                  let payload = try JSONSerialization.jsonObject(with: json) as? [String: String] else { continue }
            found[id] = (fields["title"]?.stringValue ?? "", payload, fields["persistent_id"]?.stringValue ?? "")
        }
        return found
    }

    /// Types `exit` into every shell still followed until none is left, each activity ended with
    /// its shell. A shell just started may not have its terminal set up yet (a terminal may flush
    /// what was typed before): exit is typed again, every half second, into each shell still there.
    func exitEach(timeout: Duration = .seconds(15)) async throws {
        let typed = Mutex(ContinuousClock.now - .seconds(1))
        do {
            try await eventually("every shell's activity ended with it", timeout: timeout) {
                let left = try await all()
                let again = typed.withLock { last in
                    guard ContinuousClock.now - last >= .milliseconds(500) else { return false }
                    last = .now
                    return true
                }
                if again { for id in left.keys { try? await type("exit", into: id) } }
                return left.isEmpty
            }
        } catch {
            let left = try await all().map { "\($0.value.title) \($0.value.persistentID)" }
            let alive = try await world.run("/bin/sh", ["-c", "for p in $(pgrep -x bash); do echo $p $(readlink /proc/$p/cwd); done"])
            throw TestSupportError("\(error): left \(left); shells: \(alive.stdout); batond: \(world.daemonLog.suffix(1_500))")
        }
    }

    /// The one live session whose `cwd` is `directory`, once there is one.
    func one(at directory: String, _ what: String) async throws -> String {
        do {
            try await eventually(what, timeout: .seconds(15)) {
                try await all().filter { $0.value.payload["cwd"] == directory }.count == 1
            }
        } catch {
            let now = try await all().map { "\($0.key): \($0.value.title) \($0.value.payload)" }
            let shells = try await world.run("/bin/sh", ["-c", "for p in $(pgrep -x bash); do echo $p $(cat /proc/$p/comm) $(readlink /proc/$p/cwd) parent $(cat /proc/$(cut -d' ' -f4 /proc/$p/stat)/comm); done"])
            throw TestSupportError("\(error); the sessions now: \(now); the shells: \(shells.stdout); the terminal said: \((try? String(contentsOfFile: terminalLog, encoding: .utf8)) ?? ""); batond said: \(world.daemonLog.suffix(2_000))")
        }
        return try #require(try await all().first { $0.value.payload["cwd"] == directory }?.key)
    }
}
