@testable import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// Telling sandboxed callers apart: the files read (from fixtures laid out like /proc), and
/// the process pinned by a pidfd as the bus gives one (dbus-daemon ≥ 1.15.8, dbus-broker ≥ 34;
/// Debian 12's gives none, so that path is tested here with a pidfd of our own child).
/// Identification over a real bus, inside bubblewrap: SandboxTests.
struct CallerTests {
    /// On a real bus: a caller is identified at its first call, kept while it is connected,
    /// forgotten once its unique name leaves.
    @Test func aCallerIsRememberedUntilItLeavesTheBus() async throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let server = try bus.connect()
        defer { server.close() }
        try await server.setAccessCheck { call in
            guard call.caller?.user == getuid(), call.caller?.isSandboxed == false else { throw DBusError.failed("not a host client") }
        }
        try await server.export("/org/baton/Test", [Interface("org.baton.Test1", methods: [Method("Ping") { _ in [] }])])
        let client = try bus.connect()
        for _ in 0..<3 { _ = try await client.call(server.uniqueName, "/org/baton/Test", "org.baton.Test1", "Ping") }
        #expect(server.rememberedCallers == 1, "three calls, one identification")
        client.close()
        try await eventually("the caller forgotten once it left") { server.rememberedCallers == 0 }
    }

    @Test func aFlatpakIsNamedByItsInfoFile() {
        let info = """
            [Application]
            name=org.example.Sandboxed
            runtime=runtime/org.freedesktop.Platform/x86_64/23.08

            [Instance]
            instance-id=1234
            """
        #expect(SandboxIdentification.flatpakAppID(info: info) == "org.example.Sandboxed")
        #expect(SandboxIdentification.flatpakAppID(info: "[Application]\n  name = org.example.Spaced \n") == "org.example.Spaced")
        // `name` outside [Application], an empty name, no section: not an app.
        #expect(SandboxIdentification.flatpakAppID(info: "[Instance]\nname=org.example.Other\n") == nil)
        #expect(SandboxIdentification.flatpakAppID(info: "[Application]\nname=\n") == nil)
        #expect(SandboxIdentification.flatpakAppID(info: "name=org.example.Loose\n") == nil)
    }

    @Test func aSnapIsNamedByItsCgroup() {
        let v2 = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/snap.firefox.firefox-8e2b.scope\n"
        #expect(SandboxIdentification.snapName(cgroup: v2) == "firefox")
        let hook = "0::/system.slice/snap.lxd.hook.configure-5b1f.scope\n"
        #expect(SandboxIdentification.snapName(cgroup: hook) == "lxd")
        let v1 = "12:pids:/user.slice\n1:name=systemd:/user.slice/user-1000.slice/snap.spotify.spotify.2c1e.scope\n"
        #expect(SandboxIdentification.snapName(cgroup: v1) == "spotify")
        #expect(SandboxIdentification.snapName(cgroup: "0::/user.slice/user-1000.slice/session-2.scope\n") == nil)
        #expect(SandboxIdentification.snapName(cgroup: "0::/snapd.service\n") == nil)
        #expect(SandboxIdentification.snapName(cgroup: "0::/app.slice/snap..x.scope\n") == nil)
    }

    @Test func aProcessDescriptorNamesItsPid() {
        #expect(SandboxIdentification.processID(fdinfo: "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nPid:\t4242\nNSpid:\t4242\n") == 4242)
        // -1: the process ended; 0: in a pid namespace we cannot see.
        #expect(SandboxIdentification.processID(fdinfo: "Pid:\t-1\n") == nil)
        #expect(SandboxIdentification.processID(fdinfo: "Pid:\t0\n") == nil)
        #expect(SandboxIdentification.processID(fdinfo: "pos:\t0\n") == nil)
    }

    @Test func capabilitiesAreReadFromStatus() {
        #expect(SandboxIdentification.holdsCapabilities(status: "Name:\tpython3\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\n"))
        #expect(!SandboxIdentification.holdsCapabilities(status: "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"))
        #expect(!SandboxIdentification.holdsCapabilities(status: "Name:\tx\n"))
    }

    /// Where there is no pidfd_open (valgrind, a kernel before 5.3), the start time pins the process.
    @Test func withoutPidfdsTheStartTimePinsTheProcess() async throws {
        let stat = "4242 (a (tricky) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100"
        #expect(SandboxIdentification.startTime(stat: stat) == 987_654)
        #expect(SandboxIdentification.startTime(stat: "4242 (short) S 1") == nil)
        let child = try Subprocess("/bin/sleep", ["30"])
        let noPidfds = SandboxIdentification(proc: "/proc", pidfds: false)
        #expect(try noPidfds.caller(Credentials(user: getuid(), processID: UInt32(child.pid))) == Caller(user: getuid()))
        child.kill(SIGKILL)
        await child.wait()
        let gone = #expect(throws: DBusError.self) { try noPidfds.caller(Credentials(user: getuid(), processID: UInt32(child.pid))) }
        #expect(gone?.name == DBusError.Name.unixProcessIdUnknown, "an ended process is told from an unreadable one")
    }

    /// A directory laid out like /proc for this test process's pid, with `root` and `cgroup`.
    func fixture(flatpakInfo: String? = nil, cgroup: String? = nil) throws -> SandboxIdentification {
        let proc = try TemporaryDirectory.make(prefix: "baton-proc")
        let process = proc.appendingPathComponent("\(getpid())")
        try FileManager.default.createDirectory(at: process.appendingPathComponent("root"), withIntermediateDirectories: true)
        if let flatpakInfo { try flatpakInfo.write(to: process.appendingPathComponent("root/.flatpak-info"), atomically: true, encoding: .utf8) }
        if let cgroup { try cgroup.write(to: process.appendingPathComponent("cgroup"), atomically: true, encoding: .utf8) }
        return SandboxIdentification(proc: proc.path)
    }

    @Test func callersFromFixtures() throws {
        let me = Credentials(user: getuid(), processID: UInt32(getpid()))
        let flatpak = try fixture(flatpakInfo: "[Application]\nname=org.example.Sandboxed\n", cgroup: "0::/snap.other.app.scope\n")
        #expect(try flatpak.caller(me) == Caller(user: getuid(), kind: .flatpak, appID: "org.example.Sandboxed"), "the info file wins")
        let snap = try fixture(cgroup: "0::/user.slice/snap.firefox.firefox-1.scope\n")
        #expect(try snap.caller(me) == Caller(user: getuid(), kind: .snap, appID: "snap.firefox"))
        let host = try fixture(cgroup: "0::/user.slice/user-1000.slice/session-2.scope\n")
        #expect(try host.caller(me) == Caller(user: getuid()))
        #expect(try host.caller(me).isSandboxed == false)
    }

    /// A root that cannot be opened says nothing: the caller is refused, not taken for a host client.
    @Test func anUnreadableProcessIsRefusedNotTakenForTheHost() throws {
        let missing = SandboxIdentification(proc: try TemporaryDirectory.make(prefix: "baton-proc").path)
        let error = #expect(throws: DBusError.self) { try missing.caller(Credentials(user: getuid(), processID: UInt32(getpid()))) }
        #expect(error?.name == DBusError.Name.accessDenied)
        // No process at all, and a pid the bus would never give.
        #expect(throws: DBusError.self) { try SandboxIdentification().caller(Credentials(user: getuid())) }
        #expect(throws: DBusError.self) { try SandboxIdentification().caller(Credentials(user: getuid(), processID: 0)) }
    }

    /// The bus's pidfd path, with a pidfd of a child: identified while it runs; once it has
    /// ended (its pid free for reuse) the same descriptor is refused.
    @Test func aProcessDescriptorIsFollowedAndAnEndedProcessRefused() async throws {
        let child = try Subprocess("/bin/sleep", ["30"])
        var failure: Int32 = 0
        let descriptor = try #require(SandboxIdentification.pin(child.pid, failure: &failure))
        let credentials = Credentials(user: getuid(), processFD: descriptor)
        #expect(try SandboxIdentification().caller(credentials) == Caller(user: getuid()))
        child.kill(SIGKILL)
        await child.wait()
        let error = #expect(throws: DBusError.self) { try SandboxIdentification().caller(credentials) }
        #expect(error?.message.contains("no running process") == true, "\(error?.message ?? "")")
        // The pid path: a pid whose process has ended cannot be pinned.
        let gone = #expect(throws: DBusError.self) { try SandboxIdentification().caller(Credentials(user: getuid(), processID: UInt32(child.pid))) }
        // An ended process is not one that might be sandboxed (Peers keeps broadcasting for it).
        #expect(error?.name == DBusError.Name.unixProcessIdUnknown && gone?.name == DBusError.Name.unixProcessIdUnknown)
    }
}
