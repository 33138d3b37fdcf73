import Synchronization

/// The other connections on the bus, as a connection that identifies its callers knows them
/// (`Connection.setAccessCheck`): who each is, and so who may hear each signal.
///
/// A signal is broadcast — one message, heard by match rules, as D-Bus services do — while
/// every connection on the bus is known to be a host client. Once a sandboxed connection has
/// been on the bus, or one that could not be identified (it might be sandboxed), every signal
/// is addressed to each connection that may hear it instead, for as long as this connection
/// lives: xdg-dbus-proxy passes a talked-to name's broadcasts to every app behind it.
/// Addressing costs a message per connection (Benchmarks/README, "Signals and sandboxed
/// apps"), which is why it is not done while no sandbox is there to keep anything from.
///
/// A connection counts from the moment the bus's announcement of it is read (`appeared`),
/// before it is identified: until then it stops broadcasts too. Left: one that connected,
/// and added a match rule, in the moment between the bus sending that announcement and this
/// connection reading it. Staying in the addressed mode for good closes that window after the
/// first sandboxed connection; only signals sent in it, before then, could reach it.
final class Peers: Sendable {
    private struct State {
        /// Identified, by unique name.
        var known: [String: Caller] = [:]
        /// Announced, not identified (yet, or ever).
        var unidentified: Set<String> = []
        /// Every connection there at the start was announced (`ListNames`).
        var startSwept = false
        /// A sandboxed or unidentifiable connection has been on the bus.
        var sandboxSeen = false
    }

    private let state = Mutex(State())

    /// Whom a signal for `audience` goes to: nil to broadcast it, else each name to address.
    func recipients(for audience: Audience) -> [String]? {
        state.withLock { state in
            if state.startSwept && !state.sandboxSeen && state.unidentified.isEmpty { return nil }
            return state.known.compactMap { name, caller in audience.admits(caller) ? name : nil }
        }
    }

    func caller(_ name: String) -> Caller? { state.withLock { $0.known[name] } }

    /// The bus announced `name` (or listed it at the start).
    func appeared(_ name: String) {
        state.withLock { state in
            if state.known[name] == nil { state.unidentified.insert(name) }
        }
    }

    /// The connections that were there at the start have all been announced.
    func sweptStart() { state.withLock { $0.startSwept = true } }

    /// Returns how many are known now.
    @discardableResult
    func identified(_ name: String, as caller: Caller) -> Int {
        state.withLock { state in
            state.known[name] = caller
            state.unidentified.remove(name)
            if caller.isSandboxed { state.sandboxSeen = true }
            return state.known.count
        }
    }

    /// `name` could not be identified: it might be sandboxed. It stays unidentified until it leaves.
    func unidentifiable(_ name: String) {
        state.withLock { $0.sandboxSeen = true }
    }

    func left(_ name: String) {
        state.withLock { state in
            state.known.removeValue(forKey: name)
            state.unidentified.remove(name)
        }
    }

    /// Keeps only the names in `present` (those that left while being identified).
    func keep(_ present: Set<String>) {
        state.withLock { state in
            state.known = state.known.filter { present.contains($0.key) }
            state.unidentified = state.unidentified.filter { present.contains($0) }
        }
    }

    var count: Int { state.withLock { $0.known.count } }
}
