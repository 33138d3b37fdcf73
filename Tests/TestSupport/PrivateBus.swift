import DBus
import Foundation
import Glibc

/// A private `dbus-daemon` for one test: its own socket, its own service directory,
/// never the user's bus. Stopped by `stop()` (and, as a backstop, on deinit).
///
/// Starting throws (and so fails the test) when `dbus-daemon` is missing or does
/// not come up: a suite that needs a bus never passes silently without one.
public final class PrivateBus: @unchecked Sendable {
    /// The bus address clients connect to.
    public let address: String
    /// A scratch directory removed on stop: the socket, the config, `services/`.
    public let directory: URL
    /// Where D-Bus activation looks for `.service` files.
    public let serviceDirectory: URL
    private let process: Subprocess

    /// With `allowOtherUsers`, processes of any Unix user may connect (to test refusals).
    public init(allowOtherUsers: Bool = false) throws {
        directory = try TemporaryDirectory.make(prefix: "baton-bus")
        serviceDirectory = directory.appendingPathComponent("services")
        try FileManager.default.createDirectory(at: serviceDirectory, withIntermediateDirectories: true)
        let config = directory.appendingPathComponent("bus.conf")
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(directory.path)/bus</listen>
              <servicedir>\(serviceDirectory.path)</servicedir>
              <policy context="default">
                \(allowOtherUsers ? "<allow user=\"*\"/>" : "")
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
              <!-- The session bus's own limits (Debian's session.conf): next to none. -->
              <limit name="max_replies_per_connection">50000</limit>
              <limit name="max_incoming_bytes">1000000000</limit>
              <limit name="max_outgoing_bytes">1000000000</limit>
            </busconfig>
            """.write(to: config, atomically: true, encoding: .utf8)

        guard let daemon = Executables.find("dbus-daemon") else {
            throw TestSupportError("dbus-daemon is not installed (apt-get install dbus-daemon); bus tests cannot run")
        }
        var pipe: [Int32] = [0, 0]
        guard Glibc.pipe(&pipe) == 0 else { throw TestSupportError("pipe failed: errno \(errno)") }
        defer { close(pipe[0]) }
        // The daemon's own complaints (it cannot raise its fd limit as a user) go to bus.log.
        let log = open(directory.appendingPathComponent("bus.log").path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        defer { close(log) }
        do {
            process = try Subprocess(
                daemon, ["--config-file=\(config.path)", "--nofork", "--print-address=1"], stdout: pipe[1], stderr: log)
            close(pipe[1])
        } catch {
            close(pipe[1])
            throw error
        }

        // dbus-daemon prints its address once it is listening: read up to the first newline.
        var collected: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while !collected.contains(UInt8(ascii: "\n")) {
            let count = read(pipe[0], &buffer, buffer.count)
            if count <= 0 { throw TestSupportError("dbus-daemon exited before printing its address") }
            collected += buffer[0..<count]
        }
        let line = String(decoding: collected, as: UTF8.self).split(separator: "\n").first ?? ""
        address = String(line)
    }

    /// Environment for a child process that should use this bus as its session bus.
    public var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = address
        // Apps' declared activity types: only what a test puts there, never the machine's installed ones.
        environment["XDG_DATA_HOME"] = dataHome
        environment["XDG_DATA_DIRS"] = "/usr/local/share:/usr/share"
        return environment
    }

    /// The `XDG_DATA_HOME` of programs started on this bus (created on first use by whoever writes there).
    public var dataHome: String { directory.appendingPathComponent("data").path }

    /// A new connection of our own to this bus.
    public func connect() throws -> Connection {
        try Connection(.address(address))
    }

    /// Installs a D-Bus service file so the bus can start `name` on demand.
    public func installService(name: String, exec: String) throws {
        try "[D-BUS Service]\nName=\(name)\nExec=\(exec)\n"
            .write(to: serviceDirectory.appendingPathComponent("\(name).service"), atomically: true, encoding: .utf8)
    }

    /// Stops the bus daemon and removes its directory.
    public func stop() {
        process.kill()
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }
}

/// A failure of the test environment itself, with what to install or fix.
public struct TestSupportError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Fresh directories under the system temp directory.
public enum TemporaryDirectory {
    public static func make(prefix: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}
