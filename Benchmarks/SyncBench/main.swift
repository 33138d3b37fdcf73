import BatonCore
import BatonStore
import BatonSync
import DBus
import Foundation
import Glibc
import Logging
import Synchronization
import TestSupport

// Sync's benchmark (issue #23), run by scripts/bench-sync on loopback, in one run:
//   0. the store alone inserting with sync off and on: the outbox row's own cost, the floor of 2.;
//   1. advertise on A → Advertised on B, one at a time: p50, p99;
//   2. Advertise's round trip on A with sync on against a daemon with sync off, interleaved; and a
//      control: sync off while B and the server take as many records of another device (Ghost.swift);
//   3. catch-up of 10 000 activities after a partition (the proxy refuses B, A advertises, the proxy lets B back);
//   4. a fleet: 100 users × 2 devices, each advertising once a second against one server, in this
//      process (a store and a sync engine per device): the partner's latency, and the server's CPU.
// Usage: bench-sync [FLEET_SECONDS] [FLEET_USERS]   (defaults 60 and 100: 200 devices)
//        bench-sync folder [SAMPLES]                  (sync through a folder: Folder.swift; default 200)

let fleetSeconds = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 60
let fleetUsers = CommandLine.arguments.dropFirst(2).first.flatMap(Int.init) ?? 100
let activities = "org.baton.Handoff1.Activities"
let type = "com.raywenderlich.hawknotes.staterestore.characterDetail"
let clock = ContinuousClock()
// (After the globals above, which Folder.swift uses: top-level globals are set in order.)
if CommandLine.arguments.dropFirst().first == "folder" {
    try await folderBenchmark(samples: CommandLine.arguments.dropFirst(2).first.flatMap(Int.init) ?? 200)
    exit(0)
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
}

func say(_ line: String) { FileHandle.standardError.write((line + "\n").data(using: .utf8) ?? Data()) }

func advertise(_ world: BatonWorld, _ title: String) async throws -> String {
    try await world.call(activities, "Advertise", [.string(type), .string(title), .string(#"{"id":"bench"}"#), .stringMap([:])])
        .first?.stringValue ?? ""
}

/// CPU time (ms) of the PostgreSQL server's processes so far.
func serverCPU(_ server: PostgresServer) -> Double {
    let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
    var total = 0.0
    for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
        guard Int(entry) != nil, let command = try? String(contentsOfFile: "/proc/\(entry)/cmdline", encoding: .utf8),
              command.hasPrefix("postgres"), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { continue }
        // Only this run's cluster: its processes' working directory is its data directory.
        guard let cwd = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(entry)/cwd"),
              cwd.hasPrefix(server.directory.path) else { continue }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        if fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) { total += (user + system) / ticks * 1000 }
    }
    return total
}

/// CPU time (µs) of process `pid` so far, over its threads (schedstat: nanoseconds on a CPU).
func processCPU(_ pid: pid_t?) -> Double {
    guard let pid else { return .nan }
    var total = 0.0
    for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
        if let line = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/schedstat", encoding: .utf8),
           let nanoseconds = line.split(separator: " ").first.flatMap({ Double($0) }) { total += nanoseconds / 1000 }
    }
    return total
}

// 0. The floor of the outbox's cost: the store alone (no bus, no sync engine), inserting one
// activity per transaction with sync off and with it on (the outbox row and its trigger),
// interleaved; the outbox is emptied between rounds, untimed, as the engine would.
say("0/4 the store alone, sync on and off …")
let floorType = ActivityType(type: type, appID: "com.raywenderlich.hawknotes", title: "Character")
var storeOff: [Double] = [], storeOn: [Double] = []
do {
    let directory = try TemporaryDirectory.make(prefix: "baton-floor")
    let stores = try ["off", "on"].map { try Store(path: directory.appendingPathComponent("\($0).sqlite").path) }
    for store in stores { try store.write { try $0.register(floorType) } }
    try stores[1].write { try $0.startSync(as: Store.SyncIdentity(deviceID: "floor", userName: "floor")) }
    for round in 0..<5 {
        for (index, store) in stores.enumerated() {
            for n in 0..<300 {
                let now = WallClock.nowMicroseconds()
                let activity = Activity(id: Identifier.make(), type: type, appID: floorType.appID, title: "floor \(round) \(n)",
                                        payload: #"{"id":"bench"}"#, createdAt: now, updatedAt: now)
                let start = clock.now
                _ = try store.write { try $0.insert(activity) }
                let elapsed = milliseconds(clock.now - start) * 1000
                if index == 0 { storeOff.append(elapsed) } else { storeOn.append(elapsed) }
            }
            if index == 1 { try store.write { try $0.sent(upTo: try $0.stageOutbox(limit: 1000) { _ in [] }.last?.logSeq ?? 0) } }
        }
    }
    for store in stores { try store.close() }
}

let server = try await PostgresServer()
defer { server.close() }
let setup = try await SyncServer(server)
let proxy = try TCPProxy(to: server.port)
defer { proxy.close() }
let a = try await BatonWorld.started(), b = try await BatonWorld.started(), off = try await BatonWorld.started()
defer { a.close(); b.close(); off.close() }
let words = try await a.call("org.baton.Handoff1.Sync", "Init", [
    .string(try await setup.addDevice(user: "ana").url), .stringMap(["device_name": "a"]),
]).first?.stringValue ?? ""
_ = try await b.call("org.baton.Handoff1.Sync", "Join", [
    .string(proxy.url(try await setup.addDevice(user: "ana").url)), .string(words), .stringMap(["device_name": "b"]),
])
for world in [a, b, off] {
    _ = try await world.call("org.baton.Handoff1.Registry", "RegisterActivityType", [.string(type), .string("com.raywenderlich.hawknotes"), .stringMap([:])])
}

// Arrival times of Advertised on B, by id.
let arrivals = Mutex<[String: ContinuousClock.Instant]>([:])
let signals = try await b.client.signals(matching: MatchRule(interface: activities, member: "Advertised"))
let listener = Task {
    for await message in signals {
        if let id = message.body.first?.stringValue { arrivals.withLock { $0[id] = clock.now } }
    }
}
defer { listener.cancel() }
func arrived(_ id: String, timeout: Duration) async throws -> ContinuousClock.Instant {
    let deadline = clock.now + timeout
    while clock.now < deadline {
        if let at = arrivals.withLock({ $0[id] }) { return at }
        try await Task.sleep(for: .microseconds(200))
    }
    throw TestSupportError("\(id) did not arrive on B within \(timeout)")
}

// 1. Latency, one at a time.
say("1/4 latency A → B …")
for index in 0..<20 { _ = try await arrived(try await advertise(a, "warm \(index)"), timeout: .seconds(10)) }
var latencies: [Double] = []
for index in 0..<300 {
    let start = clock.now
    let id = try await advertise(a, "latency \(index)")
    latencies.append(milliseconds(try await arrived(id, timeout: .seconds(10)) - start))
}

// 2. Advertise on A (sync on) against a daemon with sync off, interleaved.
say("2/4 Advertise with sync on and off …")
// A control for 2.: `off` timed while B and the server do for records of another device what
// they do for A's, with nothing of A's sync work: what their share costs on these shared cores.
// That device is a ghost: an engine in this process writes 1 500 real records (sealed with
// ana's key) while B is cut off; they are moved aside on the server, and put back by one
// `psql` session as the timed calls go, in batches of the size A's engine sent in the same
// round (measured on the server after A's batch); B applies them as it would A's.
let ghost = try await Ghost.made(user: "ana", words: words, type: type, setup: setup, hiding: proxy, count: 1500)
defer { ghost.close() }
let aDevice = try await a.syncProperty("DeviceId")?.stringValue ?? ""
/// The last seq of `device`'s log on the server.
func logHead(of device: String) async throws -> Int {
    Int(try await server.psql("SELECT coalesce(max(seq), 0) FROM baton.record WHERE device_id = '\(device)'",
                              database: setup.database).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
}
/// Records `device` appended after seq `after`, and in how many statements (each its own
/// transaction, so its own `committed_at`).
func appended(by device: String, after: Int) async throws -> (records: Int, batches: Int) {
    let counts = try await server.psql("""
        SELECT count(*) || ' ' || count(DISTINCT committed_at) FROM baton.record WHERE device_id = '\(device)' AND seq > \(after)
        """, database: setup.database).split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    guard counts.count == 2 else { throw TestSupportError("counting A's batches printed \(counts)") }
    return (counts[0], counts[1])
}
var aBatch = 10, aBatches: [Int] = []
// Also B with its server out of reach (the proxy refuses it): the outbox row alone, no sending.
var withSync: [Double] = [], withoutSync: [Double] = [], outboxOnly: [Double] = [], offUnderLoad: [Double] = []
// CPU spent during each kind of batch (µs): the daemon called, B (applying A's or the ghost's
// records) and the server; where Advertise's time goes when it is not the daemon's own.
var cpuCalled = [0.0, 0.0, 0.0, 0.0], cpuB = [0.0, 0.0, 0.0, 0.0], cpuServer = [0.0, 0.0, 0.0, 0.0]
for round in 0..<5 {
    for (world, into) in [(a, 0), (off, 1), (off, 3), (b, 2)] {
        if into != 2 {
            // B online (after its batch cut off, or the ghost's making) before records come to it.
            while try await b.syncProperty("State")?.stringValue != "online" { try await Task.sleep(for: .milliseconds(20)) }
        }
        if into == 2 {
            proxy.send("refuse")
            proxy.send("cut")
        }
        let calledBefore = processCPU(world.daemon?.process.pid), bBefore = processCPU(b.daemon?.process.pid), serverBefore = serverCPU(server)
        defer {
            cpuCalled[into] += processCPU(world.daemon?.process.pid) - calledBefore
            cpuB[into] += processCPU(b.daemon?.process.pid) - bBefore
            cpuServer[into] += (serverCPU(server) - serverBefore) * 1000
        }
        let aHead = into == 0 ? try await logHead(of: aDevice) : 0
        var last = "", putBack = 0
        for index in 0..<300 {
            let start = clock.now
            last = try await advertise(world, "local \(round) \(index)")
            let elapsed = milliseconds(clock.now - start) * 1000
            if into == 3, index + 1 - putBack >= aBatch {
                try ghost.putBack((round * 300 + putBack)..<(round * 300 + index + 1))
                putBack = index + 1
            }
            switch into {
            case 0: withSync.append(elapsed)
            case 1: withoutSync.append(elapsed)
            case 2: outboxOnly.append(elapsed)
            default: offUnderLoad.append(elapsed)
            }
        }
        // B's CPU counts until it has applied the batch's last record: all of the batch's work.
        if into == 0 {
            _ = try await arrived(last, timeout: .seconds(10))
            let (records, batches) = try await appended(by: aDevice, after: aHead)
            aBatch = max(1, Int((Double(records) / Double(max(1, batches))).rounded()))
            aBatches.append(aBatch)
        }
        if into == 3 {
            try ghost.putBack((round * 300 + putBack)..<(round * 300 + 300))
            for id in ghost.ids[(round * 300)..<(round * 300 + 300)] { _ = try await arrived(id, timeout: .seconds(10)) }
        }
        if into == 2 { proxy.send("accept") }
    }
}

// 3. Catch-up after a partition.
say("3/4 catch-up of 10 000 after a partition …")
proxy.send("refuse")
proxy.send("cut")
let partitioned = clock.now
while try await b.syncProperty("State")?.stringValue == "online", clock.now - partitioned < .seconds(30) {
    try await Task.sleep(for: .milliseconds(20))
}
let before = arrivals.withLock { $0.count }
try await withThrowingTaskGroup(of: Void.self) { group in
    for lane in 0..<32 {
        group.addTask { for index in stride(from: lane, to: 10_000, by: 32) { _ = try await advertise(a, "partition \(index)") } }
    }
    try await group.waitForAll()
}
while try await a.syncProperty("Outbox")?.uint32Value != 0 { try await Task.sleep(for: .milliseconds(50)) }
let online = Mutex<ContinuousClock.Instant?>(nil)
let stateChanges = try await b.client.signals(matching: MatchRule(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged"))
let stateListener = Task {
    for await message in stateChanges where message.body.count > 1 {
        if message.body[1].stringKeyedValue?["State"]?.unwrapped.stringValue == "online" { online.withLock { $0 = $0 ?? clock.now } }
    }
}
let reopened = clock.now
proxy.send("accept")
while arrivals.withLock({ $0.count }) < before + 10_000 {
    guard clock.now - reopened < .seconds(120) else { throw TestSupportError("B did not catch up within 2 minutes") }
    try await Task.sleep(for: .milliseconds(5))
}
let caughtUp = clock.now
stateListener.cancel()
let catchUpFromOnline = milliseconds(caughtUp - (online.withLock { $0 } ?? reopened))
let catchUpFromReopen = milliseconds(caughtUp - reopened)

// 4. The fleet.
say("4/4 fleet: \(fleetUsers) users × 2 devices, \(fleetSeconds) s …")
struct Device: Sendable {
    let store: Store
    let engine: SyncEngine
    let loop: Task<Void, Never>
}
let sent = Mutex<[String: ContinuousClock.Instant]>([:])
let fleetLatencies = Mutex<[Double]>([])
var log = Logger(label: "bench.fleet")
log.logLevel = .error
var fleet: [(Device, Device)] = []
for user in 0..<fleetUsers {
    var pair: [Device] = []
    for side in 0..<2 {
        let directory = try TemporaryDirectory.make(prefix: "baton-fleet")
        let path = directory.appendingPathComponent("baton.sqlite").path
        let store = try Store(path: path)
        let engine = try SyncEngine(store: store, configPath: SyncConfig.path(besideDatabase: path), log: log, onApplied: { applied in
            let now = clock.now
            for id in applied.advertised {
                if let start = sent.withLock({ $0[id] }) { fleetLatencies.withLock { $0.append(milliseconds(now - start)) } }
            }
        }, onChange: {})
        pair.append(Device(store: store, engine: engine, loop: Task { await engine.run() }))
        _ = side
    }
    let url0 = try await setup.addDevice(user: "user\(user)").url, url1 = try await setup.addDevice(user: "user\(user)").url
    let userWords = try await pair[0].engine.initialize(url: url0, deviceName: "u\(user)a")
    try await pair[1].engine.join(url: url1, recoveryWords: userWords, deviceName: "u\(user)b")
    for device in pair { try device.store.write { try $0.register(ActivityType(type: type, appID: "com.raywenderlich.hawknotes", title: "Character")) } }
    fleet.append((pair[0], pair[1]))
}
try await Task.sleep(for: .seconds(3))
fleetLatencies.withLock { $0.removeAll() }
// The server with every device connected and nothing written: what it spends doing nothing.
let idleBefore = serverCPU(server)
try await Task.sleep(for: .seconds(5))
let idleCPU = (serverCPU(server) - idleBefore) / 5
let cpuBefore = serverCPU(server)
let fleetStart = clock.now
var fleetAdvertised = 0
for second in 0..<fleetSeconds {
    let tick = fleetStart + .seconds(second)
    try await Task.sleep(until: tick, clock: clock)
    // Each device once a second, spread over the second.
    let devices = fleet.flatMap { [$0.0, $0.1] }
    for (index, device) in devices.enumerated() {
        try await Task.sleep(until: tick + .microseconds(index * 1_000_000 / devices.count), clock: clock)
        let now = WallClock.nowMicroseconds()
        let activity = Activity(id: Identifier.make(), type: type, appID: "com.raywenderlich.hawknotes", title: "fleet \(second)",
                                payload: #"{"id":"x"}"#, createdAt: now, updatedAt: now)
        sent.withLock { $0[activity.id] = clock.now }
        _ = try await device.store.writing { try $0.insert(activity) }
        fleetAdvertised += 1
    }
}
try await Task.sleep(for: .seconds(2))
let cpuAfter = serverCPU(server)
let fleetElapsed = milliseconds(clock.now - fleetStart) / 1000
for (first, second) in fleet { first.loop.cancel(); second.loop.cancel() }
let received = fleetLatencies.withLock { $0 }

// Report.
let p50 = percentile(latencies, 0.5), p99 = percentile(latencies, 0.99)
let onP50 = percentile(withSync, 0.5), offP50 = percentile(withoutSync, 0.5), outboxP50 = percentile(outboxOnly, 0.5)
let loadedP50 = percentile(offUnderLoad, 0.5)
let storeOnP50 = percentile(storeOn, 0.5), storeOffP50 = percentile(storeOff, 0.5)
let fleetP50 = percentile(received, 0.5), fleetP99 = percentile(received, 0.99)
let cpuPerAdvertise = (cpuAfter - cpuBefore) / Double(max(1, fleetAdvertised))
func mark(_ met: Bool) -> String { met ? "met" : "MISSED" }
print("""
    sync benchmark (loopback, 2 cores; one run)
    advertise on A → Advertised on B (300, one at a time): p50 \(String(format: "%.1f", p50)) ms, p99 \(String(format: "%.1f", p99)) ms \
    — target p50 ≤ 20, p99 ≤ 100: \(mark(p50 <= 20 && p99 <= 100))
    Advertise on A, sync on / sync off (5 × 300 each, interleaved): p50 \(String(format: "%.0f", onP50)) µs / \(String(format: "%.0f", offP50)) µs \
    = \(String(format: "%.2f", onP50 / offP50))× — target ≤ 1.1×: \(mark(onP50 / offP50 <= 1.1)); \
    with the server out of reach (the outbox row alone): \(String(format: "%.0f", outboxP50)) µs = \(String(format: "%.2f", outboxP50 / offP50))×; \
    the store alone (5 × 300 inserts each, interleaved): \(String(format: "%.0f", storeOnP50)) µs / \(String(format: "%.0f", storeOffP50)) µs \
    = \(String(format: "%.2f", storeOnP50 / storeOffP50))× — its \(String(format: "%.0f", storeOnP50 - storeOffP50)) µs more \
    would make Advertise \(String(format: "%.2f", (offP50 + storeOnP50 - storeOffP50) / offP50))× alone
    control: sync off while B and the server take a ghost device's records at the same pace \
    (no sync work in the daemon called; batches of \(aBatches.map(String.init).joined(separator: ", ")), as A's): \
    \(String(format: "%.0f", loadedP50)) µs = \(String(format: "%.2f", loadedP50 / offP50))× sync off alone
    CPU per Advertise (µs): the daemon called, sync on \(String(format: "%.0f", cpuCalled[0] / 1500)), \
    sync off \(String(format: "%.0f", cpuCalled[1] / 1500)), outbox only \(String(format: "%.0f", cpuCalled[2] / 1500)); \
    sync off under the ghost's load \(String(format: "%.0f", cpuCalled[3] / 1500)); B applying the records \(String(format: "%.0f", cpuB[0] / 1500)) (A's) \
    and \(String(format: "%.0f", cpuB[3] / 1500)) (the ghost's); the server \(String(format: "%.0f", cpuServer[0] / 1500)) (A's) \
    and \(String(format: "%.0f", cpuServer[3] / 1500)) (the ghost's)
    catch-up of 10 000 after a partition: \(String(format: "%.0f", catchUpFromOnline)) ms from B online again \
    (\(String(format: "%.0f", catchUpFromReopen)) ms from the server reachable, with B's reconnect wait) — target ≤ 2 000 ms: \(mark(catchUpFromOnline <= 2000))
    fleet, \(fleetUsers * 2) devices × 1 advertise/s, \(fleetSeconds) rounds in \(String(format: "%.0f", fleetElapsed)) s: \(fleetAdvertised) advertised, \(received.count) seen by the partner; \
    p50 \(String(format: "%.1f", fleetP50)) ms, p99 \(String(format: "%.1f", fleetP99)) ms — target p99 ≤ 100: \(mark(fleetP99 <= 100)); \
    server CPU \(String(format: "%.2f", cpuPerAdvertise)) ms per advertise (idle, all connected: \(String(format: "%.0f", idleCPU)) ms per second)
    """)
let json = """
    {"latency_p50_ms":\(p50),"latency_p99_ms":\(p99),"advertise_sync_on_p50_us":\(onP50),"advertise_sync_off_p50_us":\(offP50),"advertise_outbox_only_p50_us":\(outboxP50),\
    "advertise_sync_off_under_ghost_load_p50_us":\(loadedP50),"cpu_per_advertise_sync_off_under_ghost_load_us":\(cpuCalled[3] / 1500),\
    "cpu_b_while_ghost_us":\(cpuB[3] / 1500),"cpu_server_while_ghost_us":\(cpuServer[3] / 1500),\
    "store_insert_sync_on_p50_us":\(storeOnP50),"store_insert_sync_off_p50_us":\(storeOffP50),\
    "cpu_per_advertise_sync_on_us":\(cpuCalled[0] / 1500),"cpu_per_advertise_sync_off_us":\(cpuCalled[1] / 1500),\
    "cpu_per_advertise_outbox_only_us":\(cpuCalled[2] / 1500),"cpu_b_while_a_us":\(cpuB[0] / 1500),"cpu_server_while_a_us":\(cpuServer[0] / 1500),\
    "catch_up_10000_ms":\(catchUpFromOnline),"catch_up_10000_from_reachable_ms":\(catchUpFromReopen),"fleet_devices":\(fleetUsers * 2),\
    "fleet_seconds":\(fleetElapsed),"fleet_advertised":\(fleetAdvertised),"fleet_seen":\(received.count),"fleet_p50_ms":\(fleetP50),\
    "fleet_p99_ms":\(fleetP99),"server_cpu_ms_per_advertise":\(cpuPerAdvertise),"server_idle_cpu_ms_per_s":\(idleCPU)}
    """
try? FileManager.default.createDirectory(atPath: "Benchmarks/results", withIntermediateDirectories: true)
try json.write(toFile: "Benchmarks/results/sync.json", atomically: true, encoding: .utf8)
