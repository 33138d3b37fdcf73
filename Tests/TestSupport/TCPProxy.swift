import Foundation
import Glibc

/// `Tests/Scripts/tcp-proxy.py` between the devices and the server: the test cuts every
/// connection through it mid-stream (`cut`), or makes the server look down (`refuse`).
public final class TCPProxy: @unchecked Sendable {
    public let port: Int
    private let process: Subprocess
    private let commands: Int32
    private let replies: Int32

    public init(to target: Int) throws {
        var input: [Int32] = [0, 0], output: [Int32] = [0, 0]
        guard pipe(&input) == 0, pipe(&output) == 0 else { throw TestSupportError("pipe: errno \(errno)") }
        // Only the child's ends cross exec (as its stdin and stdout); the child must not hold ours.
        for fd in input + output { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        process = try Subprocess("/usr/bin/python3", [Repository.root.appendingPathComponent("Tests/Scripts/tcp-proxy.py").path, String(target)],
                                 stdin: input[0], stdout: output[1])
        Glibc.close(input[0])
        Glibc.close(output[1])
        commands = input[1]
        replies = output[0]
        let ready = Self.readLine(replies)
        guard ready.hasPrefix("listening "), let port = Int(ready.dropFirst("listening ".count)) else {
            throw TestSupportError("the proxy said '\(ready)'")
        }
        self.port = port
    }

    /// The server's URL through the proxy.
    public func url(_ direct: String) -> String {
        direct.replacingOccurrences(of: #":\d+/"#, with: ":\(port)/", options: .regularExpression)
    }

    /// Sends a command and waits for its answer.
    @discardableResult
    public func send(_ command: String) -> String {
        _ = (command + "\n").withCString { write(commands, $0, strlen($0)) }
        return Self.readLine(replies)
    }

    public func close() {
        process.kill(SIGKILL)
        Glibc.close(commands)
        Glibc.close(replies)
    }

    private static func readLine(_ fd: Int32) -> String {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1, byte != UInt8(ascii: "\n") { bytes.append(byte) }
        return String(decoding: bytes, as: UTF8.self)
    }
}
