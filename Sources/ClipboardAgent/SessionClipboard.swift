import BatonCore
import Glibc
import Synchronization

/// One session's clipboard as the agent sees it, whatever the display: X11 (`X11Clipboard`) or
/// a Wayland compositor with a data-control protocol (`WaylandClipboard`). Each works on a thread
/// of its own (`run`), tells the agent of every copy the user makes (its `copied` callback) and
/// offers what the agent gives it until told to let go (through its `mailbox`).
protocol SessionClipboard: AnyObject, Sendable {
    /// Runs until `stop`; the display going away ends the process with status 0, saying so.
    func run()
    /// What the agent says it watches: "X display :1", "Wayland display wayland-1 (…)".
    var watching: String { get }
    /// The commands below, for `run` to take.
    var mailbox: ClipboardMailbox { get }
    /// On the clipboard's thread: offer a copy, let one go, leave the display.
    func take(id: String, mime: String, content: [UInt8])
    func letGo(id: String)
    func disconnect()
}

extension SessionClipboard {
    /// On the clipboard's thread, once its mailbox woke it: carries out what was posted; false
    /// once told to stop (the display is left then).
    func obeyCommands() -> Bool {
        for command in mailbox.take() {
            switch command {
            case .own(let id, let mime, let content): take(id: id, mime: mime, content: content)
            case .release(let id): letGo(id: id)
            case .stop:
                disconnect()
                mailbox.close()
                return false
            }
        }
        return true
    }

    /// Offers `content` as the clipboard, as `mime`, until another copy or `release(id:)`.
    func own(id: String, mime: String, content: [UInt8]) { mailbox.post(.own(id: id, mime: mime, content: content)) }
    /// Stops offering `id`, if it is still what the clipboard holds from us.
    func release(id: String) { mailbox.post(.release(id: id)) }
    func stop() { mailbox.post(.stop) }
}

/// What the user copied, as read: `content` is empty when it was not read (`hints` say why).
struct Copy: Sendable {
    var mime: String
    var content: [UInt8]
    var hints: [String: String]

    /// What to do with a new offer on the clipboard, decided from its types alone, before a byte
    /// is read (docs/DESIGN.md, "The clipboard"): read one type, or tell batond of a copy not read.
    enum Decision {
        /// Read `type` (the display's name for it), to be sent as `mime`, at most `cap` bytes.
        case read(type: String, mime: String, cap: Int)
        case notRead(Copy)
    }

    /// The types a copy is read as, the preferred first: UTF-8 text by its MIME and its X11
    /// names, then PNG.
    static let readable: [(type: String, mime: String)] = [
        (ClipboardCopy.text, ClipboardCopy.text), ("UTF8_STRING", ClipboardCopy.text), (ClipboardCopy.png, ClipboardCopy.png),
    ]

    /// `offers` says whether the offer lists a type. A password manager's hint, with any value,
    /// means nothing of it is read; else the first readable type it lists.
    static func decide(offers: (String) -> Bool, caps: (text: Int, image: Int)) -> Decision {
        if offers("x-kde-passwordManagerHint") {
            return .notRead(Copy(mime: ClipboardCopy.text, content: [], hints: ["x-kde-passwordManagerHint": ""]))
        }
        guard let chosen = readable.first(where: { offers($0.type) }) else {
            return .notRead(Copy(mime: ClipboardCopy.text, content: [], hints: ["unsupported": "neither text nor PNG"]))
        }
        return .read(type: chosen.type, mime: chosen.mime, cap: chosen.mime == ClipboardCopy.text ? caps.text : caps.image)
    }

    /// A copy too large to read.
    static func tooLarge(_ mime: String, cap: Int) -> Copy { Copy(mime: mime, content: [], hints: ["too-large": "over \(cap) bytes"]) }

    /// A copy its owner did not hand over, and why.
    static func unreadable(_ mime: String, _ why: String) -> Copy { Copy(mime: mime, content: [], hints: ["unreadable": why]) }
}

/// How long one owner may take to answer, and a whole transfer: as long as Qt's own clipboard
/// waits, for an app busy drawing on a loaded machine is slow to answer, not hostile.
enum ClipboardDeadline {
    static let answer: Duration = .seconds(5)
    static let transfer: Duration = .seconds(10)

    /// Nanoseconds on the monotonic clock.
    static var now: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// `duration` from now, on `now`'s clock.
    static func after(_ duration: Duration) -> UInt64 {
        now + UInt64(duration.components.seconds) * 1_000_000_000 + UInt64(duration.components.attoseconds / 1_000_000_000)
    }

    /// Milliseconds left until `deadline`, for `poll`, at least 1 while any is left; nil once it passed.
    static func milliseconds(until deadline: UInt64) -> Int32? {
        let now = now
        guard now < deadline else { return nil }
        return Int32(min((deadline - now) / 1_000_000 + 1, 60_000))
    }
}

/// What the agent asks of a clipboard's thread.
enum ClipboardCommand: Sendable {
    case own(id: String, mime: String, content: [UInt8])
    case release(id: String)
    case stop
}

/// The agent's commands to a clipboard's thread, and the eventfd that wakes it for them: the
/// thread polls `descriptor` beside its display's socket, then `take`s what was posted.
final class ClipboardMailbox: Sendable {
    let descriptor: Int32
    private let commands = Mutex<[ClipboardCommand]>([])

    /// `descriptor`: a non-blocking eventfd, closed by `close`.
    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    func post(_ command: ClipboardCommand) {
        commands.withLock { $0.append(command) }
        var one: UInt64 = 1
        _ = Glibc.write(descriptor, &one, 8)
    }

    /// What was posted since the last take, oldest first.
    func take() -> [ClipboardCommand] {
        var count: UInt64 = 0
        _ = Glibc.read(descriptor, &count, 8)
        return commands.withLock { list in defer { list = [] }; return list }
    }

    func close() {
        _ = Glibc.close(descriptor)
    }
}
