import Foundation
import Glibc

/// `baton watch --json` running against a world's batond, subscribed before `init` returns;
/// what it prints goes to files in the bus's directory.
public final class Watcher: Sendable {
    private let process: Subprocess
    private let out: String

    public init(_ world: BatonWorld) async throws {
        out = world.bus.directory.appendingPathComponent("watch.out").path
        let err = world.bus.directory.appendingPathComponent("watch.err").path
        let outFD = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        let errFD = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer { close(outFD); close(errFD) }
        process = try Subprocess(try Executables.built("baton"), ["watch", "--json"], environment: world.bus.environment,
                                 stdout: outFD, stderr: errFD)
        do {
            try await eventually("watch subscribed") {
                ((try? String(contentsOfFile: err, encoding: .utf8)) ?? "").contains("watching org.baton.Handoff1")
            }
        } catch {
            process.kill(SIGKILL)
            throw error
        }
    }

    deinit { process.kill(SIGKILL) }

    /// What it printed so far.
    public var output: String { (try? String(contentsOfFile: out, encoding: .utf8)) ?? "" }

    /// Its events so far, a JSON object each.
    public func events() throws -> [[String: Any]] {
        try output.split(separator: "\n").map { line in
            guard let event = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                throw TestSupportError("watch printed a line that is not a JSON object: \(line)")
            }
            return event
        }
    }

    /// Interrupts it as Ctrl-C would and waits for it to end.
    public func stop() async {
        process.kill(SIGINT)
        _ = await process.wait()
    }
}
