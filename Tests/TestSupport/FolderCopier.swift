import BatonCore
import Foundation
import Glibc
import Synchronization

/// A sync tool between two folders, woken by inotify: each file written or replaced in one
/// (one that `ignoring` does not name) arrives in the other `delay` later, first under a
/// temporary name (`.syncthing.NAME.tmp`), then renamed into place, as Syncthing does; a file
/// it brought that is deleted in one goes from the other. Its harder ways, on demand: files
/// in the reverse of their names' order (`outOfOrder`: a later log before an earlier one), and
/// each first half-written under its own name (`partialFirst`, as a tool that writes in place).
public final class FolderCopier: Sendable {
    public struct Options: Sendable {
        public var delay: Duration = .milliseconds(30)
        public var outOfOrder = false
        public var partialFirst = false
        public init() {}
    }

    private final class State: Sendable {
        let copied = Atomic(0)
        /// What it brought into each folder (relative paths), to delete when its source goes.
        let brought = Mutex<[String: Set<String>]>([:])
    }
    private let state = State()
    /// Files copied so far.
    public var copied: Int { state.copied.load(ordering: .relaxed) }
    private let watchers: [DirectoryWatcher]
    private let tasks: [Task<Void, Never>]

    public init(_ first: String, _ second: String, options: Options = Options(), ignoring: @escaping @Sendable (String) -> Bool) throws {
        var watchers: [DirectoryWatcher] = []
        var tasks: [Task<Void, Never>] = []
        let state = self.state
        for (from, to) in [(first, second), (second, first)] {
            let watcher = try DirectoryWatcher([from]) { !ignoring($0) }
            watchers.append(watcher)
            tasks.append(Task {
                for await _ in watcher.changes {
                    try? await Task.sleep(for: options.delay)
                    await Self.copy(from: from, to: to, watcher: watcher, options: options, ignoring: ignoring, state: state)
                }
            })
        }
        self.watchers = watchers
        self.tasks = tasks
    }

    public func stop() {
        for watcher in watchers { watcher.stop() }
        for task in tasks { task.cancel() }
    }

    /// Brings each file of `from` (and of its directories, one level down) that `to` lacks or
    /// has otherwise, and deletes from `to` what it brought there that `from` no longer has.
    private static func copy(from: String, to: String, watcher: DirectoryWatcher, options: Options, ignoring: (String) -> Bool, state: State) async {
        let files = FileManager.default
        var paths: [String] = []
        for name in (try? files.contentsOfDirectory(atPath: from)) ?? [] where !ignoring(name) {
            var isDirectory: ObjCBool = false
            guard files.fileExists(atPath: from + "/" + name, isDirectory: &isDirectory) else { continue }
            if isDirectory.boolValue {
                try? watcher.watch(from + "/" + name)
                mkdir(to + "/" + name, 0o700)
                paths += ((try? files.contentsOfDirectory(atPath: from + "/" + name)) ?? []).filter { !ignoring($0) }.map { name + "/" + $0 }
            } else {
                paths.append(name)
            }
        }
        paths.sort(by: options.outOfOrder ? (>) : (<))
        // What it brought into `from` is not `from`'s own: never carried back (a half-written one least of all).
        let broughtHere = state.brought.withLock { $0[from] ?? [] }
        for path in paths where !broughtHere.contains(path) {
            guard let bytes = files.contents(atPath: from + "/" + path), files.contents(atPath: to + "/" + path) != bytes else { continue }
            _ = state.brought.withLock { $0[to, default: []].insert(path) }
            if options.partialFirst {
                _ = files.createFile(atPath: to + "/" + path, contents: bytes.prefix(bytes.count / 2))
                await Task.yield()
            }
            let slash = path.lastIndex(of: "/")
            let directory = slash.map { String(path[..<$0]) + "/" } ?? ""
            let temporary = to + "/" + directory + ".syncthing." + (slash.map { String(path[path.index(after: $0)...]) } ?? path) + ".tmp"
            guard files.createFile(atPath: temporary, contents: bytes), rename(temporary, to + "/" + path) == 0 else { continue }
            state.copied.add(1, ordering: .relaxed)
        }
        let present = Set(paths)
        let gone = state.brought.withLock { brought in
            let gone = (brought[to] ?? []).subtracting(present)
            brought[to]?.subtract(gone)
            return gone
        }
        for path in gone where files.fileExists(atPath: from + "/" + path) == false { unlink(to + "/" + path) }
    }
}
