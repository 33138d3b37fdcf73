import BatonContract
import BatonCore
import DBus

/// Completion of what lives in batond — activity ids, types, apps, scenes — asked of batond
/// when the shell completes a word (bash, zsh and fish run `baton` for it). Nothing is
/// printed on failure: with batond unreachable there is simply nothing to offer.
enum Completions {
    /// Live activities' ids (and past ones', for `continue`), newest first.
    @Sendable static func activityIDs(_ words: [String], _ index: Int, _ prefix: String) async -> [String] {
        await ids(words, prefix, history: false)
    }

    @Sendable static func continuableIDs(_ words: [String], _ index: Int, _ prefix: String) async -> [String] {
        await ids(words, prefix, history: true)
    }

    @Sendable static func types(_ words: [String], _ index: Int, _ prefix: String) async -> [String] {
        await ask(words) { daemon in
            try await daemon.call(Contract.Registry.listActivityTypes).first?.arrayValue?
                .compactMap { $0.stringKeyedValue?[Key.type]?.unwrapped.stringValue } ?? []
        }.filter { $0.hasPrefix(prefix) }.sorted()
    }

    /// The apps batond knows: those with a registered type.
    @Sendable static func apps(_ words: [String], _ index: Int, _ prefix: String) async -> [String] {
        let apps = await ask(words) { daemon in
            try await daemon.call(Contract.Registry.listActivityTypes).first?.arrayValue?
                .compactMap { $0.stringKeyedValue?[Key.appID]?.unwrapped.stringValue } ?? []
        }
        return Set(apps).filter { $0.hasPrefix(prefix) }.sorted()
    }

    /// Scene ids (a scene can be named by its id or its path; ids are shorter to type).
    @Sendable static func scenes(_ words: [String], _ index: Int, _ prefix: String) async -> [String] {
        await ask(words) { daemon in
            try await Scenes.managedObjects(daemon).keys.compactMap { try? SceneAddress.id(from: $0.text) }
        }.filter { $0.hasPrefix(prefix) }.sorted()
    }

    private static func ids(_ words: [String], _ prefix: String, history: Bool) async -> [String] {
        await ask(words) { daemon in
            var filter = ["limit": "200"]
            if let start = try? Identifier.normalizePrefix(prefix) { filter["id_prefix"] = start }
            var records = try await daemon.call(Contract.Activities.list, [.stringMap(filter)]).first?.arrayValue ?? []
            if history { records += try await daemon.call(Contract.Archive.history, [.stringMap(filter)]).first?.arrayValue ?? [] }
            return records.compactMap { $0.stringKeyedValue?[Key.id]?.unwrapped.stringValue }
        }
    }

    /// `body` against batond on the bus the command line names (`--address`), or [] if anything fails.
    private static func ask(_ words: [String], _ body: (Daemon) async throws -> [String]) async -> [String] {
        let address = words.firstIndex(of: "--address").flatMap { words.indices.contains($0 + 1) ? words[$0 + 1] : nil }
            ?? words.first { $0.hasPrefix("--address=") }.map { String($0.dropFirst("--address=".count)) }
        guard let daemon = try? Daemon(address: address) else { return [] }
        return (try? await body(daemon)) ?? []
    }
}
