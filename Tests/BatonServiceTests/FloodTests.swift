import BatonCore
import DBus
import Foundation
import Glibc
import Synchronization
import Testing
import TestSupport

/// One client cannot take batond's memory or time: beyond its calls in flight
/// (`--max-calls-per-client`), it is answered `LimitsExceeded` at once, and others are served.
@Suite(.serialized)
struct FloodTests {
    static let activities = "org.baton.Handoff1.Activities"
    static let limitsExceeded = "org.baton.Handoff1.Error.LimitsExceeded"

    /// Answers by error name ("success" for none), from many tasks.
    final class Answers: Sendable {
        private let counts = Mutex<[String: Int]>([:])
        func add(_ name: String?) { counts.withLock { $0[name ?? "success", default: 0] += 1 } }
        var all: [String: Int] { counts.withLock { $0 } }
        func count(_ name: String) -> Int { all[name] ?? 0 }
    }

    /// Continue calls that wait on an app that never answers stay in flight: the 257th is refused.
    @Test func callsBeyondTheLimitInFlightAreRefusedAndOtherClientsServed() async throws {
        let world = try await BatonWorld.startedInProcess { $0.handlerTimeout = .seconds(20) }
        defer { world.close() }
        // An app whose handler never answers.
        let app = try world.bus.connect()
        defer { app.close() }
        try await app.export("/", [Interface("org.baton.Handoff1.Handler", methods: [
            Method("ContinueActivity", in: [Argument("scene", "o"), Argument("activity", "a{sv}")], out: [Argument("storage", "a{sv}")],
                   ordering: .concurrent) { _ in
                try await Task.sleep(for: .seconds(60))
                return [.record([:])]
            },
        ])])
        try await app.requestName("com.example.Slow")
        try await world.register(handler: "com.example.Slow", requiredKeys: "")
        let id = try await world.advertise("Agatha")

        let flooder = try world.bus.connect()
        defer { flooder.close() }
        let answered = Answers()
        let waiting = Task {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<300 {
                    group.addTask {
                        let name = await errorName {
                            try await flooder.call("org.baton.Handoff1", BatonWorld.root, Self.activities, "Continue",
                                                   [.string(id), .stringMap([:])], timeout: .seconds(30))
                        }
                        answered.add(name)
                    }
                }
            }
        }
        // 44 of the 300 are over the limit and answered at once; 256 wait on the app.
        try await eventually("the calls over the limit are refused") { answered.count(Self.limitsExceeded) == 44 }
        // Another client is served meanwhile, reads and writes alike.
        let clock = ContinuousClock()
        let start = clock.now
        #expect(try await world.activityCount() == 1)
        _ = try await world.advertise("Jamie")
        // Generous, for a loaded machine: at once, here, when alone.
        #expect(clock.now - start < .seconds(5))
        #expect(answered.all.values.reduce(0, +) == 44, "\(answered.all)")

        // The app goes away: the waiting calls fail as HandlerFailed, and the flooder may call again.
        app.close()
        await waiting.value
        #expect(answered.all == [Self.limitsExceeded: 44, "org.baton.Handoff1.Error.HandlerFailed": 256])
        #expect(try await flooder.call("org.baton.Handoff1", BatonWorld.root, Self.activities, "List", [.stringMap([:])]).count == 1)
    }

    /// Ten thousand calls sent at once by one client: each gets one answer (a result, or
    /// LimitsExceeded when more than 256 are waiting), batond's memory stays bounded, and
    /// another client's calls keep answering. (This client reads its replies; how many of
    /// its calls wait at once depends on the two processes' speeds, so refusals may or may
    /// not happen here: the test above makes them certain.)
    @Test func aFloodOfPipelinedCallsIsBounded() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        try await world.register(requiredKeys: "")
        let id = try await world.advertise("Agatha")
        let pid = try #require(world.daemon?.process.pid)
        func rss() -> Int {
            let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        }
        let before = rss()
        let flooder = try world.bus.connect()
        defer { flooder.close() }
        let answers = Answers()
        let flood = Task {
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<10_000 {
                    group.addTask {
                        let name = await errorName {
                            try await flooder.call("org.baton.Handoff1", BatonWorld.root, Self.activities,
                                                   index % 2 == 0 ? "Get" : "List", index % 2 == 0 ? [.string(id)] : [.stringMap([:])],
                                                   timeout: .seconds(60))
                        }
                        answers.add(name)
                    }
                }
            }
        }
        // Another client's calls are answered while the flood is: the first of them before the
        // flood's last answer (a daemon serving one connection until it is drained fails this,
        // however fast or loaded the machine; a time bound was load-sensitive).
        try await eventually("the flood is under way", timeout: .seconds(60)) { answers.all.values.reduce(0, +) >= 200 }
        var floodAnsweredByThen: Int?
        for _ in 0..<20 {
            #expect(try await world.call(Self.activities, "Get", [.string(id)]).count == 1)
            if floodAnsweredByThen == nil { floodAnsweredByThen = answers.all.values.reduce(0, +) }
        }
        await flood.value
        let counts = answers.all
        #expect(counts.values.reduce(0, +) == 10_000)
        #expect(Set(counts.keys).isSubset(of: ["success", Self.limitsExceeded]), "\(counts)")
        #expect(floodAnsweredByThen ?? 10_000 < 10_000, "the other client was answered only after the flood: \(floodAnsweredByThen ?? -1)")
        #expect(rss() - before < 8_000, "RSS \(before) -> \(rss()) KiB")
    }
}
