import BatonContract
import DBus
import Glibc

extension HandoffService {
    /// The daemon's own facts, for `baton status`, none of them sensitive; and whether it
    /// notifies of other machines' activities (`Notifications.swift`) and which of its sources
    /// are on (`RecentDocuments.swift`), the user's to change.
    var statusInterface: Interface {
        typealias Name = Contract.Status.Property
        return Interface(Contract.Interface.status, methods: [
            Method(Contract.Status.setNotifications, ordering: .concurrent, handler: setNotifications),
            Method(Contract.Status.enableSource, ordering: .concurrent, handler: enableSource),
            Method(Contract.Status.disableSource, ordering: .concurrent, handler: disableSource),
        ], properties: [
            Property(Name.version, "u", changeSignal: .const) { _ in .uint32(1) },
            Property(Name.databasePath, "s", changeSignal: .const) { _ in .string(self.store.path) },
            Property(Name.databaseSize, "t", changeSignal: .none) { _ in .uint64(self.databaseSize()) },
            Property(Name.startedAt, "t", changeSignal: .const) { _ in .uint64(self.startedAt) },
            Property(Name.notifications, "b", changeSignal: .emits) { _ in .boolean(try self.store.notificationsEnabled()) },
            Property(Name.sources, "as", changeSignal: .emits) { _ in .array(.string, try self.sourcesOn()) },
        ])
    }

    /// Bytes of the database file and its WAL.
    func databaseSize() -> UInt64 {
        ["", "-wal"].reduce(0) { total, suffix in
            var info = stat()
            return stat(store.path + suffix, &info) == 0 ? total + UInt64(info.st_size) : total
        }
    }
}
