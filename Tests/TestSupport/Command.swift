import Foundation
import Glibc

/// What a finished command printed and how it exited.
public struct CommandResult: Sendable, CustomStringConvertible {
    public let status: Int32
    public let stdout: String
    public let stderr: String

    public var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
}

/// Finding and running programs we did not write (`gdbus`, `busctl`, `dbus-send`,
/// `/usr/bin/python3`) and the package's own built executables.
public enum Executables {
    /// The full path of `name` on PATH, or in /usr/bin and /usr/sbin.
    public static func find(_ name: String) -> String? {
        if name.hasPrefix("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for directory in path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/sbin"] {
            let candidate = directory + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// The path of an executable this package builds, next to the running test binary.
    public static func built(_ name: String) throws -> String {
        let testBinary = CommandLine.arguments[0]
        let directory = testBinary.contains("/") ? String(testBinary[..<(testBinary.lastIndex(of: "/") ?? testBinary.endIndex)]) : "."
        let path = directory + "/" + name
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestSupportError("\(path) is not built; run swift build --build-tests first")
        }
        return path
    }

    /// Throws naming the Debian package to install when a client is missing.
    public static func require(_ name: String, package: String) throws -> String {
        guard let path = find(name) else {
            throw TestSupportError("\(name) is not installed (apt-get install \(package))")
        }
        return path
    }

    /// Runs a program to completion and collects its output.
    ///
    /// Output goes through files, not pipes, so a chatty program cannot block on a
    /// full pipe. The program leads a process group of its own, so nothing it does to its
    /// group reaches the test; still running after `timeout`, it is killed with everything
    /// it started (exit 128+9).
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        stdin: String? = nil, timeout: Duration = .seconds(30)
    ) async throws -> CommandResult {
        let directory = try TemporaryDirectory.make(prefix: "baton-cmd")
        defer { try? FileManager.default.removeItem(at: directory) }
        let paths = ["in", "out", "err"].map { directory.appendingPathComponent($0).path }
        try (stdin ?? "").write(toFile: paths[0], atomically: false, encoding: .utf8)
        let input = open(paths[0], O_RDONLY | O_CLOEXEC)
        let output = open(paths[1], O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        let errors = open(paths[2], O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        defer { [input, output, errors].forEach { close($0) } }

        let child = try Subprocess(
            find(executable) ?? executable, arguments, environment: environment,
            stdin: input, stdout: output, stderr: errors, ownGroup: true)
        let watchdog = Task {
            try await Task.sleep(for: timeout)
            child.kill(SIGKILL)
        }
        let status = await child.wait()
        watchdog.cancel()
        let stdout = (try? String(contentsOfFile: paths[1], encoding: .utf8)) ?? ""
        let stderr = (try? String(contentsOfFile: paths[2], encoding: .utf8)) ?? ""
        return CommandResult(status: status, stdout: stdout, stderr: stderr)
    }
}

/// The repository the tests were built from: its scripts, unit files and contract.
public enum Repository {
    public static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}

/// The `key=value` lines a test script prints (Tests/Scripts/*-test.sh), by key; other lines are left out.
public func keyValueLines(_ text: String) -> [String: String] {
    var seen: [String: String] = [:]
    for line in text.split(separator: "\n") {
        guard let equals = line.firstIndex(of: "=") else { continue }
        seen[String(line[..<equals])] = String(line[line.index(after: equals)...])
    }
    return seen
}
