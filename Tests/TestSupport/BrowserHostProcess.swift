import Foundation
import Glibc

/// `baton-browser-host` run as the browser runs it: a link of that name to `baton`, on pipes.
public final class BrowserHostProcess: @unchecked Sendable {
    private let process: Subprocess
    private let directory: URL
    private var input: Int32
    private let fromHost: Int32
    private var unread: [UInt8] = []

    public init(on world: BatonWorld) throws {
        directory = try TemporaryDirectory.make(prefix: "baton-host")
        let link = directory.appendingPathComponent("baton-browser-host").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: try Executables.built("baton"))
        var toHost: [Int32] = [0, 0], fromHost: [Int32] = [0, 0]
        guard pipe(&toHost) == 0, pipe(&fromHost) == 0 else { throw TestSupportError("pipe: \(errno)") }
        // Other children the tests start get none of them (posix_spawn's dup2 gives the host its own).
        for fd in toHost + fromHost { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        // Chromium's argument: the extension's origin.
        process = try Subprocess(link, ["chrome-extension://dadpnfjbaklggmnklkpggjdnfejcegin/"],
                                 environment: world.bus.environment, stdin: toHost[0], stdout: fromHost[1], ownGroup: true)
        Glibc.close(toHost[0])
        Glibc.close(fromHost[1])
        input = toHost[1]
        self.fromHost = fromHost[0]
    }

    public func send(raw bytes: [UInt8]) {
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(input, $0.baseAddress! + written, $0.count - written) }
            guard count > 0 else { return }
            written += count
        }
    }

    public func send(frameOf bytes: [UInt8]) {
        send(raw: withUnsafeBytes(of: UInt32(bytes.count)) { Array($0) } + bytes)
    }

    /// The next frame the host wrote, as JSON; throws when none comes within 10 s.
    public func receive() async throws -> [String: Any] {
        let text = try await receiveText()
        guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
            throw TestSupportError("not a JSON object: \(text)")
        }
        return object
    }

    public func receiveText() async throws -> String {
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            if unread.count >= 4 {
                let length = Int(unread.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) })
                if unread.count >= 4 + length {
                    defer { unread.removeFirst(4 + length) }
                    return String(decoding: unread[4..<(4 + length)], as: UTF8.self)
                }
            }
            guard ContinuousClock.now < deadline else { throw TestSupportError("no frame from the host in 10 s (have \(unread))") }
            var poller = pollfd(fd: fromHost, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 65_536)
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fromHost, $0.baseAddress, $0.count) }
            guard count > 0 else { throw TestSupportError("the host closed its output (have \(unread))") }
            unread += buffer[..<count]
        }
    }

    public func exchange(_ text: String) async throws -> String {
        send(frameOf: Array(text.utf8))
        return try await receiveText()
    }

    public func request(_ text: String) async throws -> [String: Any] {
        try await request(bytes: Array(text.utf8))
    }

    public func request(bytes: [UInt8]) async throws -> [String: Any] {
        send(frameOf: bytes)
        return try await receive()
    }

    /// The browser closes its end, as when it quits.
    public func endInput() {
        if input >= 0 { Glibc.close(input) }
        input = -1
    }

    /// The exit status, within 10 s (then killed: 128 + 9).
    public func exitStatus() async -> Int32 {
        let watchdog = Task { [process] in
            try await Task.sleep(for: .seconds(10))
            process.kill(SIGKILL)
        }
        defer { watchdog.cancel() }
        return await process.wait()
    }

    /// What the host wrote after its last frame, read to the end (call once it has exited).
    public func rest() async throws -> [UInt8] {
        let deadline = ContinuousClock.now + .seconds(10)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while ContinuousClock.now < deadline {
            var poller = pollfd(fd: fromHost, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fromHost, $0.baseAddress, $0.count) }
            guard count > 0 else { return unread }
            unread += buffer[..<count]
        }
        throw TestSupportError("the host's output did not end in 10 s")
    }

    public func close() {
        endInput()
        process.kill(SIGKILL)
        Glibc.close(fromHost)
        try? FileManager.default.removeItem(at: directory)
    }
}
