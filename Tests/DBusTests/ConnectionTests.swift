import DBus
import Glibc
import Synchronization
import Testing
import TestSupport

/// The client side of the layer and the behaviour of the bus thread.
@Suite(.serialized)
struct ConnectionTests {
    @Test func callsTimeOutWithNoReply() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let clock = ContinuousClock()
        let started = clock.now
        do {
            _ = try await world.client.fixture("Hold", timeout: .milliseconds(200))
            Issue.record("Hold returned before Release")
        } catch let error as DBusError {
            #expect(error.name == DBusError.Name.noReply, "\(error)")
        }
        #expect(clock.now - started >= .milliseconds(200))
        #expect(try await world.client.fixture("Release") == [.uint32(1)])
    }

    /// Each waiting call ends at its own deadline, whichever calls were answered or sent since:
    /// the loop wakes for the earliest deadline it knows, which may belong to an answered call.
    @Test func eachCallTimesOutAtItsOwnDeadline() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let clock = ContinuousClock()
        let started = clock.now
        func hold(_ timeout: Duration) -> Task<Duration, any Error> {
            Task {
                do {
                    _ = try await world.client.fixture("Hold", timeout: timeout)
                } catch let error as DBusError where error.name == DBusError.Name.noReply {
                    return clock.now - started
                }
                throw TestSupportError("Hold returned before Release")
            }
        }
        let late = hold(.milliseconds(900))
        // Answered before its deadline, which was the earliest.
        #expect(try await world.client.fixture("EchoString", [.string("x")], timeout: .milliseconds(300)) == [.string("x")])
        // Sent after, due before the first (unless a loaded machine took 500 ms to get here).
        let earlySent = clock.now - started
        let early = hold(.milliseconds(400))
        let (earlyEnded, lateEnded) = try await within(.seconds(10), "both calls' timeouts") {
            (try await early.value, try await late.value)
        }
        #expect(earlyEnded >= earlySent + .milliseconds(400) && lateEnded >= .milliseconds(900), "\(earlySent) \(earlyEnded) \(lateEnded)")
        if earlySent + .milliseconds(400) < .milliseconds(700) {
            #expect(earlyEnded < lateEnded, "the earlier deadline ended later: sent at \(earlySent), \(earlyEnded) \(lateEnded)")
        }
        #expect(try await world.client.fixture("Release") == [.uint32(2)])
    }

    @Test func cancellingTheCallerEndsTheCall() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let held = Task { try await world.client.fixture("Hold") }
        try await eventually("Hold is waiting") { try await world.client.fixture("HeldCount") == [.uint32(1)] }
        held.cancel()
        await #expect(throws: CancellationError.self) { try await held.value }
        // A task cancelled before it calls never sends.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await world.client.fixture("Hold")
        }
        await #expect(throws: CancellationError.self) { try await early.value }
        #expect(try await world.client.fixture("Release") == [.uint32(1)])
    }

    @Test func aHandlerAwaitingAnotherServiceDoesNotBlockOthers() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        // Relay calls Hold through the bus and waits; the server must keep answering. It waits
        // until Release, however long the steps before take under load: not a 10 s deadline.
        let relayed = Task { try await world.client.fixture("Relay", timeout: .seconds(60)) }
        try await eventually("Relay's call to Hold arrived") { try await world.client.fixture("HeldCount") == [.uint32(1)] }
        for index in 0..<20 {
            #expect(try await world.client.fixture("EchoString", [.string("\(index)")]) == [.string("\(index)")])
        }
        #expect(try await world.client.fixture("Release") == [.uint32(1)])
        #expect(try await relayed.value == [.boolean(true)])
    }

    @Test func inOrderCallsAreAnsweredInArrivalOrder() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        // Fire many no-reply calls, then one with a reply: in-order dispatch means
        // every note is recorded, in sending order, by the time the reply comes.
        for index in 0..<200 {
            try world.client.send(.methodCall(
                destination: Fixture.busName, path: Fixture.path, interface: Fixture.interface, member: "Notify",
                body: [.string("\(index)")]
            ).noReply())
        }
        _ = try await world.client.fixture("EchoString", [.string("sync")])
        #expect(world.state.notified.withLock { $0 } == (0..<200).map { "\($0)" })
    }

    @Test func workAfterDispatchWaitsForTheCallsAlreadyRead() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let gathered = try await world.client.signals(matching: MatchRule(interface: Fixture.interface, member: "Gathered"))
        var batches = gathered.makeAsyncIterator()
        func call(_ member: String, _ body: [DBusValue] = []) -> Message {
            .methodCall(destination: Fixture.busName, path: Fixture.path, interface: Fixture.interface, member: member, body: body)
        }

        // Ten calls wait in the socket while the server's thread is held, then are read together.
        try world.client.send(call("Block").noReply())
        try await eventually("Block holds the server's thread") { world.state.blocked.load(ordering: .acquiring) }
        for index in 0..<10 { try world.client.send(call("Gather", [.string("\(index)")]).noReply()) }
        // The bus answers in order: once it has replied to this, it has passed the ten on.
        _ = try await world.client.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId")
        var one: UInt8 = 1
        #expect(write(world.state.gate.write, &one, 1) == 1)

        // libdbus may take the ten from the socket in more than one read, so they may be
        // split once; flushed one by one (work run as soon as it is scheduled), they would
        // come in ten batches.
        var notes: [String] = []
        var batchSizes: [Int] = []
        while notes.count < 10, let batch = await batches.next()?.body.first?.arrayValue {
            notes += batch.compactMap(\.stringValue)
            batchSizes.append(batch.count)
        }
        #expect(notes == (0..<10).map { "\($0)" })
        #expect(batchSizes.count <= 2 && batchSizes.first ?? 0 > 1, "batches of \(batchSizes)")

        // A lone call is flushed on its own.
        let replied = try await world.client.call(call("Gather", [.string("alone")]))
        #expect(replied.body.isEmpty)
        #expect(await batches.next()?.body == [.strings(["alone"])])
    }

    @Test func signalsFollowTheirMatchRules() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let all = try await world.client.signals(matching: MatchRule(interface: Fixture.interface, member: "Pinged"))
        let onlyB = try await world.client.signals(matching: MatchRule(interface: Fixture.interface, member: "Pinged", arg0: "b"))
        // arg0namespace: a name and those below it, not a name that merely begins the same.
        let underB = try await world.client.signals(matching: MatchRule(interface: Fixture.interface, member: "Pinged", arg0Namespace: "b.c"))
        // A quote inside a value is written '\'' (the bus's escaping), and still matches.
        let quotedRule = MatchRule(interface: Fixture.interface, member: "Pinged", arg0: "it's 'b'")
        #expect(quotedRule.text == #"type='signal',interface='\#(Fixture.interface)',member='Pinged',arg0='it'\''s '\''b'\'''"#)
        let quoted = try await world.client.signals(matching: quotedRule)
        _ = try await world.client.fixture("Ping", [.string("it's 'b'")])
        _ = try await world.client.fixture("Ping", [.string("a")])
        _ = try await world.client.fixture("Ping", [.string("b")])
        _ = try await world.client.fixture("Ping", [.string("b.cd")])
        _ = try await world.client.fixture("Ping", [.string("b.c.d")])
        #expect(try await first(of: quoted).body == [.string("it's 'b'")])
        var allIterator = all.makeAsyncIterator()
        #expect(await allIterator.next()?.body == [.string("it's 'b'")])
        #expect(await allIterator.next()?.body == [.string("a")])
        #expect(await allIterator.next()?.body == [.string("b")])
        let fromB = try await first(of: onlyB)
        #expect(fromB.body == [.string("b")])
        #expect(fromB.sender == world.server.uniqueName)
        #expect(fromB.path == Fixture.path)
        #expect(try await first(of: underB).body == [.string("b.c.d")])
    }

    @Test func droppingASubscriptionRemovesItsMatchRule() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let rule = MatchRule(interface: Fixture.interface, member: "Pinged", arg0: "unique-\(getpid())")
        @Sendable func ruleCount() async throws -> Int {
            // GetConnectionMatchRules is in the Monitoring-era Debug.Stats interface of dbus-daemon.
            let stats = try await world.client.call(
                "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.Debug.Stats", "GetAllMatchRules")
            let rules = stats.first?.dictionaryEntries?.first { $0.key.stringValue == world.client.uniqueName }
            return rules?.value.arrayValue?.filter { $0.stringValue?.contains("unique-\(getpid())") == true }.count ?? 0
        }
        var stream: AsyncStream<Message>? = try await world.client.signals(matching: rule)
        #expect(try await ruleCount() == 1)
        _ = stream
        stream = nil
        try await eventually("the match rule is removed") { try await ruleCount() == 0 }
    }

    @Test func namesCanBeWaitedForAndAreNotStolen() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let waiter = Task { try await world.client.waitForName("org.baton.Later", timeout: .seconds(5)) }
        let other = try world.bus.connect()
        defer { other.close() }
        try await other.requestName("org.baton.Later")
        try await waiter.value
        #expect(try await world.client.nameOwner("org.baton.Later") == other.uniqueName)

        do {
            try await world.client.requestName(Fixture.busName)
            Issue.record("a taken name was granted")
        } catch let error as DBusError {
            #expect(error.name == DBusError.Name.nameTaken)
            #expect(error.message.contains(world.server.uniqueName), "\(error.message)")
        }
        await #expect(throws: DBusError.self) { try await world.client.waitForName("org.baton.Never", timeout: .milliseconds(100)) }
        try await other.releaseName("org.baton.Later")
        #expect(try await world.client.nameOwner("org.baton.Later") == nil)
    }

    @Test func handlersSeeTheCallersUnixUser() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        #expect(try await world.client.fixture("CallerUser") == [.uint32(getuid())])
    }

    @Test func objectsComeAndGoUnderAnObjectManager() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let manager: ObjectPath = "/org/baton/Test/items"
        try await world.server.export(manager, [], objectManager: true)
        let changes = try await world.client.signals(matching: MatchRule(interface: "org.freedesktop.DBus.ObjectManager"))
        var iterator = changes.makeAsyncIterator()

        let item = try manager.appending(ObjectPath.escapeElement("3f2a-9c/ü"))
        #expect(item.text == "/org/baton/Test/items/3f2a_2d9c_2f_c3_bc")
        try await world.server.export(item, [Fixture.interface(world.state)])
        let added = await iterator.next()
        #expect(added?.member == "InterfacesAdded")
        #expect(added?.body.first == .objectPath(item))
        let interfaces = added?.body.last?.dictionaryEntries?.compactMap(\.key.stringValue) ?? []
        #expect(interfaces.contains(Fixture.interface))

        let managed = try await world.client.call(
            Fixture.busName, manager, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects")
        #expect(managed.first?.dictionaryEntries?.map(\.key) == [.objectPath(item)])
        #expect(try await world.client.call(Fixture.busName, item, Fixture.interface, "EchoString", [.string("x")]) == [.string("x")])

        let xml = try await world.client.call(Fixture.busName, "/org", "org.freedesktop.DBus.Introspectable", "Introspect")
        #expect(xml.first?.stringValue?.contains("<node name=\"baton\"/>") == true)

        world.server.unexport(item)
        let removed = await iterator.next()
        #expect(removed?.member == "InterfacesRemoved")
        #expect(removed?.body.first == .objectPath(item))
        // The same interfaces go as came, standard ones included.
        #expect(removed.flatMap { [String](dbusValue: $0.body[1]) } == interfaces)
        do {
            _ = try await world.client.call(Fixture.busName, item, Fixture.interface, "EchoString", [.string("x")])
            Issue.record("a removed object answered")
        } catch let error as DBusError {
            #expect(error.name == DBusError.Name.unknownObject)
        }
    }

    @Test func losingTheBusClosesCleanly() async throws {
        let world = try await Fixture.start()
        // Held until the bus goes, which ends it: a deadline of its own would only race that.
        let held = Task { try await world.client.fixture("Hold", timeout: .seconds(60)) }
        try await eventually("Hold is waiting") { try await world.client.fixture("HeldCount") == [.uint32(1)] }
        world.bus.stop()
        // The process is still here: libdbus's exit-on-disconnect is off.
        await world.client.waitUntilClosed()
        await world.server.waitUntilClosed()
        do {
            _ = try await held.value
            Issue.record("a call survived the bus")
        } catch let error as DBusError {
            #expect(error.name == DBusError.Name.disconnected)
        }
        await #expect(throws: DBusError.self) { try await world.client.fixture("EchoString", [.string("late")]) }
        #expect(throws: Never.self) { try world.client.send(.signal(path: "/", interface: "a.b", member: "C")) }
    }

    @Test func closingFailsPendingCallsAndEndsStreams() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let stream = try await world.client.signals(matching: MatchRule(interface: Fixture.interface))
        let held = Task { try await world.client.fixture("Hold") }
        try await eventually("Hold is waiting") { try await world.server.call(Fixture.busName, Fixture.path, Fixture.interface, "HeldCount") == [.uint32(1)] }
        world.client.close()
        await world.client.waitUntilClosed()
        await #expect(throws: DBusError.self) { try await held.value }
        for await _ in stream { Issue.record("a signal arrived after close") }
    }

    @Test func propertiesAndPeerThroughOurClient() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let properties = "org.freedesktop.DBus.Properties"
        let changes = try await world.client.signals(matching: MatchRule(interface: properties, member: "PropertiesChanged", path: Fixture.path))
        #expect(try await world.client.call(Fixture.busName, Fixture.path, properties, "Get", [.string(Fixture.interface), .string("Count")])
            == [.variant(.uint32(7))])
        _ = try await world.client.call(Fixture.busName, Fixture.path, properties, "Set", [
            .string(Fixture.interface), .string("Count"), .variant(.uint32(9)),
        ])
        let changed = try await first(of: changes)
        #expect(changed.body == [.string(Fixture.interface), .record(["Count": .uint32(9)]), .strings([])])
        #expect(try await world.client.call(Fixture.busName, Fixture.path, properties, "GetAll", [.string(Fixture.interface)])
            == [.record(["Count": .uint32(9), "Name": .string("fixture")])])

        // libdbus answers Peer itself, on every path.
        #expect(try await world.client.call(Fixture.busName, Fixture.path, "org.freedesktop.DBus.Peer", "Ping").isEmpty)
        let machine = try await world.client.call(Fixture.busName, "/", "org.freedesktop.DBus.Peer", "GetMachineId")
        #expect(machine.first?.stringValue?.count == 32)
    }

    /// `PropertiesChanged` by name: the value read through the getter for a property that
    /// emits it, the name alone for one that invalidates; a constant or undeclared one refused.
    @Test func propertiesChangedByNameReadTheGetters() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let level = Mutex<UInt32>(1)
        let interface = Interface("org.baton.Named1", properties: [
            Property("Level", "u", get: { _ in .uint32(level.withLock { $0 }) }),
            Property("Cache", "s", changeSignal: .invalidates, get: { _ in .string("big") }),
            Property("Kind", "s", changeSignal: .const, get: { _ in .string("fixed") }),
            Property("Wrong", "s", get: { _ in .uint32(0) }),
        ])
        let path: ObjectPath = "/org/baton/Test/named"
        try await world.server.export(path, [interface])
        let changes = try await world.client.signals(matching: MatchRule(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", path: path))
        level.withLock { $0 = 5 }
        try await world.server.emitPropertiesChanged(path: path, of: interface, ["Level", "Cache"])
        let changed = try await first(of: changes)
        #expect(changed.body == [.string("org.baton.Named1"), .record(["Level": .uint32(5)]), .strings(["Cache"])])
        for refused in ["Kind", "Missing", "Wrong"] {
            await #expect(throws: (any Error).self, "\(refused)") { try await world.server.emitPropertiesChanged(path: path, of: interface, [refused]) }
        }
    }

    @Test func readAllAnswersGetAllAndAnnouncementsInOneRead() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let reads = Mutex(0)
        let perProperty = Mutex(0)
        func getter(_ value: DBusValue) -> Property.Getter {
            { _ in perProperty.withLock { $0 += 1 }; return value }
        }
        let good = Interface("org.baton.Snapshot1", properties: [
            Property("A", "s", get: getter(.string("a"))), Property("B", "u", get: getter(.uint32(2))),
        ], readAll: { _ in
            reads.withLock { $0 += 1 }
            return ["A": .string("a"), "B": .uint32(2)]
        })
        let broken = Interface("org.baton.Broken1", properties: [Property("C", "s", get: getter(.string("c")))],
                               readAll: { _ in ["C": .uint32(3)] })
        let manager: ObjectPath = "/org/baton/Test/snapshots"
        try await world.server.export(manager, [], objectManager: true)
        let added = try await world.client.signals(matching: MatchRule(interface: "org.freedesktop.DBus.ObjectManager"))
        let item: ObjectPath = "/org/baton/Test/snapshots/one"
        try await world.server.export(item, [good])
        try await world.server.export("/org/baton/Test/broken", [broken])
        let announced = try await first(of: added)
        #expect(announced.body.last?.dictionaryEntries?.first { $0.key == .string("org.baton.Snapshot1") }?.value
            == .record(["A": .string("a"), "B": .uint32(2)]))

        let properties = "org.freedesktop.DBus.Properties"
        #expect(try await world.client.call(Fixture.busName, item, properties, "GetAll", [.string("org.baton.Snapshot1")])
            == [.record(["A": .string("a"), "B": .uint32(2)])])
        #expect(try await world.client.call(Fixture.busName, item, properties, "Get", [.string("org.baton.Snapshot1"), .string("B")])
            == [.variant(.uint32(2))])
        #expect(reads.withLock { $0 } == 1 + 1, "one read for the announcement, one for GetAll")
        #expect(perProperty.withLock { $0 } == 1, "only Get used a getter")
        // A readAll that breaks its promise is our bug: Failed, without the detail.
        await #expect(throws: DBusError.self) {
            _ = try await world.client.call(Fixture.busName, "/org/baton/Test/broken", properties, "GetAll", [.string("org.baton.Broken1")])
        }
    }
}

