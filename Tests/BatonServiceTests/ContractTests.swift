import DBus
import Foundation
import Testing
import TestSupport

/// `dbus/org.baton.Handoff1.xml` is the contract: the running daemon must introspect
/// exactly its interfaces.
@Suite(.serialized)
struct ContractTests {
    static let contract = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("dbus/org.baton.Handoff1.xml")

    /// The `<interface name="…">…</interface>` blocks of an XML text, comments removed and
    /// whitespace between tags dropped, by interface name.
    static func interfaces(in xml: String) -> [String: String] {
        var text = xml
        while let start = text.range(of: "<!--"), let end = text.range(of: "-->", range: start.upperBound..<text.endIndex) {
            text.removeSubrange(start.lowerBound..<end.upperBound)
        }
        let compact = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined()
        var result: [String: String] = [:]
        var rest = Substring(compact)
        while let start = rest.range(of: "<interface name=\""), let end = rest.range(of: "</interface>", range: start.upperBound..<rest.endIndex) {
            let block = rest[start.lowerBound..<end.upperBound]
            let name = block.dropFirst("<interface name=\"".count).prefix { $0 != "\"" }
            result[String(name)] = String(block)
            rest = rest[end.upperBound...]
        }
        return result
    }

    @Test func theDaemonIntrospectsTheCanonicalContract() async throws {
        let canonical = Self.interfaces(in: try String(contentsOf: Self.contract, encoding: .utf8))
        #expect(Set(canonical.keys) == [
            "org.baton.Handoff1.Registry", "org.baton.Handoff1.Activities", "org.baton.Handoff1.Scenes",
            "org.baton.Handoff1.Scene", "org.baton.Handoff1.Status", "org.baton.Handoff1.Handler", "org.baton.Handoff1.Sync",
            "org.baton.Handoff1.Archive", "org.baton.Handoff1.Privacy", "org.baton.Handoff1.Clipboard",
        ])
        let world = try BatonWorld()
        defer { world.close() }
        _ = try await InProcessBatond(on: world)
        let scene = try #require(try await world.call("org.baton.Handoff1.Scenes", "OpenScene", [.string("com.example.app"), .stringMap([:])]).first?.objectPathValue)
        var served: [String: String] = [:]
        for path in [BatonWorld.root, scene] {
            let xml = try #require(try await world.call("org.freedesktop.DBus.Introspectable", "Introspect", path: path).first?.stringValue)
            served.merge(Self.interfaces(in: xml)) { first, _ in first }
        }
        for (name, block) in canonical where name != "org.baton.Handoff1.Handler" {
            #expect(served[name] == block, "\(name) differs from dbus/org.baton.Handoff1.xml")
        }
        // Every member of the contract carries a doc comment.
        let text = try String(contentsOf: Self.contract, encoding: .utf8)
        let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        for (index, line) in lines.enumerated()
        where line.hasPrefix("<method") || line.hasPrefix("<signal") || line.hasPrefix("<interface") || line.hasPrefix("<property") {
            let before = lines[..<index].last { !$0.isEmpty } ?? ""
            let documented = before.hasSuffix("-->") || lines[..<index].reversed()
                .prefix { !$0.hasPrefix("<method") && !$0.hasPrefix("<interface") }
                .contains { $0.hasPrefix("<!--") }
            #expect(documented, "no doc comment before \(line)")
        }
    }
}
