import BatonContract
import BatonCore
import BatonStore
import DBus
import FoundationEssentials
import Glibc
import Logging
import Synchronization

/// The recent-documents source: each document an app records in `recently-used.xbel` (GTK's
/// `RecentManager`) after the source was turned on becomes an `org.freedesktop.RecentDocument`
/// activity of the app `org.baton.RecentDocuments`: its title the document's name, its payload
/// the URI, MIME type, the app that used it (a desktop id, when this machine has its entry) and
/// when. Continuing one opens the document in that app, through the handler
/// `org.baton.RecentDocuments` (`baton serve-documents`, started by the bus, outside batond's
/// confined unit), where the file is on the machine.
enum RecentDocuments {
    static let type = Contract.Sources.RecentDocuments.type
    static let app = Contract.Sources.RecentDocuments.app
    /// The source's name, which the user turns on and off. It is off until then, since what it
    /// records (file names) would start crossing machines.
    static let source = Contract.Sources.RecentDocuments.name
    /// A document used stays an activity for a day (the history keeps it after).
    static let lifetime = 24 * 3600
    /// At most this many documents from one reading of the file: a file that comes back with
    /// a thousand entries newer than the last reading (restored from a backup, say) is not a
    /// thousand documents just used.
    static let perReading = 20
    /// Larger than this, the file is not read (GTK keeps it to a few hundred entries).
    static let maxFileBytes = 16 << 20

    /// Why `activity` cannot be opened here, or nil when it can.
    static func obstacle(to activity: Activity, applicationDirectories: [String]) -> String? {
        let members = (try? StrictJSON.parseObject(activity.payload, maxBytes: .max, maxDepth: 8)) ?? []
        guard let uri = members.string("uri"), let path = RecentlyUsed.localPath(uri) else { return "it is not a file on this machine" }
        guard access(path, F_OK) == 0 else { return "the document \(path) is not on this machine" }
        guard let app = RecentlyUsed.appDescription(for: members) else { return "no app is known to have opened it" }
        guard RecentlyUsed.app(for: members, in: applicationDirectories) != nil else {
            return "the app that used it, \(app), is not installed on this machine"
        }
        return nil
    }
}

/// The task following a source while it is on; none while it is off.
final class SourceFollower: Sendable {
    private let task = Mutex<Task<Void, any Error>?>(nil)

    /// Starts `follow` unless a follower runs already.
    func startIfIdle(_ follow: () -> Task<Void, any Error>?) {
        task.withLock { task in if task == nil { task = follow() } }
    }

    func stop() {
        task.withLock { $0?.cancel(); $0 = nil }
    }
}

/// The recent-documents source at work: follows `recently-used.xbel` while the source is on
/// and advertises each document used as an activity, through the activity repository, as
/// any app's Advertise is (so a pause, a block and the quota hold for it too).
struct RecentDocumentsSource: ActivitySource {
    let store: Store
    let activities: ActivityRepository
    let announcements: any Announcements
    let background: BackgroundTasks
    let follower: SourceFollower
    /// The user's `recently-used.xbel`; nil when no XDG data directory is known.
    let path: String?
    let applicationDirectories: [String]
    let log: Logger
    var clock: any DaemonClock { store.wallClock }
    var limits: Limits { store.limits }

    func followIfOn() {
        guard let path, (try? store.sourcesOn()[RecentDocuments.source]) != nil else { return }
        follower.startIfIdle { background.start { await follow(path) } }
    }

    func stop() {
        follower.stop()
    }

    /// Reads the file now and at each change, until cancelled (the source turned off, batond stopping).
    private func follow(_ path: String) async {
        let watcher: DirectoryWatcher
        // KDE's links are in a directory beside the file (`KDERecentDocuments`), once KIO made it.
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let kde = directory + "/" + KDERecentDocuments.directoryName
        let file = String(path[(path.lastIndex(of: "/").map { path.index(after: $0) } ?? path.startIndex)...])
        do {
            // GTK makes the directory when it first writes the file: it may not be there yet.
            mkdir(directory, 0o700)
            watcher = try DirectoryWatcher([directory]) { $0 == file || $0 == KDERecentDocuments.directoryName || $0.hasSuffix(".desktop") }
        } catch {
            log.error("recent documents: \(error); the source records nothing")
            return
        }
        var shown: [String: String] = [:]  // URI → its activity, ended when it is used again
        await withTaskCancellationHandler {
            try? watcher.watch(kde)
            await read(path, kde: kde, shown: &shown)
            for await _ in watcher.changes where !Task.isCancelled {
                try? watcher.watch(kde)
                await read(path, kde: kde, shown: &shown)
            }
        } onCancel: {
            watcher.stop()
        }
        watcher.stop()
    }

    /// Advertises the documents used since the last reading, from the file and KDE's links in
    /// `kde`: one each, by its URI, the newest use of it wins.
    private func read(_ path: String, kde: String, shown: inout [String: String]) async {
        do {
            guard let since = try store.sourcesOn()[RecentDocuments.source] else { return }
            let recorded = Self.readSmallFile(path, limit: RecentDocuments.maxFileBytes).map(RecentlyUsed.documents(in:)) ?? []
            let linked = getenv("HOME").map { KDERecentDocuments.documents(in: kde, home: String(cString: $0)) } ?? []
            // By the path a URI names: the two files may encode one name differently.
            var newest: [String: RecentlyUsed.Document] = [:]
            for document in recorded + linked where document.usedAt > since {
                let key = RecentlyUsed.localPath(document.uri) ?? document.uri
                if let known = newest[key], known.usedAt >= document.usedAt { continue }
                newest[key] = document
            }
            let used = newest.values.sorted { ($0.usedAt, $0.uri) < ($1.usedAt, $1.uri) }
            guard let newest = used.last?.usedAt else { return }
            if !(try store.isBlocked(RecentDocuments.app)) {
                for document in used.suffix(RecentDocuments.perReading) {
                    if let previous = shown[document.uri] { await endQuietly(previous) }
                    shown[document.uri] = try await advertise(document)
                }
            }
            try await store.writing { try $0.sourceRead(RecentDocuments.source, until: newest) }
        } catch {
            log.error("recent documents: \(error)")
        }
    }

    private func advertise(_ document: RecentlyUsed.Document) async throws -> String {
        let app = DesktopApp.find(recordedName: document.app, exec: document.exec, in: applicationDirectories)
        var payload = "{\"uri\":\(StrictJSON.quote(document.uri))"
        if let mime = document.mimeType { payload += ",\"mime_type\":\(StrictJSON.quote(mime))" }
        if let app { payload += ",\"app\":\(StrictJSON.quote(app.desktopID))" }
        // As recorded too: another machine finds its own app from them when this one had none.
        if let name = document.app { payload += ",\"app_name\":\(StrictJSON.quote(name))" }
        if let program = document.exec.flatMap(DesktopApp.program) { payload += ",\"app_program\":\(StrictJSON.quote(program))" }
        payload += ",\"modified\":\(document.usedAt)}"
        let type = try await activities.sourceType(
            RecentDocuments.type, app: RecentDocuments.app, options: ["title": "Document", "required_keys": "uri"])
        let advertisement = try Advertisement.parse(
            type: type, title: String(document.displayName.prefix(200)), payload: payload,  // 200 characters fit the title limit
            options: ["target_content_id": document.uri, "eligible_for_search": "true", "expires_in": String(RecentDocuments.lifetime)], limits: limits)
        let now = clock.now()
        let outcome = try await activities.advertise(
            advertisement.makeActivity(id: Identifier.make(at: now), type: type, sceneID: nil, now: now), requestID: nil, quota: limits.liveActivitiesPerApp)
        announcements.announce(outcome)
        return outcome.id
    }


    private func endQuietly(_ id: String) async {
        if let ended = try? await activities.invalidate(id) { announcements.announce(ended) }
    }

    /// A file's text, read whole; nil when it is missing, larger than `limit`, or not UTF-8.
    static func readSmallFile(_ path: String, limit: Int) -> String? {
        guard let data = FileManager.default.contents(atPath: path), data.count <= limit else { return nil }
        return String(data: data, encoding: .utf8)
    }
}
