import BatonCore
import Crypto
import FoundationEssentials
import Glibc
import Logging
import Synchronization

/// Sync through a folder that a sync tool (Syncthing, Nextcloud, …) keeps the same on every
/// machine: the user's devices meet there as they do on the server, and each writes only
/// files of its own, so the tool never meets a conflict.
///
///     baton-sync.json            the user and the check value of its first key (the first machine's, written once)
///     DEVICE/device.json         its public key, sealed name, the name's epoch, when last seen (replaced, never rewritten)
///     DEVICE/log-FIRST-LAST      its sealed records FIRST…LAST (written once; dropped once a
///                                later snapshot of its state supersedes them, `compactionFiles`)
///     DEVICE/key-EPOCH.check     the check value of a key epoch it began (a revocation)
///     DEVICE/key-EPOCH.for-OTHER that key, wrapped to OTHER
///     DEVICE/revoked-OTHER       it revoked OTHER
///
/// Every file is written under a hidden temporary name and renamed into place, as sync tools
/// expect; what they leave (hidden or `~` names, `.tmp`, `.part`, `.sync-conflict-` copies)
/// is never read. What the files say is sealed with the user's key or public, as on the
/// server: a forged record fails to open and is never applied.
struct FolderTransport: SyncTransport {
    let path: String
    /// This device, once it has joined (nil while `Init`/`Join` sets it up).
    let me: String?
    let log: Logger
    let now: @Sendable () -> UInt64
    /// The user a folder without `baton-sync.json` gets at `Init`: the same for every call of this transport.
    private let newUser = "folder-" + Identifier.make()
    /// The files said to be skipped, each said once.
    private let skipped = SaidOnce()

    init(path: String, me: String?, log: Logger, now: @escaping @Sendable () -> UInt64) {
        self.path = path
        self.me = me
        self.log = log
        self.now = now
    }

    /// The folder a sync URL names: `file:///PATH`, or a plain absolute path; nil for other URLs.
    static func folder(in url: String) -> String? {
        if url.hasPrefix("/") { return url }
        guard let components = URLComponents(string: url), components.scheme == "file", components.host ?? "" == "" else { return nil }
        let folder = components.path
        return folder.hasPrefix("/") ? folder : nil
    }

    /// Gone (an unmounted disk): the engine starts over, and finds it when it is back.
    var isClosed: Bool { access(path, F_OK) != 0 }
    var closedReason: String { "the sync folder \(path) is not there (a disk not mounted?); sync resumes when it is" }

    func listening<T: Sendable>(on channel: String, notified: @escaping @Sendable () -> Void, _ body: () async throws -> T) async throws -> T {
        try checkFolder()
        let watcher = try DirectoryWatcher([path] + deviceDirectories().map { path + "/" + $0 }) { !Self.isIgnored($0) }
        let listener = Task { [path] in
            for await _ in watcher.changes {
                // A device that joined since: its files are watched from now on.
                for device in (try? Self.deviceDirectories(in: path)) ?? [] { try? watcher.watch(path + "/" + device) }
                notified()
            }
            notified()
        }
        defer {
            watcher.stop()
            listener.cancel()
        }
        return try await body()
    }

    // MARK: Logs

    func append(user: String, device: String, epoch: Int32, seqs: [Int64], hlcs: [Int64], sealed: [[UInt8]]) async throws {
        guard let first = seqs.first, let last = seqs.last else { return }
        // Written again when the commit that took it as sent was lost: the same records, replaced
        // whole by the rename (and a file someone else put there under this name is replaced too).
        let name = "\(device)/log-\(Self.number(first))-\(Self.number(last))"
        try write(Self.logFile(seqs.indices.map { (seqs[$0], epoch, hlcs[$0], sealed[$0]) }), to: name)
    }

    /// A log file's bytes: the magic line, then each record's seq, epoch, hlc, length and sealed body.
    private static func logFile(_ records: [(Int64, Int32, Int64, [UInt8])]) -> [UInt8] {
        var bytes = Array(logMagic.utf8)
        for (seq, epoch, hlc, body) in records {
            append(UInt64(bitPattern: seq), bytes: 8, to: &bytes)
            append(UInt64(UInt32(bitPattern: epoch)), bytes: 4, to: &bytes)
            append(UInt64(bitPattern: hlc), bytes: 8, to: &bytes)
            append(UInt64(body.count), bytes: 4, to: &bytes)
            bytes += body
        }
        return bytes
    }

    /// The file holding `seq` is written again with the placeholder in its place: a reader of a
    /// folder's log waits at a gap (a file not synced yet), so a record is replaced, not deleted.
    func removeRecord(user: String, device: String, seq: Int64, placeholder: (Int32) throws -> [UInt8]) async throws -> Bool {
        guard let file = try logFiles(of: device).first(where: { $0.first <= seq && seq <= $0.last }),
              var records = readLog(device + "/" + file.name), let index = records.firstIndex(where: { $0.0 == seq }) else {
            return true  // not there (dropped by a compaction): nothing to remove
        }
        records[index].3 = try placeholder(records[index].1)
        try write(Self.logFile(records), to: device + "/" + file.name)
        return true
    }

    func logHeads(user: String) async throws -> [String: Int64] {
        try checkFolder()
        var heads: [String: Int64] = [:]
        for device in try deviceDirectories() {
            if let head = try logFiles(of: device).map(\.last).max() { heads[device] = head }
        }
        return heads
    }

    func records(user: String, device: String, after seq: Int64, limit: Int) async throws -> [(Int64, Int32, Int64, [UInt8])] {
        var records: [(Int64, Int32, Int64, [UInt8])] = []
        var next = seq + 1
        let files = try logFiles(of: device).sorted(by: { $0.first < $1.first })
        // Compacted: the records before its log's start are gone, and superseded by what follows.
        if let start = readDevice(device)?.logStart, next < start, !files.contains(where: { $0.first <= next && next <= $0.last }) {
            next = start
        }
        for file in files where file.last >= next {
            // A file not here yet (the sync tool brings files in any order): what follows waits for it.
            guard file.first <= next else { break }
            guard let batch = readLog(device + "/" + file.name) else { continue }
            for record in batch where record.0 == next && records.count < limit {
                records.append(record)
                next += 1
            }
            if records.count == limit { break }
        }
        return records
    }

    /// How many log files a device keeps before it compacts them.
    static let compactionFiles = 64

    func wantsCompaction(user: String, device: String) async throws -> Bool {
        try logFiles(of: device).count > Self.compactionFiles
    }

    /// Says where the log starts now (in `device.json`, first), then deletes the files before.
    func dropLog(user: String, device: String, through seq: Int64) async throws {
        guard var file = readDevice(device) else { return }
        file.logStart = max(file.logStart ?? 0, seq + 1)
        try writeDevice(device, file)
        for log in try logFiles(of: device) where log.last <= seq { unlink(path + "/" + device + "/" + log.name) }
    }

    // MARK: Devices

    func member(role: String) async throws -> String {
        try checkFolder()
        return try readRoot()?.user ?? newUser
    }

    func addDevice(user: String, id: String, publicKey: [UInt8], sealedName: [UInt8]) async throws {
        guard Self.isDeviceName(id) else { throw SyncError.state("\(id) is not a device id") }
        guard mkdir(path + "/" + id, 0o700) == 0 || errno == EEXIST else {
            throw SyncError.server("cannot make \(path)/\(id): \(String(cString: strerror(errno)))")
        }
        let time = now()
        try writeDevice(id, DeviceFile(publicKey: Hex.encode(publicKey), sealedName: Hex.encode(sealedName), nameEpoch: 0,
                                       lastSeen: time, joinedAt: time))
    }

    func touch(user: String, device: String) async throws {
        guard var file = readDevice(device) else { return }
        file.lastSeen = now()
        try writeDevice(device, file)
    }

    func devices(_ config: SyncConfig) async throws -> [SyncEngine.Device] {
        let revoked = Set(try deviceDirectories().flatMap { device in
            try entries(of: device).filter { $0.hasPrefix("revoked-") }.map { String($0.dropFirst("revoked-".count)) }
        })
        return try deviceDirectories().compactMap { id -> (SyncEngine.Device, UInt64)? in
            guard let file = readDevice(id), let sealedName = Hex.decode(file.sealedName), let publicKey = Hex.decode(file.publicKey) else {
                return nil
            }
            let name = config.key(epoch: file.nameEpoch).flatMap { key in
                Seal.open(sealedName, key: key, context: Seal.nameContext(user: config.user, device: id))
            }.map { String(decoding: $0, as: UTF8.self) } ?? SyncEngine.unreadableName
            return (SyncEngine.Device(id: id, name: name, lastSeen: file.lastSeen, revoked: revoked.contains(id), isThisDevice: id == config.deviceID,
                                      publicKey: publicKey, nameEpoch: file.nameEpoch), file.joinedAt)
        }.sorted { ($0.1, $0.0.id) < ($1.1, $1.0.id) }.map(\.0)
    }

    func storeName(user: String, device: String, sealed: [UInt8], epoch: Int32) async throws {
        guard var file = readDevice(device) else { throw SyncError.state("device \(device) has no device.json in \(path)") }
        file.sealedName = Hex.encode(sealed)
        file.nameEpoch = epoch
        try writeDevice(device, file)
    }

    // MARK: Keys

    func addUserKey(user: String, epoch: Int32, check: [UInt8]) async throws {
        guard epoch == 0 else { throw SyncError.state("a folder's later keys begin with a revocation") }
        guard try readRoot() == nil else { throw KeyExists() }
        let root = try JSONEncoder().encode(Root(format: 1, user: user, check: Hex.encode(check)))
        try write(Array(root), to: Self.rootName)
    }

    func userKeyCheck(user: String, epoch: Int32) async throws -> [UInt8]? {
        if epoch == 0 {
            guard let root = try readRoot(), root.user == user, let check = Hex.decode(root.check) else { return nil }
            return check
        }
        for device in try deviceDirectories() {
            if let check = read(device + "/key-\(epoch).check") { return check }
        }
        return nil
    }

    func newestEpoch(user: String) async throws -> Int32 {
        try deviceDirectories().flatMap { device in
            try entries(of: device).compactMap { name -> Int32? in
                guard name.hasPrefix("key-"), name.hasSuffix(".check") else { return nil }
                return Int32(name.dropFirst("key-".count).dropLast(".check".count))
            }
        }.max() ?? 0
    }

    func wrappedKey(user: String, epoch: Int32, device: String) async throws -> [UInt8]? {
        for writer in try deviceDirectories() {
            if let wrapped = read(writer + "/key-\(epoch).for-\(device)") { return wrapped }
        }
        return nil
    }

    func keyHolders(user: String, epoch: Int32) async throws -> Set<String> {
        let prefix = "key-\(epoch).for-"
        return Set(try deviceDirectories().flatMap { device in
            try entries(of: device).filter { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
        })
    }

    func storeWrappedKey(_ wrapped: [UInt8], epoch: Int32, for device: String, user: String) async throws {
        try write(wrapped, to: "\(try own())/key-\(epoch).for-\(device)")
    }

    /// The new epoch's check value is written last: an epoch is there only once its keys are.
    func revoke(_ revoked: String, keepers: [SyncEngine.Device], newKey: SymmetricKey, sealedName: [UInt8], config: SyncConfig) async throws -> Int32 {
        let me = try own()
        let epoch = try await newestEpoch(user: config.user) + 1
        for device in keepers {
            let wrapped = try DeviceKey.wrap(newKey, to: device.publicKey, user: config.user, device: device.id, epoch: epoch)
            try write(wrapped, to: "\(me)/key-\(epoch).for-\(device.id)")
        }
        try write(Array(String(now()).utf8), to: "\(me)/revoked-\(revoked)")
        try await storeName(user: config.user, device: me, sealed: sealedName, epoch: epoch)
        try write(try Seal.seal(Seal.checkText, key: newKey, context: Seal.checkContext(user: config.user, epoch: epoch)), to: "\(me)/key-\(epoch).check")
        return epoch
    }

    // MARK: Files

    static let rootName = "baton-sync.json"
    private static let logMagic = "baton-log 1\n"

    private struct Root: Codable {
        var format: Int
        var user: String
        var check: String
    }

    private struct DeviceFile: Codable {
        var publicKey: String
        var sealedName: String
        var nameEpoch: Int32
        var lastSeen: UInt64
        var joinedAt: UInt64
        /// The first seq of its log still kept (compaction dropped those before); nil: all are.
        var logStart: Int64?
    }

    private func own() throws -> String {
        guard let me else { throw SyncError.state("this device has not joined the folder's devices") }
        return me
    }

    private func checkFolder() throws {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw SyncError.server("the sync folder \(path) is not there (a disk not mounted?); sync resumes when it is")
        }
        guard access(path, W_OK) == 0 else { throw SyncError.server("the sync folder \(path) is not writable; sync resumes when it is") }
    }

    private func readRoot() throws -> Root? {
        guard let bytes = read(Self.rootName) else { return nil }
        guard let root = try? JSONDecoder().decode(Root.self, from: Data(bytes)) else {
            throw SyncError.state("""
                \(path)/\(Self.rootName) is not whole: your sync tool may still be bringing it (try again once it is done), \
                or it is damaged
                """)
        }
        return root
    }

    private func readDevice(_ id: String) -> DeviceFile? {
        read(id + "/device.json").flatMap { try? JSONDecoder().decode(DeviceFile.self, from: Data($0)) }
    }

    private func writeDevice(_ id: String, _ file: DeviceFile) throws {
        try write(Array(try JSONEncoder().encode(file)), to: id + "/device.json")
    }

    /// The records of one log file; nil (and said once) when it is not one.
    private func readLog(_ name: String) -> [(Int64, Int32, Int64, [UInt8])]? {
        guard let bytes = read(name) else { return nil }
        let magic = Array(Self.logMagic.utf8)
        guard bytes.starts(with: magic) else {
            if skipped.first(name + " not a log") {
                log.warning("sync: skipped \(path)/\(name): not a log of Baton's; that device's later records wait behind it")
            }
            return nil
        }
        var records: [(Int64, Int32, Int64, [UInt8])] = []
        var offset = magic.count
        while offset < bytes.count {
            guard offset + 24 <= bytes.count else { break }
            let seq = Int64(bitPattern: Self.number(bytes, at: offset, bytes: 8))
            let epoch = Int32(bitPattern: UInt32(Self.number(bytes, at: offset + 8, bytes: 4)))
            let hlc = Int64(bitPattern: Self.number(bytes, at: offset + 12, bytes: 8))
            let length = Int(Self.number(bytes, at: offset + 20, bytes: 4))
            guard offset + 24 + length <= bytes.count else { break }
            records.append((seq, epoch, hlc, Array(bytes[(offset + 24)..<(offset + 24 + length)])))
            offset += 24 + length
        }
        guard offset == bytes.count else {
            if skipped.first(name + " cut short") {
                log.warning("sync: skipped \(path)/\(name): it is cut short; that device's later records wait behind it")
            }
            return nil
        }
        return records
    }

    private func logFiles(of device: String) throws -> [(name: String, first: Int64, last: Int64)] {
        try entries(of: device).compactMap { name in
            let parts = name.split(separator: "-")
            guard parts.count == 3, parts[0] == "log", let first = Int64(parts[1]), let last = Int64(parts[2]), first <= last else { return nil }
            return (name, first, last)
        }
    }

    private func deviceDirectories() throws -> [String] {
        try Self.deviceDirectories(in: path)
    }

    private static func deviceDirectories(in path: String) throws -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else {
            throw SyncError.server("the sync folder \(path) is not there or cannot be read; sync resumes when it can")
        }
        return names.filter { name in
            var info = stat()
            return isDeviceName(name) && stat(path + "/" + name, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
        }
    }

    private func entries(of device: String) throws -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path + "/" + device)) ?? []).filter { !Self.isIgnored($0) }
    }

    /// A device's id as `Identifier.make` spells it: letters, digits and dashes.
    private static func isDeviceName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64 && name.utf8.allSatisfy { $0 == UInt8(ascii: "-") || ($0 >= 48 && $0 <= 57) || ($0 | 0x20 >= 97 && $0 | 0x20 <= 122) }
    }

    /// What a sync tool or an editor leaves: never Baton's.
    static func isIgnored(_ name: String) -> Bool {
        SyncedFolderNames.isLeftByTools(name)
    }

    private func read(_ name: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path + "/" + name).map(Array.init)
    }

    /// Writes `bytes` as `name` (relative to the folder): under a hidden name, synced to disk,
    /// then renamed into place.
    private func write(_ bytes: [UInt8], to name: String) throws {
        try checkFolder()
        let final = path + "/" + name
        let directory = String(final[..<(final.lastIndex(of: "/") ?? final.endIndex)])
        let temporary = directory + "/.baton-" + Identifier.make() + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw failure(writing: final, errno) }
        // The errno of the step that failed, if one did.
        let failed = bytes.withUnsafeBytes { buffer -> Int32? in
            var offset = 0
            while offset < buffer.count, let base = buffer.baseAddress {
                let count = Glibc.write(fd, base + offset, buffer.count - offset)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return count < 0 ? errno : ENOSPC }
                offset += count
            }
            return fsync(fd) == 0 ? nil : errno
        }
        close(fd)
        if let failed {
            unlink(temporary)
            throw failure(writing: final, failed)
        }
        guard rename(temporary, final) == 0 else {
            let failed = errno
            unlink(temporary)
            throw failure(writing: final, failed)
        }
    }

    /// Why `final` could not be written: the folder gone (moved, unmounted) under the write, or `code`.
    private func failure(writing final: String, _ code: Int32) -> SyncError {
        isClosed ? SyncError.server(closedReason) : SyncError.server("cannot write \(final): \(String(cString: strerror(code)))")
    }

    /// Names already said, so that each is said once.
    final class SaidOnce: Sendable {
        private let said = Mutex<Set<String>>([])

        /// True the first time `name` is given.
        func first(_ name: String) -> Bool {
            said.withLock { $0.insert(name).inserted }
        }
    }

    private static func append(_ value: UInt64, bytes count: Int, to bytes: inout [UInt8]) {
        for shift in stride(from: (count - 1) * 8, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    private static func number(_ bytes: [UInt8], at offset: Int, bytes count: Int) -> UInt64 {
        bytes[offset..<(offset + count)].reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// A seq in a file name: fixed width, so that names sort as numbers do.
    private static func number(_ seq: Int64) -> String {
        let digits = String(seq)
        return String(repeating: "0", count: max(0, 12 - digits.count)) + digits
    }
}
