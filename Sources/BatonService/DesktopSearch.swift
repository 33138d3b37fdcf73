import BatonContract
import BatonCore
import BatonStore
import DBus
import Logging

/// The desktop's search (docs/DESIGN.md, "Desktop surfaces"): GNOME Shell's search provider
/// and KRunner's runner, both over the one search `Search` makes (`ActivityRepository.search`). A
/// result's id is its activity's id; activating one continues it as `Continue` does. Both are
/// for the desktop, a host client: a sandboxed app may not call them (`Access.hostOnly`).
struct DesktopSearch: Sendable {
    let store: Store
    let activities: ActivityRepository
    let connection: Connection
    let applicationDirectories: [String]
    let handlerTimeout: Duration
    /// Continues an activity as the desktop asks (`HandoffService.continueFromDesktop`).
    let continueFromDesktop: @Sendable (_ id: String, _ options: [String: String]) async -> Void
    var clock: any DaemonClock { store.wallClock }

    /// How many results a search gives the desktop: it shows a handful.
    static let desktopResults = 20

    /// `org.gnome.Shell.SearchProvider2` at `/org/baton/Handoff1/SearchProvider`.
    var searchProviderInterface: Interface {
        typealias Provider = Contract.SearchProvider
        return Interface(Provider.interface, methods: [
            Method(Provider.getInitialResultSet) { call in
                [.strings(try self.desktopSearch(try call.argument(0)).map(\.id))]
            },
            Method(Provider.getSubsearchResultSet) { call in
                // The same search again: it costs what a first one does, and sees what arrived since.
                [.strings(try self.desktopSearch(try call.argument(1)).map(\.id))]
            },
            Method(Provider.getResultMetas) { call in
                [.array(.dictionary(key: .string, value: .variant), try self.resultMetas(try call.argument(0)))]
            },
            Method(Provider.activateResult, ordering: .concurrent) { call in
                await self.continueFromDesktop(try call.argument(0), [:])
                return []
            },
            Method(Provider.launchSearch, ordering: .concurrent) { call in
                try await self.openBatonWindow(searching: try call.argument(0), timestamp: try call.argument(1))
                return []
            },
        ])
    }

    /// `org.kde.krunner1` at `/org/baton/Handoff1/KRunner`.
    var krunnerInterface: Interface {
        typealias Runner = Contract.KRunner
        return Interface(Runner.interface, methods: [
            Method(Runner.actions) { _ in [Self.krunnerActions] },
            Method(Runner.match) { call in [try self.krunnerMatches(try call.argument(0))] },
            Method(Runner.run, ordering: .concurrent) { call in
                let id: String = try call.argument(0), action: String = try call.argument(1)
                await self.runFromKRunner(id, action: action)
                return []
            },
            // Results for queries of two letters and more; the plugin's file says the rest.
            Method(Runner.config) { _ in [.record(["MinLetterCount": .int32(2)])] },
            Method(Runner.teardown) { _ in [] },
        ])
    }

    /// The activities `terms` find, as `Search` finds them.
    func desktopSearch(_ terms: [String]) throws -> [Activity] {
        try activities.search(terms.joined(separator: " "), limit: Self.desktopResults, now: clock.now(), app: nil)
    }

    // MARK: GNOME Shell

    /// One meta per id that is still a live activity: its title, where it comes from, its app's icon.
    func resultMetas(_ ids: [String]) throws -> [DBusValue] {
        let now = clock.now()
        let found = try ids.compactMap { id in try activities.findLive(id, now: now) }
        let devices = try store.deviceNames(for: found)
        let apps = appEntries(of: found)
        return found.map { activity in
            let app = apps[activity.appID] ?? nil
            return .record([
                (key: "id", value: .string(activity.id)),
                (key: "name", value: .string(activity.title)),
                (key: "description", value: .string(Self.origin(of: activity, app: app, devices: devices, now: now))),
                (key: "icon", value: Self.serializedIcon(app?.icon)),
                // No clipboardText: the Shell copies it on activation, replacing the user's clipboard.
            ])
        }
    }

    /// The desktop entry of each app among `activities`, read once per app (nil: none found).
    func appEntries(of activities: [Activity]) -> [String: AppEntry?] {
        var entries: [String: AppEntry?] = [:]
        for app in Set(activities.map(\.appID)) { entries[app] = AppEntry.find(app, in: applicationDirectories) }
        return entries
    }

    /// "Hawk Notes · laptop · 3 min ago": the app, the machine, how long ago.
    static func origin(of activity: Activity, app: AppEntry?, devices: [String: String], now: UInt64) -> String {
        let machine = activity.isRemote ? devices[activity.deviceID] ?? "another machine" : "this machine"
        return [app?.name ?? AppEntry.readableName(activity.appID), machine, relativeTime(activity.updatedAt, now: now)].joined(separator: " · ")
    }

    /// A GIcon as `g_icon_serialize` writes it: a file for an absolute path, else the app's
    /// themed icon, or a generic one for an app with no desktop entry. One name, no fallbacks:
    /// the Shell looks every name up in the current theme before the next theme, so a fallback
    /// that Adwaita has (application-x-executable) hid an app icon installed in hicolor.
    static func serializedIcon(_ icon: String?) -> DBusValue {
        if let icon, icon.hasPrefix("/") {
            return .structure([.string("file"), .variant(.string("file://" + icon))])
        }
        return .structure([.string("themed"), .variant(.strings([icon ?? "application-x-executable"]))])
    }

    /// Opens the Baton window searching for `terms`: its `search` action, through
    /// `org.freedesktop.Application` (the bus starts it if needed), as GNOME Shell does for apps.
    func openBatonWindow(searching terms: [String], timestamp: UInt32) async throws {
        let platformData: DBusValue = .record(["activation-token": .string("_TIME\(timestamp)")])
        _ = try await connection.call(
            Self.batonWindowID, ObjectPath(stringLiteral: Self.batonWindowPath), "org.freedesktop.Application", "ActivateAction",
            [.string("search"), .array(.variant, [.variant(.string(terms.joined(separator: " ")))]), platformData],
            timeout: handlerTimeout)
    }

    /// The Baton window's application id (its desktop entry `org.baton.Baton.desktop`) and object.
    static let batonWindowID = "org.baton.Baton"
    static let batonWindowPath = "/org/baton/Baton"

    // MARK: KRunner

    static let krunnerActions: DBusValue = .array(.structure([.string, .string, .string]), [
        .structure([.string(Contract.KRunner.Action.continueHere), .string("Continue here"), .string("go-next")]),
        .structure([.string(Contract.KRunner.Action.newScene), .string("Continue in a new window"), .string("window-new")]),
        .structure([.string(Contract.KRunner.Action.onDevice), .string("Open on the machine it came from"), .string("computer")]),
    ])

    /// `Match`'s `a(sssida{sv})`: id, title, icon name, type, relevance, properties. Ranked as
    /// KRunner's own runners rank (the applications runner, say): only a title that is the query
    /// is an exact match (type 100, `Plasma::QueryMatch::ExactMatch`, relevance 1); words of the
    /// title that begin with the query's are a possible match (30) at 0.5–0.8, newest highest, and
    /// a match of keywords only at 0.2–0.4.
    func krunnerMatches(_ query: String) throws -> DBusValue {
        let activities = try desktopSearch([query])
        let devices = try store.deviceNames(for: activities)
        let words = TextFolding.words
        let wanted = words(query)
        let now = clock.now()
        let apps = appEntries(of: activities)
        let matches = activities.enumerated().map { index, activity -> DBusValue in
            let app = apps[activity.appID] ?? nil
            let titleWords = words(activity.title)
            let exact = titleWords == wanted
            let inTitle = wanted.allSatisfy { word in titleWords.contains { $0.hasPrefix(word) } }
            // Newest first within each kind: the search's order.
            let place = 1 - Double(index) / Double(max(activities.count, 1))
            let relevance = exact ? 1 : inTitle ? 0.5 + 0.3 * place : 0.2 + 0.2 * place
            var actions = [Contract.KRunner.Action.continueHere, Contract.KRunner.Action.newScene]
            if activity.isRemote { actions.append(Contract.KRunner.Action.onDevice) }
            return .structure([
                .string(activity.id), .string(activity.title),
                .string(app?.icon.flatMap { $0.hasPrefix("/") ? nil : $0 } ?? "application-x-executable"),
                .int32(exact ? 100 : 30),
                .double(relevance),
                .record([
                    (key: "subtext", value: .string(Self.origin(of: activity, app: app, devices: devices, now: now))),
                    (key: "actions", value: .strings(actions)),
                ]),
            ])
        }
        return .array(.structure([.string, .string, .string, .int32, .double, .dictionary(key: .string, value: .variant)]), matches)
    }

    func runFromKRunner(_ id: String, action: String) async {
        switch action {
        case Contract.KRunner.Action.newScene:
            await continueFromDesktop(id, ["new_scene": "true"])
        case Contract.KRunner.Action.onDevice:
            let now = clock.now()
            guard let activity = try? store.activity(id: id, now: now), activity.isRemote else {
                return await continueFromDesktop(id, [:])
            }
            await continueFromDesktop(id, ["device": activity.deviceID])
        default:
            await continueFromDesktop(id, [:])
        }
    }
}

extension HandoffService {
    /// The desktop's search, over this service's activities.
    var desktopSearch: DesktopSearch {
        DesktopSearch(
            store: store, activities: activities, connection: connection, applicationDirectories: applicationDirectories,
            handlerTimeout: handlerTimeout, continueFromDesktop: { id, options in await self.continueFromDesktop(id, options: options) })
    }

    /// Continues an activity the desktop's search or a notification activated. The desktop takes
    /// no answer: what goes wrong is logged and said in a notification (and `baton explain` tells it).
    func continueFromDesktop(_ id: String, options: [String: String]) async {
        do {
            _ = try await continuations.continueActivity(id, options: options, confinedTo: nil)
        } catch {
            log.info("continuing \(id) from the desktop: \(error)")
            await offers.tellWhyNotContinued(id, error)
        }
    }
}
