import Crypto
import FoundationEssentials
import Glibc

/// This device's sync settings and secrets, in `sync.json` beside the database, 0600: the
/// server's URL (with this device's password), the user, this device's id and name, the
/// user's key and this device's private key. Kept out of the database so that a copy of the
/// database (a backup, an export, a bug report) never carries the key.
public struct SyncConfig: Codable, Sendable, Equatable {
    public var url: String
    /// What `url` names: `folder` (a `file://` URL or a path) or `postgresql`.
    public var transport: String { FolderTransport.folder(in: url) == nil ? "postgresql" : "folder" }
    /// The synced folder the devices meet in; nil when they meet on a server.
    public var folder: String? { FolderTransport.folder(in: url) }
    public var user: String
    public var deviceID: String
    public var deviceName: String
    /// The user's key (`UserKey.bytes`), hex.
    public var userKey: String
    /// This device's X25519 private key, hex.
    public var deviceKey: String
    /// The keys of the epochs after the first (after revocations), hex, by epoch; nil before any.
    public var epochKeys: [String: String]?

    /// The file beside `database`.
    public static func path(besideDatabase database: String) -> String {
        let directory = database.lastIndex(of: "/").map { String(database[..<$0]) } ?? "."
        return directory + "/sync.json"
    }

    /// The settings in `path`, or nil when there is no such file (sync is off).
    public static func load(from path: String) throws(SyncError) -> SyncConfig? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        do {
            return try JSONDecoder().decode(SyncConfig.self, from: data)
        } catch {
            throw .state("\(path) is damaged (\(error)); move it away and join this device again with `baton sync join`")
        }
    }

    /// Writes the file 0600 and moves it into place, so a crash leaves the old one or the new one.
    public func save(to path: String) throws(SyncError) {
        let temporary = path + ".new"
        do {
            let data = try JSONEncoder().encode(self)
            let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else { throw SyncError.state("cannot write \(temporary): errno \(errno)") }
            defer { close(fd) }
            let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard written == data.count, fchmod(fd, 0o600) == 0, fsync(fd) == 0 else {
                throw SyncError.state("cannot write \(temporary): errno \(errno)")
            }
            guard rename(temporary, path) == 0 else { throw SyncError.state("cannot move \(temporary) to \(path): errno \(errno)") }
        } catch let error as SyncError {
            throw error
        } catch {
            throw .state("cannot save the sync settings: \(error)")
        }
    }

    var userKeyValue: UserKey? { Hex.decode(userKey).map(UserKey.init(bytes:)) }

    /// The same device on the same server (its keys may differ: a new epoch's was added).
    func isSameDevice(as other: SyncConfig) -> Bool {
        deviceID == other.deviceID && url == other.url
    }

    /// The newest epoch this device has the key of: the one it seals with.
    var currentEpoch: Int32 { (epochKeys ?? [:]).keys.compactMap { Int32($0) }.max() ?? 0 }

    /// The key of `epoch`, when this device has it.
    func key(epoch: Int32) -> SymmetricKey? {
        if epoch == 0 { return userKeyValue?.epochZeroKey }
        return epochKeys?[String(epoch)].flatMap(Hex.decode).map { SymmetricKey(data: $0) }
    }
    var deviceKeyValue: DeviceKey? { Hex.decode(deviceKey).flatMap { try? DeviceKey(rawRepresentation: $0) } }
}

enum Hex {
    static func encode(_ bytes: [UInt8]) -> String {
        bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    static func decode(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }
}

/// A sync URL: `postgres://ROLE:PASSWORD@HOST:PORT/DATABASE`, as `scripts/sync-server-setup add-device` prints it,
/// with libpq's `sslmode` (`disable`, `prefer` — the default —, `require`, `verify-full`) and `sslrootcert`.
struct ServerAddress: Equatable {
    var host: String
    var port: Int
    var role: String
    var password: String
    var database: String
    var tls: TLSMode

    /// How the connection is encrypted, as libpq's `sslmode` names it.
    enum TLSMode: Equatable {
        /// Plain TCP.
        case disable
        /// TLS when the server offers it, without checking its certificate (libpq's default).
        case prefer
        /// TLS or no connection, without checking the certificate (libpq's `require`).
        case require
        /// TLS with the certificate checked against `rootCertificates` (or the system's) and the host name.
        case verifyFull(rootCertificates: String?)
    }

    init(_ url: String) throws(SyncError) {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme ?? ""),
              let host = components.host, !host.isEmpty, let role = components.user, !role.isEmpty else {
            throw .server("\"\(url)\" is not a sync URL like postgres://ROLE:PASSWORD@HOST:5432/DATABASE")
        }
        self.host = host
        port = components.port ?? 5432
        self.role = role
        password = components.password ?? ""
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        database = path.isEmpty ? self.role : path
        let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        switch query["sslmode"] ?? "prefer" {
        case "disable": tls = .disable
        case "prefer", "allow": tls = .prefer
        case "require": tls = .require
        case "verify-full", "verify-ca": tls = .verifyFull(rootCertificates: query["sslrootcert"])
        case let other: throw .server("sslmode=\(other) is not one of disable, prefer, require, verify-full")
        }
    }
}
