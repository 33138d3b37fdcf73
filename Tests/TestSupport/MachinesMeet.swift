import BatonCore
import Foundation

/// Where the test's machines meet to sync: a PostgreSQL database of the test's own, or folders that a
/// copier keeps the same as a sync tool does (one per machine). The same promises hold for both.
public enum MachinesMeet: String, Sendable, CaseIterable {
    case server, folder

    /// Sets sync up on the first daemon (`Init`, named `names[0]`) and joins each other to it
    /// with the recovery words (`Join`), as a user does. Returns what keeps the meeting place
    /// up (close it at the end) and the words.
    public func join(_ worlds: [BatonWorld], names: [String]) async throws -> (place: MeetingPlace, words: String) {
        switch self {
        case .server:
            let words = try await SyncServer.fresh().join(worlds, names: names)
            // The database stays until the shared cluster ends with the test process.
            return (MeetingPlace {}, words)
        case .folder:
            guard let first = worlds.first, names.count == worlds.count else { throw TestSupportError("one name for each daemon") }
            let folders = try worlds.indices.map { try TemporaryDirectory.make(prefix: "baton-synced-\($0)").path }
            let copiers = try folders.dropFirst().map { try FolderCopier(folders[0], $0, ignoring: SyncedFolderNames.isLeftByTools) }
            let place = MeetingPlace { copiers.forEach { $0.stop() } }
            do {
                guard let words = try await first.call("org.baton.Handoff1.Sync", "Init", [.string(folders[0]), .stringMap(["device_name": names[0]])])
                    .first?.stringValue else { throw TestSupportError("Init gave no recovery words") }
                for (index, (world, name)) in zip(worlds, names).enumerated().dropFirst() {
                    try await eventually("the key reaches \(name)'s folder") { FileManager.default.fileExists(atPath: folders[index] + "/baton-sync.json") }
                    _ = try await world.call("org.baton.Handoff1.Sync", "Join", [.string(folders[index]), .string(words), .stringMap(["device_name": name])])
                }
                return (place, words)
            } catch {
                place.close()
                throw error
            }
        }
    }
}

/// What keeps a meeting place up: a server, copiers.
public final class MeetingPlace: Sendable {
    private let end: @Sendable () -> Void
    init(_ end: @escaping @Sendable () -> Void) { self.end = end }
    public func close() { end() }
}
