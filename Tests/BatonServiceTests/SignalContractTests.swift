import DBus
import Foundation
import Testing
import TestSupport

/// Every signal of `dbus/org.baton.Handoff1.xml`, raised by the real batond through its
/// contract, arrives with the body its declaration gives; so do the standard ones it sends
/// (PropertiesChanged, InterfacesAdded, InterfacesRemoved), as the D-Bus specification gives them.
@Suite(.serialized)
struct SignalContractTests {
    /// `interface.Signal` → the signature of its arguments, from the contract's XML.
    static func declaredSignals() throws -> [String: String] {
        var declared: [String: String] = [:]
        let xml = try String(contentsOf: ContractTests.contract, encoding: .utf8)
        for (interface, block) in ContractTests.interfaces(in: xml) {
            var rest = Substring(block)
            while let start = rest.range(of: "<signal name=\""), let end = rest.range(of: "</signal>", range: start.upperBound..<rest.endIndex) {
                let signal = rest[start.upperBound..<end.lowerBound]
                let name = String(signal.prefix { $0 != "\"" })
                var types = ""
                var arguments = signal
                while let type = arguments.range(of: "type=\"") {
                    let value = arguments[type.upperBound...].prefix { $0 != "\"" }
                    types += value
                    arguments = arguments[type.upperBound...].dropFirst(value.count)
                }
                declared["\(interface).\(name)"] = types
                rest = rest[end.upperBound...]
            }
        }
        return declared
    }

    static let standard = [
        "org.freedesktop.DBus.Properties.PropertiesChanged": "sa{sv}as",
        "org.freedesktop.DBus.ObjectManager.InterfacesAdded": "oa{sa{sv}}",
        "org.freedesktop.DBus.ObjectManager.InterfacesRemoved": "oas",
    ]

    @Test func everySignalOfTheContractArrivesAsDeclared() async throws {
        // The clipboard's are raised only by a copy from another machine:
        // ClipboardAcrossMachinesTests checks their bodies against these declarations.
        let declared = try Self.declaredSignals().filter { !$0.key.hasPrefix("org.baton.Handoff1.Clipboard.") }
        #expect(try Self.declaredSignals()["org.baton.Handoff1.Clipboard.Offered"] == "sstts")
        #expect(try Self.declaredSignals()["org.baton.Handoff1.Clipboard.Withdrawn"] == "s")
        #expect(declared.keys.sorted() == [
            "org.baton.Handoff1.Activities.Advertised", "org.baton.Handoff1.Activities.Continued",
            "org.baton.Handoff1.Activities.Invalidated", "org.baton.Handoff1.Activities.Updated",
            "org.baton.Handoff1.Scene.StorageChanged", "org.baton.Handoff1.Status.SourceSettingChanged",
        ], "a signal added to the XML is raised below too")
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        let heard = try await SignalLog(world.client, MatchRule(pathNamespace: "/org/baton/Handoff1"))

        // Advertised, Updated; Continued (into a new scene: InterfacesAdded, PropertiesChanged);
        // StorageChanged; Invalidated; the scene closed (InterfacesRemoved); a source's setting changed.
        try await world.register()
        let id = try await world.advertise("Agatha")
        _ = try await world.call("org.baton.Handoff1.Activities", "Update", [.string(id), .string(#"{"page":2}"#), .stringMap(["title": "Agatha, page 2"])])
        let scene = try #require(try await world.call("org.baton.Handoff1.Activities", "Continue", [.string(id), .stringMap([:])]).first?.objectPathValue)
        _ = try await world.call("org.baton.Handoff1.Scene", "Set", [.string("BookView.newNote"), .variant(.string("a draft"))], path: scene)
        _ = try await world.call("org.baton.Handoff1.Activities", "Invalidate", [.string(id)])
        _ = try await world.call("org.baton.Handoff1.Scene", "Close", path: scene)
        // SourceSettingChanged.
        _ = try await world.call("org.baton.Handoff1.Status", "SetSourceSetting", [.string("clipboard"), .string("lifetime"), .string("60")])

        let expected = declared.merging(Self.standard) { first, _ in first }
        @Sendable func missing() -> Set<String> {
            Set(expected.keys).subtracting(heard.all.compactMap { message in message.interface.flatMap { i in message.member.map { "\(i).\($0)" } } })
        }
        // batond refuses to send a body that is not its declaration's: such a signal never comes.
        try? await eventually("every declared and standard signal heard") { missing().isEmpty }
        #expect(missing().isEmpty, "never heard: \(missing().sorted())")
        for message in heard.all {
            let name = "\(message.interface ?? "?").\(message.member ?? "?")"
            #expect(expected[name] == message.signature.text, "\(name) arrived as '\(message.signature)'")
        }
    }
}
