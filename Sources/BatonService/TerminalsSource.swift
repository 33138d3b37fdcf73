import BatonContract
import BatonCore
import BatonStore
import FoundationEssentials
import Glibc
import Logging

/// The terminals source: each shell open in a terminal window (`TerminalShells`) becomes an
/// `org.baton.terminal.session` activity of the app `org.baton.Terminals`, titled by its
/// directory and terminal, updated as the directory changes, ended when the shell exits.
/// Continuing one opens a terminal there, through the handler `org.baton.Terminals`
/// (`baton serve-terminals`, started by the bus).
///
/// When to look: a terminal allocates a pseudo-terminal for each shell and frees it when the
/// shell exits, so a change in `/dev/pts` (inotify) is when shells come and go; a shell set
/// up with `baton shell-init` writes its directory to a file of its own at each prompt, watched
/// the same way. Only while shells are open does a timer read the others' directories from
/// `/proc` (a `cd` makes no event): nothing runs while no terminal is open.
enum Terminals {
    static let type = Contract.Sources.Terminals.type
    static let app = Contract.Sources.Terminals.app
    static let source = Contract.Sources.Terminals.name
    /// How often `/proc` is read while shells are open: a directory shows within this and the scan.
    static let period: Duration = .seconds(2)
    /// How an activity of this source ends, as the history and Explain say it: its shell exited
    /// while batond watched, or it was open when batond last stopped (`baton terminals restore`
    /// reopens those).
    static let exited = "its shell exited"
    static let openAtStop = Contract.Sources.Terminals.openAtStop
    /// How long after a change shells are looked for even when none is seen yet (its shell
    /// starts after the terminal made its pseudo-terminal).
    static let settling: Duration = .seconds(5)
    /// Where pseudo-terminals appear and go.
    static let ptys = "/dev/pts"

    /// Where shells set up with `baton shell-init` say their directories: `$XDG_RUNTIME_DIR/baton/shells`.
    static func shellsDirectory(environment: [String: String]) -> String? {
        guard let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") else { return nil }
        return runtime + "/baton/shells"
    }

    typealias Session = TerminalSession

    /// What continuing one does, for Explain.
    static func opens(_ activity: Activity) -> String {
        guard let session = Session(payload: activity.payload) else { return "a terminal: continuing opens a terminal" }
        let name = session.knownTerminal?.name ?? "a terminal"
        if let host = session.host {
            return "an ssh session: continuing opens \(name) logged in to \(session.user.map { "\($0)@" } ?? "")\(host)"
        }
        let nearest = TerminalShells.nearestDirectory(session.cwd)
        guard nearest != session.cwd else { return "a terminal: continuing opens \(name) at \(session.cwd)" }
        return "a terminal: continuing opens \(name) at \(nearest), the nearest folder this machine has of \(session.cwd)"
    }
}

/// Why the source looks again.
private enum Wakeup { case change, tick }

/// The terminals source at work, while it is on.
struct TerminalsSource: ActivitySource {
    let store: Store
    let activities: ActivityRepository
    let announcements: any Announcements
    let background: BackgroundTasks
    let follower: SourceFollower
    /// Where shells set up with `baton shell-init` say their directories; nil: none can.
    let shellsDirectory: String?
    let home: String?
    let log: Logger
    var limits: Limits { store.limits }

    func followIfOn() {
        guard (try? store.sourcesOn()[Terminals.source]) != nil else { return }
        follower.startIfIdle { background.start { await follow() } }
    }

    func stop() {
        follower.stop()
    }

    /// A shell shown as an activity: which, and what it last said.
    struct Shown {
        var id: String
        var session: Terminals.Session
    }

    private func follow() async {
        let told = shellsDirectory.flatMap { Self.makeDirectories($0) ? $0 : nil }
        let watcher: DirectoryWatcher
        do {
            watcher = try DirectoryWatcher(told.map { [$0] } ?? [], entries: true) { _ in true }
        } catch {
            log.error("terminals: \(error); the source records nothing")
            return
        }
        do {
            try watcher.watch(Terminals.ptys, onlyEntries: true)
        } catch {
            watcher.stop()
            log.error("terminals: \(error); the source records nothing")
            return
        }
        // One stream of wake-ups: the watcher's changes, and ticks while shells are open. A
        // terminal makes its pseudo-terminal before its shell runs, so a change is followed by
        // ticks for a while even when no shell is seen yet.
        let (wakeups, wake) = AsyncStream.makeStream(of: Wakeup.self, bufferingPolicy: .bufferingNewest(2))
        let forwarding = Task {
            for await _ in watcher.changes { wake.yield(.change) }
            wake.finish()
        }
        var ticking: Task<Void, Never>?
        var shown = await adopt()
        var settling = ContinuousClock.now
        var paused = activities.paused.isPaused
        wake.yield(.tick)  // the first look; a change would keep looking for a while
        for await wakeup in wakeups {
            if wakeup == .change { settling = .now + Terminals.settling }
            let open = await look(&shown, paused: &paused) || ContinuousClock.now < settling
            if open, ticking == nil {
                ticking = Task {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: Terminals.period)
                        wake.yield(.tick)
                    }
                }
            } else if !open {
                ticking?.cancel()
                ticking = nil
            }
        }
        // Cancelled (the source off, batond stopping): the loop above ended with the stream.
        ticking?.cancel()
        forwarding.cancel()
        watcher.stop()
    }

    /// The shells recorded before batond started, by the persistent id each activity carries
    /// (this boot's id, then the shell's `pid-start`): those still running are followed again;
    /// the others were open when batond last stopped (a logout, a restart of the machine), and
    /// end so (`baton terminals restore` reopens them).
    private func adopt() async -> [String: Shown] {
        var filter = Store.ActivityFilter()
        filter.appID = Terminals.app
        filter.device = .local
        let boot = Self.bootID + "-"
        let running = Set(TerminalShells.scan().map(\.key))
        var shown: [String: Shown] = [:]
        for activity in (try? activities.list(filter, now: store.wallClock.now())) ?? [] {
            let key = activity.persistentID.map { $0.hasPrefix(boot) ? String($0.dropFirst(boot.count)) : $0 } ?? ""
            if running.contains(key), let session = Terminals.Session(payload: activity.payload) {
                shown[key] = Shown(id: activity.id, session: session)
            } else if let ended = try? await activities.invalidate(activity.id, reason: Terminals.openAtStop) {
                announcements.announce(ended)
            }
        }
        return shown
    }

    /// Reads the shells now and records what changed; returns whether any shell is open.
    /// `paused`: whether recording was paused at the last look. What was advertised during a
    /// pause is gone at its end: those shells are recorded again.
    private func look(_ shown: inout [String: Shown], paused: inout Bool) async -> Bool {
        let shells = TerminalShells.scan(toldDirectory: told(by:))
        if paused != activities.paused.isPaused {
            paused.toggle()
            if !paused { shown = shown.filter { (try? activities.find($0.value.id)) != nil } }
        }
        log.debug("terminals: \(shells.count) shells open, \(shown.count) shown")
        do {
            guard try store.sourcesOn()[Terminals.source] != nil else { return !shells.isEmpty }
            let blocked = try store.settingValues(of: Terminals.source, declared: Contract.Sources.Terminals.settings)["blocked-paths"] ?? ""
            let recording = !(try store.isBlocked(Terminals.app))
            let host = TerminalShells.hostName()
            var open = Set<String>()
            for shell in shells {
                open.insert(shell.key)
                guard recording else { continue }
                // An ssh session's directory is on the other host, unknown here.
                let session = Terminals.Session(cwd: shell.ssh == nil ? shell.directory : "", terminal: shell.terminal.desktopID,
                                                host: shell.ssh?.host, user: shell.ssh?.user, port: shell.ssh?.port)
                // A directory under a blocked path is never recorded: the activity stays where it was last seen.
                if session.host == nil, session.cwd.isEmpty || TerminalShells.isBlocked(session.cwd, patterns: blocked, home: home) { continue }
                if let known = shown[shell.key], known.session == session { continue }
                do {
                    if let known = shown[shell.key], try await update(known.id, to: session, shell: shell, host: host) {
                        shown[shell.key]?.session = session
                    } else {
                        shown[shell.key] = Shown(id: try await advertise(session, shell: shell, host: host), session: session)
                    }
                } catch {
                    log.error("terminals: recording the shell \(shell.pid): \(error)")
                }
            }
            for (key, gone) in shown where !open.contains(key) {
                do {
                    announcements.announce(try await activities.invalidate(gone.id, reason: Terminals.exited))
                } catch let error as BatonError where error.code == .notFound {
                    // Ended already (forgotten, say).
                } catch {
                    log.error("terminals: ending \(gone.id), whose shell exited: \(error); tried again at the next look")
                    continue
                }
                shown[key] = nil
                if let shellsDirectory, let pid = key.split(separator: "-").first { unlink("\(shellsDirectory)/\(pid)") }
            }
        } catch {
            log.error("terminals: \(error)")
        }
        return !shells.isEmpty
    }

    private func told(by pid: Int32) -> String? {
        shellsDirectory.flatMap { TerminalShells.toldDirectory(in: $0, pid: pid) }
    }

    private func title(_ session: Terminals.Session, _ shell: TerminalShells.Shell) -> String {
        let place = session.host.map { "ssh \(session.user.map { "\($0)@" } ?? "")\($0)" } ?? TerminalShells.spoken(session.cwd, home: home)
        return String("\(place) — \(shell.terminal.name)".prefix(200))
    }

    private func options(_ session: Terminals.Session, host: String) -> [String: String] {
        var options = ["eligible_for_search": "true"]
        if session.host == nil { options["target_content_id"] = TerminalShells.fileURL(host: host, path: session.cwd) }
        return options
    }

    private func advertise(_ session: Terminals.Session, shell: TerminalShells.Shell, host: String) async throws -> String {
        let type = try await activities.sourceType(Terminals.type, app: Terminals.app, options: ["title": "Terminal", "required_keys": "cwd"])
        var options = options(session, host: host)
        options["persistent_id"] = Self.bootID + "-" + shell.key
        let advertisement = try Advertisement.parse(type: type, title: title(session, shell), payload: session.payload, options: options, limits: limits)
        let now = store.wallClock.now()
        let outcome = try await activities.advertise(
            advertisement.makeActivity(id: Identifier.make(at: now), type: type, sceneID: nil, now: now), requestID: nil, quota: limits.liveActivitiesPerApp)
        announcements.announce(outcome)
        return outcome.id
    }

    /// Updates `id` to `session`; false when it is gone (ended or forgotten meanwhile).
    private func update(_ id: String, to session: Terminals.Session, shell: TerminalShells.Shell, host: String) async throws -> Bool {
        var changes = options(session, host: host)
        changes["eligible_for_search"] = nil
        changes["title"] = title(session, shell)
        changes["replace_payload"] = "true"
        if session.host != nil { changes["target_content_id"] = "" }
        let update = try ActivityUpdate(payload: session.payload, options: changes, limits: limits)
        do {
            announcements.announce(try await activities.update(id, requestID: nil, now: store.wallClock.now()) { activity, lookups, now in
                guard let type = try lookups.activityType(activity.type) else { throw BatonError.unknownActivityType(activity.type) }
                return (try update.apply(to: activity, type: type, now: now, limits: lookups.limits), false)
            })
            return true
        } catch let error as BatonError where error.code == .notFound || error.code == .expired || error.code == .unknownActivityType {
            return false
        }
    }

    static var bootID: String { TerminalShells.bootID }

    /// Makes `directory` and its parent, the user's only; false when it cannot be.
    static func makeDirectories(_ directory: String) -> Bool {
        let parent = String(directory[..<(directory.lastIndex(of: "/") ?? directory.endIndex)])
        mkdir(parent, 0o700)
        mkdir(directory, 0o700)
        var info = stat()
        return stat(directory, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR && info.st_uid == getuid()
    }
}
