import BatonContract
import BatonCore
import BatonStore
import DBus

extension HandoffService {
    /// `org.baton.Handoff1.Archive`: the user's history of activities that ended.
    var archiveInterface: Interface {
        Interface(Contract.Interface.archive, methods: [
            Method.encoded(Contract.Archive.history, handler: history),
            Method(Contract.Archive.clearHistory, ordering: .concurrent, handler: clearHistory),
        ])
    }

    func history(_ call: MethodCall) async throws -> EncodedBody {
        let past = try store.history(try historyFilter(try call.argument(0), method: "History"))
        return Records.encodedRecords(past, deviceNames: try deviceNames(for: past.map(\.activity)))
    }

    func clearHistory(_ call: MethodCall) async throws -> [DBusValue] {
        let filter = try historyFilter(try call.argument(0), method: "ClearHistory")
        let removed = try await store.writing { try $0.clearHistory(filter) }
        return [.uint32(UInt32(clamping: removed))]
    }

    private func historyFilter(_ options: [String: String], method: String) throws(BatonError) -> Store.HistoryFilter {
        var filter = Store.HistoryFilter()
        for (key, value) in options {
            switch key {
            case "app_id": filter.appID = value
            case "type": filter.type = value
            case "query": filter.query = value
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
