import BatonContract
import BatonCore
import BatonStore
import DBus

/// Callers and access (docs/DESIGN.md): a sandboxed app (`Caller`, as the DBus layer
/// identifies it) is confined to its own app id — its types, activities, history and scenes.
/// Another app's activity or scene does not exist for it: `NotFound`, `UnknownActivityType`
/// or `UnknownObject`, as for an id that was never there. What reaches every app's data or
/// the whole store (Archive's export and import, Privacy, Sync, the test clock) is for host
/// clients only: `AccessDenied`. Host clients — the CLI, the desktop, unsandboxed apps —
/// keep full access, as with xdg-desktop-portal.
extension MethodCall {
    /// The app a sandboxed caller is confined to; nil for a host client.
    var confinedApp: String? {
        guard let caller, caller.isSandboxed else { return nil }
        return caller.appID ?? ""
    }
}

/// What one caller may see and change: a sandboxed app, its own app's activities, types,
/// scenes and history; a host client, everything. Handlers take the caller's scope and ask
/// it, rather than asking which caller they serve.
struct CallerScope: Sendable {
    /// The app a sandboxed caller is confined to; nil for a host client.
    let app: String?

    init(_ call: MethodCall) { app = call.confinedApp }

    /// Whether the caller may see and change what belongs to `owner`.
    func sees(_ owner: String) -> Bool { app.map { $0 == owner } ?? true }

    /// `value` (an app's type, scene, …) as this caller may know it: nil when it belongs to
    /// another app than a sandboxed caller's, for which it does not exist.
    func visible<Owned>(_ value: Owned?, owner: (Owned) -> String) -> Owned? {
        value.flatMap { sees(owner($0)) ? $0 : nil }
    }

    /// Narrows a filter's app to the caller's: its own app when the filter names none; false
    /// when it names another app, of which the caller sees nothing.
    func narrow(_ filterApp: inout String?) -> Bool {
        guard let app else { return true }
        guard filterApp == nil || filterApp == app else { return false }
        filterApp = app
        return true
    }

    /// Refuses acting for an app other than the caller's own: "`app` opens scenes for itself only".
    func refuseAnotherApp(_ appID: String, _ what: String) throws(BatonError) {
        guard !sees(appID) else { return }
        throw .accessDenied("the sandboxed app \(app ?? "") \(what) for itself only, not for \(appID)")
    }
}

enum Access {
    /// Members a sandboxed app may not call at all, by interface (every member) or by
    /// `interface.member`: they reach every app's data or change what the user decides.
    static let hostOnly: Set<String> = [
        Contract.Interface.privacy,
        Contract.Interface.sync,
        Contract.Interface.testing,
        // What the user copies: for their own agent and tools only.
        Contract.Interface.clipboard,
        // The desktop's search sees every app's activities.
        Contract.SearchProvider.interface,
        Contract.KRunner.interface,
        Contract.Interface.archive + "." + Contract.Archive.export.name,
        Contract.Interface.archive + "." + Contract.Archive.exportTo.name,
        Contract.Interface.archive + "." + Contract.Archive.import.name,
        Contract.Interface.status + "." + Contract.Status.setNotifications.name,
        Contract.Interface.status + "." + Contract.Status.enableSource.name,
        Contract.Interface.status + "." + Contract.Status.disableSource.name,
        Contract.Interface.status + "." + Contract.Status.setSourceSetting.name,
    ]

    /// Refuses a sandboxed caller a host-only member, or the properties of a host-only
    /// interface (from the connection's access check).
    static func check(_ call: MethodCall) throws(BatonError) {
        guard let app = call.confinedApp, let interface = call.message.interface else { return }
        if interface == "org.freedesktop.DBus.Properties", let named = try? call.argument(0, as: String.self), hostOnly.contains(named) {
            throw .accessDenied("the properties of \(named) are for the user's own tools; the sandboxed app \(app) may not read them")
        }
        if hostOnly.contains(interface) || hostOnly.contains(interface + "." + (call.message.member ?? "")) {
            throw .accessDenied("\(interface).\(call.message.member ?? "") is for the user's own tools; the sandboxed app \(app) may not call it")
        }
    }

    /// Who may hear that properties of the root object's `interface` changed: host clients
    /// only for an interface a sandboxed app may not read, else everyone.
    static func audience(ofPropertiesOf interface: String) -> Audience {
        hostOnly.contains(interface) ? .hosts : .everyone
    }

    /// The refusal of an activity that is another app's: as if there were none.
    static func noActivity(_ id: String) -> BatonError { .notFound("no activity \(id)") }
}
