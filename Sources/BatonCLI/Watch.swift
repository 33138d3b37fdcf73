import BatonContract
import ArgumentParser
import BatonCore
import DBus
import Glibc

/// `baton watch`: the daemon's signals as they happen.
struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print activities advertised, invalidated and continued, and scene changes, as they happen.",
        discussion: """
            Also the privacy settings (privacy-changed) and the state of sync across machines \
            (sync-changed: online, offline, the device's name; not each exchange with the server). \
            Runs until interrupted (Ctrl-C). With --json, prints one JSON object per line, flushed \
            at once, for scripts. "watching" on stderr means the subscription is in place.
            """)
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await perform {
            let daemon = try global.daemon()
            let signals = try await daemon.connection.signals(matching: MatchRule(sender: Daemon.busName, pathNamespace: Daemon.root))
            // batond addresses each signal to the connections it has identified (docs/DESIGN.md,
            // "Callers and access"); once a call is answered it has identified us, so "watching"
            // is true. The call also starts batond if it is not running.
            _ = try await daemon.properties(of: Contract.Interface.status)
            printError("watching \(Daemon.busName) (Ctrl-C to stop)")
            for await signal in signals {
                if let event = Self.event(signal) {
                    writeLine(global.json ? Self.json(event) : Self.text(event))
                }
            }
            throw CLIError(description: "the connection to the bus closed", status: ExitStatus.daemonUnavailable)
        }
    }

    struct Event {
        let name: String
        let fields: [(String, DBusValue)]
    }

    /// The signal as an event, or nil for signals nobody needs to see.
    static func event(_ signal: Message) -> Event? {
        let body = signal.body
        let path = DBusValue.objectPath(signal.path ?? Daemon.root)
        switch (signal.interface, signal.member) {
        case (Contract.Interface.activities, Contract.Activities.advertised.name) where body.count == 3:
            return Event(name: "advertised", fields: [("id", body[0]), ("type", body[1]), ("title", body[2])])
        case (Contract.Interface.activities, Contract.Activities.invalidated.name) where body.count == 1:
            return Event(name: "invalidated", fields: [("id", body[0])])
        case (Contract.Interface.activities, Contract.Activities.updated.name) where body.count == 1:
            return Event(name: "updated", fields: [("id", body[0])])
        case (Contract.Interface.activities, Contract.Activities.continued.name) where body.count >= 2:
            // `created` came in wave 2; a batond of before sends two arguments.
            return Event(name: "continued", fields: [("id", body[0]), ("scene", body[1])] + body.dropFirst(2).prefix(1).map { ("created", $0) })
        case ("org.freedesktop.DBus.ObjectManager", "InterfacesAdded") where !body.isEmpty:
            return Event(name: "scene-opened", fields: [("scene", body[0])])
        case ("org.freedesktop.DBus.ObjectManager", "InterfacesRemoved") where !body.isEmpty:
            return Event(name: "scene-closed", fields: [("scene", body[0])])
        case (Contract.Interface.scene, Contract.Scene.storageChanged.name) where body.count == 2:
            let changed = body[0].stringKeyedValue?.keys.sorted() ?? []
            return Event(name: "storage-changed", fields: [("scene", path), ("changed", .strings(changed)), ("removed", body[1])])
        case ("org.freedesktop.DBus.Properties", "PropertiesChanged") where body.count == 3 && body[0].stringValue == Contract.Interface.privacy:
            return Event(name: "privacy-changed", fields: [("properties", body[1])])
        case ("org.freedesktop.DBus.Properties", "PropertiesChanged") where body.count == 3 && body[0].stringValue == Contract.Interface.sync:
            // LastSyncAt moves at every round with the server: shown with a change of state, not alone.
            guard let changed = body[1].stringKeyedValue, changed.keys.contains(where: { $0 != Contract.Sync.Property.lastSyncAt }) else {
                return nil
            }
            return Event(name: "sync-changed", fields: [("properties", body[1])])
        case ("org.freedesktop.DBus.Properties", "PropertiesChanged") where body.count == 3:
            return Event(name: "scene-changed", fields: [("scene", path), ("properties", body[1])])
        default:
            return nil
        }
    }

    static func json(_ event: Event) -> String {
        let fields = [("time", DBusValue.uint64(WallClock.nowMicroseconds())), ("event", .string(event.name))] + event.fields
        return "{" + fields.map { StrictJSON.quote($0.0) + ":" + JSONText.value($0.1, rawJSONKeys: []) }.joined(separator: ",") + "}"
    }

    static func text(_ event: Event) -> String {
        var now = time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let clock = "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
        let details = event.fields.map { name, value -> String in
            let text: String = switch value.unwrapped {
            case .array(_, let items): items.compactMap(\.stringValue).joined(separator: ",")
            case .dictionary(_, _, let entries):
                entries.map { "\($0.key.stringValue ?? "")=\(Scenes.describe($0.value).text)" }.joined(separator: " ")
            default: value.unwrapped.stringValue ?? JSONText.value(value)
            }
            return "\(name)=\(text)"
        }
        return ([clock, event.name.padding(16)] + details).joined(separator: " ")
    }
}

/// Writes a line to stdout at once, so a pipe sees each event when it happens.
func writeLine(_ line: String) {
    (line + "\n").utf8CString.withUnsafeBufferPointer { _ = write(1, $0.baseAddress, $0.count - 1) }
}
