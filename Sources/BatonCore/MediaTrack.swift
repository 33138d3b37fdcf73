import Glibc

/// A track a media player plays, as the media source records it (`org.baton.media.track`):
/// its payload `{"url", "position_us", "length_us", "player"}` and its title, and where it can
/// be played again. Read by batond (which writes it) and `baton serve-media` (which plays it).
public struct MediaTrack: Equatable, Sendable {
    /// The track's URL as the player gave it (`xesam:url`): a percent-encoded `file://` URI or a stream's.
    public var url: String
    /// Where the player was, in microseconds from the start.
    public var positionUS: Int64
    /// The track's length in microseconds; 0 when the player did not say.
    public var lengthUS: Int64
    /// The player's desktop id without `.desktop` (MPRIS `DesktopEntry`: "mpv"); empty when it gave none.
    public var player: String
    /// Whether it was playing when written: false once paused, stopped, or the player quit,
    /// which is when another machine offers to continue it.
    public var playing: Bool

    public init(url: String, positionUS: Int64, lengthUS: Int64, player: String, playing: Bool = false) {
        self.url = url
        self.positionUS = positionUS
        self.lengthUS = lengthUS
        self.player = player
        self.playing = playing
    }

    /// The track in an activity's payload; nil when the payload has no URL.
    public init?(payload: String) {
        guard let members = try? StrictJSON.parseObject(payload, maxBytes: .max, maxDepth: 8), let url = members.string("url") else { return nil }
        self.url = url
        positionUS = members.number("position_us").map { Int64(clamping: Int($0)) } ?? 0
        lengthUS = members.number("length_us").map { Int64(clamping: Int($0)) } ?? 0
        player = members.string("player") ?? ""
        playing = members.first { $0.key == "playing" }?.rawValue == "true"
    }

    public var payload: String {
        "{\"url\":\(StrictJSON.quote(url)),\"position_us\":\(positionUS),\"length_us\":\(lengthUS),\"player\":\(StrictJSON.quote(player)),"
            + "\"playing\":\(playing)}"
    }

    /// The file the URL names on this machine; nil for a stream.
    public var localPath: String? { RecentlyUsed.localPath(url) }

    /// The URL's last part, decoded, without a query: the file's name ("a tone.wav"); empty when none.
    public var fileName: String { Self.fileName(in: url) }

    static func fileName(in url: String) -> String {
        let path = url.split(separator: "?").first.map(String.init) ?? url
        return path.split(separator: "/").last.map { RecentlyUsed.percentDecoded(String($0)) } ?? ""
    }

    /// A stream on the web: its URL is the activity's web page too.
    public var isWebStream: Bool { url.hasPrefix("http://") || url.hasPrefix("https://") }

    /// The title as a person says it: "Title — Artist", the title alone, else the file's name
    /// (the URL's last part, decoded), else the URL.
    public static func title(title: String?, artists: [String], url: String) -> String {
        let title = title.map { String($0[...].trimmingSpaces) } ?? ""
        let artist = artists.map { String($0[...].trimmingSpaces) }.filter { !$0.isEmpty }.joined(separator: ", ")
        if !title.isEmpty { return artist.isEmpty ? title : "\(title) — \(artist)" }
        let name = fileName(in: url)
        return name.isEmpty ? url : name
    }

    /// A position as a player shows it: "1:02:03", "12:34", "0:05".
    public static func clockText(_ microseconds: Int64) -> String {
        let seconds = max(0, microseconds / 1_000_000)
        let (hours, minutes, rest) = (seconds / 3600, seconds / 60 % 60, seconds % 60)
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return hours > 0 ? "\(hours):\(two(minutes)):\(two(rest))" : "\(minutes):\(two(rest))"
    }

    /// The app that plays it here: the player that played it when its desktop entry is
    /// installed, else the default app for the file's type (`DefaultApps`), else the first
    /// installed app (by id) that opens audio or video; nil when none.
    public func app(in applicationDirectories: [String], configDirectories: [String] = []) -> DesktopApp? {
        if !player.isEmpty, let app = DesktopApp.find(id: player, in: applicationDirectories) { return app }
        if let app = DefaultApps.app(forFileNamed: fileName, configDirectories: configDirectories, applicationDirectories: applicationDirectories) {
            return app
        }
        return DesktopApp.all(in: applicationDirectories).first { app in
            app.exec != nil && app.mimeTypes.contains { $0.hasPrefix("audio/") || $0.hasPrefix("video/") }
        }
    }

    /// Why it cannot be played here, or nil when it can: its file is not on this machine, or no
    /// app here plays it.
    public func obstacle(applicationDirectories: [String]) -> String? {
        if let path = localPath {
            guard access(path, F_OK) == 0 else { return "the file \(path) is not on this machine" }
        } else if !url.contains("://") {
            return "its address \(url) is not a URL"
        }
        guard app(in: applicationDirectories) != nil else {
            return player.isEmpty ? "no media player is installed here" : "neither \(player) nor another media player is installed here"
        }
        return nil
    }
}
