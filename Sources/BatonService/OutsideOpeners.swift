import BatonContract
import BatonCore
import Glibc

/// The sources whose activities open outside any scene, as data: each opens through a handler
/// of its own that the bus starts (batond's unit confines what batond itself may start), may
/// say why it cannot open one here, and is explained in the same words. `Continue` routes to
/// them by type (`ContinuationRoute.outside`); `Explain` reads the same table.
struct OutsideOpener: Sendable {
    /// The handler's bus name; it answers `Handler.ContinueActivity` at `Contract.Sources.handlerPath`.
    let handler: String
    /// What continuing one does, as Explain says it.
    let opens: @Sendable (_ activity: Activity, _ applicationDirectories: [String]) -> String
    /// Why it cannot be opened here (its file or app is not on this machine); nil when it can.
    let obstacle: @Sendable (_ activity: Activity, _ applicationDirectories: [String]) -> String?
    /// How an obstacle is said: "a recent document that cannot be opened here".
    let refused: String
    /// `HandlerFailed`'s words when the handler could not do it.
    let failure: String

    /// Each, by the type of the activities it opens.
    static let byType: [String: OutsideOpener] = [
        Contract.Sources.WebPages.type: OutsideOpener(
            handler: Contract.Sources.WebPages.app, opens: { _, _ in "a web page: continuing opens it in the default browser" },
            obstacle: { _, _ in nil }, refused: "a web page that cannot be opened here", failure: "the web page could not be opened"),
        RecentDocuments.type: OutsideOpener(
            handler: RecentDocuments.app, opens: { _, _ in "a recent document: continuing opens it in the app that used it" },
            obstacle: RecentDocuments.obstacle(to:applicationDirectories:),
            refused: "a recent document that cannot be opened here", failure: "the document could not be opened"),
        Media.type: OutsideOpener(
            handler: Media.app,
            opens: { activity, directories in
                let track = MediaTrack(payload: activity.payload)
                let player = track?.app(in: directories)?.name ?? track?.player ?? "a media player"
                return "a track: continuing plays it from \(MediaTrack.clockText(track?.positionUS ?? 0)) in \(player)"
            },
            obstacle: { activity, directories in
                guard let track = MediaTrack(payload: activity.payload) else { return "it names no URL to play" }
                return track.obstacle(applicationDirectories: directories)
            },
            refused: "a track that cannot be played here", failure: "the track could not be played"),
        Terminals.type: OutsideOpener(
            handler: Terminals.app, opens: { activity, _ in Terminals.opens(activity) },
            obstacle: { activity, _ in
                guard let session = Terminals.Session(payload: activity.payload) else { return "it names no directory" }
                let home = getenv("HOME").map { String(cString: $0) } ?? "/"
                return session.opening(home: home, installed: TerminalShells.isOnPath) == nil ? "no terminal program is installed here" : nil
            },
            refused: "a terminal that cannot be opened here", failure: "the terminal could not be opened"),
    ]
}
