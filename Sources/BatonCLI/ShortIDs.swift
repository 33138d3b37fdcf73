import BatonContract
import BatonCore
import DBus

/// Ids as people type them: whole, or as their unique beginning (`baton show 01a2f`), as git
/// takes a commit's. An activity's is looked up among the live ones (and, for `continue`, the
/// history) with the `id_prefix` filter; a scene's among the scenes batond has on the bus.
extension Daemon {
    /// The id of the one live activity (or, with `includingHistory`, past activity) whose id
    /// begins with `text`.
    func activityID(_ text: String, includingHistory: Bool = false) async throws -> String {
        if text.utf8.count == 36 { return text }
        let prefix = try Self.prefix(text, of: "an activity")
        let filter: [String: String] = ["id_prefix": prefix, "limit": "5"]
        var ids = try await call(Contract.Activities.list, [.stringMap(filter)]).first?.arrayValue ?? []
        if includingHistory { ids += try await call(Contract.Archive.history, [.stringMap(filter)]).first?.arrayValue ?? [] }
        let matches = Array(Set(ids.compactMap { $0.stringKeyedValue?[Key.id]?.unwrapped.stringValue })).sorted()
        return try Self.one(of: matches, beginning: text, what: "activity",
                            listedBy: includingHistory ? "baton list, baton history" : "baton list")
    }

    /// The object path of the one scene whose id begins with `text`, or that `text` names whole
    /// (an id or a path).
    func scenePath(_ text: String) async throws -> ObjectPath {
        if text.hasPrefix("/") || text.utf8.count == 36 { return try Self.scenePath(text) }
        let prefix = try Self.prefix(text, of: "a scene")
        let scenes = try await Scenes.managedObjects(self).keys.compactMap { try? SceneAddress.id(from: $0.text) }
        let id = try Self.one(of: scenes.filter { $0.hasPrefix(prefix) }.sorted(), beginning: text, what: "scene", listedBy: "baton scenes")
        return SceneAddress.objectPath(forID: id)
    }

    private static func prefix(_ text: String, of what: String) throws -> String {
        do {
            return try Identifier.normalizePrefix(text)
        } catch {
            throw CLIError(description: "'\(printable(text))' is not \(what) id nor the beginning of one (ids are like 3f2a9c1e-…)",
                           status: ExitStatus.invalidInput)
        }
    }

    private static func one(of matches: [String], beginning text: String, what: String, listedBy command: String) throws -> String {
        switch matches.count {
        case 1:
            return matches[0]
        case 0:
            throw CLIError(description: "no \(what) id begins with '\(printable(text))'. See them with: \(command)", status: ExitStatus.notFound)
        default:
            throw CLIError(description: """
                '\(printable(text))' begins more than one \(what) id (\(matches.prefix(3).joined(separator: ", "))\(matches.count > 3 ? ", …" : "")); \
                give more of it
                """, status: ExitStatus.invalidInput)
        }
    }
}
