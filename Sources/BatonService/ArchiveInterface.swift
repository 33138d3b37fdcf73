import BatonContract
import BatonCore
import BatonStore
import DBus
import Logging

/// `org.baton.Handoff1.Archive`: the user's history of activities that ended, and the whole
/// store exported and imported. It holds only what it uses: the store, a log, and the
/// service's announcements (of what an import added).
struct ArchiveInterface: Sendable {
    let store: Store
    let log: Logger
    let announcements: any Announcements

    var interface: Interface {
        Interface(Contract.Interface.archive, methods: [
            Method.encoded(Contract.Archive.history, handler: history),
            Method(Contract.Archive.clearHistory, ordering: .concurrent, handler: clearHistory),
            Method(Contract.Archive.export, ordering: .concurrent, handler: export),
            Method(Contract.Archive.exportTo, ordering: .concurrent, handler: exportTo),
            Method(Contract.Archive.import, ordering: .concurrent, handler: importDocument),
        ])
    }

    func export(_ call: MethodCall) async throws -> [DBusValue] {
        let appID = try exportFilter(try call.argument(0), method: "Export")
        // Off the bus thread, read and encoded: a full store takes hundreds of milliseconds.
        let text = try await Task.detached { [store] in try store.exportContents(appID: appID, now: store.wallClock.now()).encoded() }.value
        return [.string(text)]
    }

    func exportTo(_ call: MethodCall) async throws -> [DBusValue] {
        guard case .unixFD(let descriptor)? = call.arguments.first else { throw BatonError.invalidArgument("ExportTo needs a file descriptor") }
        let appID = try exportFilter(try call.argument(1), method: "ExportTo")
        try DescriptorWriter.checkWritable(descriptor)
        let written = try await DescriptorWriter.write(to: descriptor) { [store] in
            try store.exportContents(appID: appID, now: store.wallClock.now()).encoded()
        }
        log.debug("exported \(written) bytes to a file descriptor")
        return []
    }

    /// The app an export is limited to, if any.
    private func exportFilter(_ filter: [String: String], method: String) throws(BatonError) -> String? {
        if let unknown = filter.keys.first(where: { $0 != "app_id" }) {
            throw .invalidArgument("\(method) has no filter '\(printable(unknown))'; its filter is app_id")
        }
        return filter["app_id"]
    }

    func importDocument(_ call: MethodCall) async throws -> [DBusValue] {
        let text: String = try call.argument(0)
        let options: [String: String] = try call.argument(1)
        if let unknown = options.keys.first { throw BatonError.invalidArgument("Import has no option '\(printable(unknown))'") }
        let registered = try store.activityTypes()
        let limits = store.limits
        let document = try await Task.detached { () throws(BatonError) in try ArchiveDocument.decode(text, registered: registered, limits: limits) }.value
        let imported = try await store.writing { try $0.importContents(document) }
        imported.activities.forEach(announcements.signals.advertised)
        for scene in imported.scenes { try await announcements.scenes.exportNew(scene) }
        let counts: [String: UInt32] = [
            "types": UInt32(clamping: imported.types), "activities": UInt32(clamping: imported.activities.count),
            "history": UInt32(clamping: imported.history), "scenes": UInt32(clamping: imported.scenes.count),
            "unchanged": UInt32(clamping: imported.unchanged),
        ]
        log.info("imported \(counts.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", "))")
        return [.dictionary(key: .string, value: .uint32, counts.sorted { $0.key < $1.key }.map { .init(.string($0.key), .uint32($0.value)) })]
    }

    func history(_ call: MethodCall) async throws -> EncodedBody {
        guard let filter = try historyFilter(try call.argument(0), method: "History", for: call) else {
            return Records.encodedRecords([PastActivity](), deviceNames: [:])
        }
        let past = try store.history(filter)
        return Records.encodedRecords(past, deviceNames: try store.deviceNames(for: past.map(\.activity)))
    }

    func clearHistory(_ call: MethodCall) async throws -> [DBusValue] {
        guard let filter = try historyFilter(try call.argument(0), method: "ClearHistory", for: call) else { return [.uint32(0)] }
        let removed = try await store.writing { try $0.clearHistory(filter) }
        return [.uint32(UInt32(clamping: removed))]
    }

    /// The filter `options` give, confined to a sandboxed caller's app; nil when they name another app.
    private func historyFilter(_ options: [String: String], method: String, for call: MethodCall) throws(BatonError) -> Store.HistoryFilter? {
        var filter = try historyFilter(options, method: method)
        return CallerScope(call).narrow(&filter.appID) ? filter : nil
    }

    private func historyFilter(_ options: [String: String], method: String) throws(BatonError) -> Store.HistoryFilter {
        var filter = Store.HistoryFilter()
        for (key, value) in options {
            switch key {
            case "app_id": filter.appID = value
            case "type": filter.type = value
            case "query": filter.query = value
            case "id_prefix": filter.idPrefix = try Identifier.normalizePrefix(value)
            case "since":
                guard let since = UInt64(value) else {
                    throw .invalidArgument("since must be a time in microseconds since the epoch, not '\(printable(value))'")
                }
                filter.since = since
            case "limit":
                guard let limit = Int(value), limit > 0 else { throw .invalidArgument("limit must be a positive number, not '\(printable(value))'") }
                filter.limit = limit
            default:
                throw .invalidArgument(
                    "\(method) has no filter '\(printable(key))'; its filters are \(Contract.Archive.filters.joined(separator: ", "))")
            }
        }
        return filter
    }
}
