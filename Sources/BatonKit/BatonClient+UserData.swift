import BatonContract
import BatonCore
import DBus

/// The user's data and controls (`Archive`, `Privacy`): what settings screens and tools
/// built on BatonKit need, as the `baton` command line has it.
extension BatonClient {
    // MARK: History

    /// Activities that ended, the most recently ended first; `filter` takes the contract's
    /// `History` keys (`app_id`, `type`, `query`, `since`, `limit`). Continue one with
    /// `continueActivity(id:)`.
    public func history(filter: [String: String] = [:]) async throws -> [PastActivity] {
        try await call(Contract.Archive.history, [.stringMap(filter)]).first?.arrayValue?.compactMap(Records.pastActivity) ?? []
    }

    /// Removes the past activities `filter` matches (all of them for an empty one); returns how many.
    @discardableResult
    public func clearHistory(filter: [String: String] = [:]) async throws -> Int {
        Int(try await call(Contract.Archive.clearHistory, [.stringMap(filter)]).first?.uint32Value ?? 0)
    }

    // MARK: Export and import

    /// The export document (docs/guide.md, "Export and import"), of one app or of all.
    public func exportData(appID: String? = nil) async throws -> String {
        try await call(Contract.Archive.export, [.stringMap(appID.map { ["app_id": $0] } ?? [:])]).first?.stringValue ?? ""
    }

    /// Imports an export; returns what it added (`types`, `activities`, `history`, `scenes`)
    /// and how much was there already (`unchanged`).
    @discardableResult
    public func importData(_ document: String) async throws -> [String: Int] {
        Records.counts(try await call(Contract.Archive.import, [.string(document), .stringMap([:])]))
    }

    // MARK: Privacy

    /// Pauses recording for `seconds` (0: until `resumeRecording()`).
    public func pauseRecording(seconds: UInt64 = 0) async throws {
        _ = try await call(Contract.Privacy.pause, [.uint64(seconds)])
    }

    public func resumeRecording() async throws {
        _ = try await call(Contract.Privacy.resume)
    }

    /// Whether recording is paused, and until when (0: until resumed).
    public func pause() async throws -> (paused: Bool, until: UInt64) {
        let properties = try await connection.call(Self.busName, Self.root, "org.freedesktop.DBus.Properties", "GetAll",
                                                   [.string(Contract.Interface.privacy)]).first?.stringKeyedValue ?? [:]
        return (properties[Contract.Privacy.Property.paused]?.unwrapped.boolValue ?? false,
                properties[Contract.Privacy.Property.pausedUntil]?.unwrapped.uint64Value ?? 0)
    }

    public func block(appID: String) async throws {
        _ = try await call(Contract.Privacy.blockApp, [.string(appID)])
    }

    public func unblock(appID: String) async throws {
        _ = try await call(Contract.Privacy.unblockApp, [.string(appID)])
    }

    /// Removes everything of the app; returns what went (`types`, `activities`, `history`, `scenes`, `values`).
    @discardableResult
    public func forget(appID: String) async throws -> [String: Int] {
        Records.counts(try await call(Contract.Privacy.forgetApp, [.string(appID)]))
    }
}
