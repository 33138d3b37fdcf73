import BatonCore
import DBus

/// The part of MPRIS 2 (the Media Player Remote Interfacing Specification) that batond's media
/// source and `baton serve-media` use: every player on the session bus owns a name
/// `org.mpris.MediaPlayer2.*` and serves `/org/mpris/MediaPlayer2`. Players differ in what they
/// send (FIELD-NOTES: Rhythmbox types `mpris:trackid` `s` and counts whole seconds; Totem gives
/// no URL), so every value is read leniently.
public enum MPRIS {
    /// The names players own are below this one.
    public static let namespace = "org.mpris.MediaPlayer2"
    public static let path: ObjectPath = "/org/mpris/MediaPlayer2"
    /// The root interface: `DesktopEntry`, `Identity`.
    public static let root = "org.mpris.MediaPlayer2"
    /// `OpenUri`, `SetPosition`, `Seeked`; `Metadata`, `PlaybackStatus`, `Position`, `CanSeek`.
    public static let player = "org.mpris.MediaPlayer2.Player"

    /// Whether `name` is a player's bus name.
    public static func isPlayer(_ name: String) -> Bool { name.hasPrefix(namespace + ".") }

    /// What a player's `org.mpris.MediaPlayer2.Player` properties say (`GetAll`).
    public struct PlayerState: Equatable, Sendable {
        /// `xesam:url`; nil when the player gives none (Totem) or plays nothing.
        public var url: String?
        public var title: String?
        public var artists: [String] = []
        /// `mpris:length` in microseconds; 0 when not given.
        public var lengthUS: Int64 = 0
        /// `mpris:trackid`, as text (an object path, or a string from players that send one).
        public var trackID: String?
        /// `Playing`, `Paused` or `Stopped`.
        public var status = "Stopped"
        /// `Position` in microseconds, when it was read.
        public var positionUS: Int64 = 0
        public var canSeek = false

        public init(url: String? = nil, status: String = "Stopped", positionUS: Int64 = 0) {
            self.url = url
            self.status = status
            self.positionUS = positionUS
        }

        public init(properties: [String: DBusValue]) {
            let metadata = properties["Metadata"]?.unwrapped.stringKeyedValue ?? [:]
            url = metadata["xesam:url"]?.unwrapped.stringValue.flatMap { $0.isEmpty ? nil : $0 }
            title = metadata["xesam:title"]?.unwrapped.stringValue
            switch metadata["xesam:artist"]?.unwrapped {
            case .array(_, let names)?: artists = names.compactMap(\.stringValue)
            case .string(let name)?: artists = [name]
            default: artists = []
            }
            lengthUS = metadata["mpris:length"].flatMap { MPRIS.integer($0) } ?? 0
            trackID = metadata["mpris:trackid"]?.unwrapped.stringValue
            status = properties["PlaybackStatus"]?.unwrapped.stringValue ?? "Stopped"
            positionUS = properties["Position"].flatMap { MPRIS.integer($0) } ?? 0
            canSeek = properties["CanSeek"]?.unwrapped.boolValue ?? false
        }

        public var isPlaying: Bool { status == "Playing" }
    }

    /// A whole number of any integer type (or a double), as players send `x`, `t`, `i` or `u`.
    public static func integer(_ value: DBusValue) -> Int64? {
        switch value.unwrapped {
        case .int64(let v): v
        case .uint64(let v): Int64(clamping: v)
        case .int32(let v): Int64(v)
        case .uint32(let v): Int64(v)
        case .double(let v) where v.isFinite: Int64(v)
        default: nil
        }
    }

    // MARK: Asking players

    /// The players on the bus now: the names they own and their unique names.
    public static func players(on connection: Connection) async -> [(name: String, owner: String)] {
        let bus = (name: "org.freedesktop.DBus", path: ObjectPath("/org/freedesktop/DBus"))
        guard let names = try? await connection.call(bus.name, bus.path, bus.name, "ListNames").first?.arrayValue else { return [] }
        var found: [(name: String, owner: String)] = []
        for name in names.compactMap(\.stringValue) where isPlayer(name) {
            if let owner = try? await connection.call(bus.name, bus.path, bus.name, "GetNameOwner", [.string(name)]).first?.stringValue {
                found.append((name, owner))
            }
        }
        return found
    }

    /// A player's `Player` properties; nil when it does not answer (gone, or not a player after all).
    public static func state(of owner: String, on connection: Connection) async -> PlayerState? {
        guard let reply = try? await connection.call(
            owner, path, "org.freedesktop.DBus.Properties", "GetAll", [.string(player)], timeout: .seconds(2)
        ).first?.stringKeyedValue else { return nil }
        return PlayerState(properties: reply)
    }

    /// The desktop id the player names (`DesktopEntry`), without `.desktop`; empty when none.
    public static func desktopEntry(of owner: String, on connection: Connection) async -> String {
        let reply = try? await connection.call(
            owner, path, "org.freedesktop.DBus.Properties", "Get", [.string(root), .string("DesktopEntry")], timeout: .seconds(2))
        return RecentlyUsed.entryName(reply?.first?.unwrapped.stringValue ?? "")
    }

    /// `SetPosition`'s track id: an object path, as the specification types it, also when the
    /// player gave it as a string; nil when it is not a valid path (then the player cannot be sought).
    public static func trackPath(_ trackID: String?) -> ObjectPath? {
        trackID.flatMap { try? ObjectPath(validating: $0) }
    }
}
