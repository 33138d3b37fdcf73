import BatonCore
import DBus
import Foundation
import Glibc
import Synchronization
import TestSupport

// Sync through a folder (issue #47), `bench-sync folder [SAMPLES]`: advertise on A → Advertised
// on B, one at a time, with A and B two batond on private buses, through
//   a. one folder both see: no copy, batond's own part (inotify, the files, the records);
//   b. two folders and FolderCopier without delay: a copy by rename, woken by inotify;
//   c. two folders kept the same by two real Syncthing instances (fsWatcherDelayS 1), on
//      loopback in a network namespace of their own (Tests/Scripts/syncthing-pair.py).
// Prints p50 and p99 of each, in milliseconds, and the ratio of b's and c's p50 to a's.

/// Latencies (ms) of `samples` advertisements on A, each awaited on B, after `warm` unmeasured ones.
private func latencies(desktopFolder: String, laptopFolder: String, samples: Int, warm: Int) async throws -> [Double] {
    let a = try await BatonWorld.started(), b = try await BatonWorld.started()
    defer { a.close(); b.close() }
    let words = try await a.call("org.baton.Handoff1.Sync", "Init", [.string(desktopFolder), .stringMap(["device_name": "a"])]).first?.stringValue ?? ""
    let root = laptopFolder + "/baton-sync.json"
    let deadline = clock.now + .seconds(60)
    while !FileManager.default.fileExists(atPath: root) {
        guard clock.now < deadline else { throw TestSupportError("the folder's key did not reach B's folder") }
        try await Task.sleep(for: .milliseconds(20))
    }
    _ = try await b.call("org.baton.Handoff1.Sync", "Join", [.string(laptopFolder), .string(words), .stringMap(["device_name": "b"])])
    for world in [a, b] {
        _ = try await world.call("org.baton.Handoff1.Registry", "RegisterActivityType", [.string(type), .string("com.raywenderlich.hawknotes"), .stringMap([:])])
    }
    let arrivals = Mutex<[String: ContinuousClock.Instant]>([:])
    let signals = try await b.client.signals(matching: MatchRule(interface: activities, member: "Advertised"))
    let listener = Task {
        for await message in signals {
            if let id = message.body.first?.stringValue { arrivals.withLock { $0[id] = clock.now } }
        }
    }
    defer { listener.cancel() }
    var measured: [Double] = []
    for index in 0..<(warm + samples) {
        let start = clock.now
        let id = try await advertise(a, "folder \(index)")
        let deadline = clock.now + .seconds(30)
        var arrived: ContinuousClock.Instant?
        while arrived == nil {
            arrived = arrivals.withLock { $0[id] }
            guard clock.now < deadline else { throw TestSupportError("\(id) did not arrive on B within 30 s") }
            if arrived == nil { try await Task.sleep(for: .microseconds(200)) }
        }
        if index >= warm, let arrived { measured.append(milliseconds(arrived - start)) }
    }
    return measured
}

func folderBenchmark(samples: Int) async throws {
    var results: [(String, [Double])] = []
    say("a. one folder …")
    let shared = try TemporaryDirectory.make(prefix: "bench-folder").path
    results.append(("one folder (batond's part)", try await latencies(desktopFolder: shared, laptopFolder: shared, samples: samples, warm: 10)))

    say("b. two folders and a copier …")
    let first = try TemporaryDirectory.make(prefix: "bench-folder-a").path, second = try TemporaryDirectory.make(prefix: "bench-folder-b").path
    var options = FolderCopier.Options()
    options.delay = .zero
    let copier = try FolderCopier(first, second, options: options, ignoring: SyncedFolderNames.isLeftByTools)
    results.append(("two folders, a copier", try await latencies(desktopFolder: first, laptopFolder: second, samples: samples, warm: 10)))
    copier.stop()

    say("c. two folders and Syncthing …")
    let work = try TemporaryDirectory.make(prefix: "bench-syncthing")
    let a = work.appendingPathComponent("a-sync").path, b = work.appendingPathComponent("b-sync").path
    for folder in [a, b] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
    let output = work.appendingPathComponent("pair.out").path
    let outputFile = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    defer { close(outputFile) }
    let pair = try Subprocess(try Executables.require("unshare", package: "util-linux"), [
        "-n", "python3", Repository.root.appendingPathComponent("Tests/Scripts/syncthing-pair.py").path, work.path, a, b,
    ], stdout: outputFile, stderr: outputFile, ownGroup: true)
    defer { pair.kill(SIGKILL) }
    let ready = clock.now + .seconds(90)
    while !((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").contains("ready") {
        guard clock.now < ready, !pair.hasExited else { throw TestSupportError("syncthing-pair: \((try? String(contentsOfFile: output, encoding: .utf8)) ?? "")") }
        try await Task.sleep(for: .milliseconds(50))
    }
    results.append(("two folders, Syncthing (fsWatcherDelayS 1)", try await latencies(desktopFolder: a, laptopFolder: b, samples: max(10, samples / 10), warm: 2)))

    let floor = percentile(results[0].1, 0.5)
    print("advertise on A → Advertised on B, one at a time (ms):")
    for (name, values) in results {
        let p50 = percentile(values, 0.5), p99 = percentile(values, 0.99)
        print("  " + name.padding(toLength: 44, withPad: " ", startingAt: 0)
            + String(format: " n=%4d  p50 %8.2f  p99 %8.2f  p50/a %6.2f×", values.count, p50, p99, p50 / floor))
    }
}
