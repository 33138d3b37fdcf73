import BatonContract
import BatonCore
import DBus
import Dispatch
import Glibc

/// `baton-browser-host`: the native messaging host of the browser extension in `browser/`
/// (host name `org.baton.browser`). The browser starts it, with the extension's origin as its
/// argument, and talks to it in frames on stdin and stdout: a 32-bit length in native byte
/// order, then that many bytes of UTF-8 JSON. Nothing else is ever written to stdout.
///
/// In, one object per frame (docs/DESIGN.md, "Sources"):
/// - `{"kind":"page","tab":T,"url":U,"title":S,"scroll":N,"time":N}`: tab T shows this page
///   (`scroll` and `time` optional); answered `{"kind":"recorded","tab":T,"id":ID}`.
/// - `{"kind":"closed","tab":T}`: tab T closed or is no longer its window's active tab;
///   answered `{"kind":"ended","tab":T}`.
/// - `{"kind":"hello"}`: answered `{"kind":"hello","version":1}`.
///
/// Anything wrong gets `{"kind":"error","error":NAME,"message":TEXT}` (with `tab` when known)
/// and changes nothing. When stdin ends (the browser closed, the extension went), every page
/// the host recorded is ended.
public enum BrowserHost {
    /// The program's name: `baton` run under this name is the host.
    public static let programName = "baton-browser-host"
    /// The largest frame read from the browser; a page's frame is a few hundred bytes.
    static let frameLimit = 1 << 20

    /// Serves frames on stdin and stdout until stdin ends; returns the exit status.
    public static func run() async -> Int32 {
        let pages = RecordedPages()
        for await frame in Frames.reading(fd: 0) {
            switch frame {
            case .message(let text): Frames.write(await pages.handle(text))
            case .invalid(let reason): Frames.write(Reply.error("BadFrame", reason))
            }
        }
        await pages.endAll()
        return 0
    }
}

/// Frames on a file descriptor: a native-endian 32-bit length, then the bytes.
enum Frames {
    enum Frame: Sendable {
        case message(String)
        /// A frame that is not a message: its error is answered and the next frame read.
        case invalid(String)
    }

    /// The frames read from `fd`, on a thread of their own (reads block), until it ends.
    static func reading(fd: Int32) -> AsyncStream<Frame> {
        AsyncStream { continuation in
            DispatchQueue.global().async {
                var reader = Reader(fd: fd)
                while let frame = reader.next() { continuation.yield(frame) }
                continuation.finish()
            }
        }
    }

    struct Reader {
        let fd: Int32
        private var ended = false

        init(fd: Int32) { self.fd = fd }

        /// The next frame; nil once the input has ended (a frame cut short is answered first).
        mutating func next() -> Frame? {
            guard !ended else { return nil }
            var header = [UInt8](repeating: 0, count: 4)
            let got = read(into: &header)
            if got == 0 { ended = true; return nil }
            guard got == 4 else { ended = true; return .invalid("the input ended inside a frame's length") }
            let length = Int(header.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) })
            guard length <= BrowserHost.frameLimit else {
                ended = !skip(length)
                return .invalid("a frame of \(length) bytes; the limit is \(BrowserHost.frameLimit)")
            }
            var body = [UInt8](repeating: 0, count: length)
            guard read(into: &body) == length else {
                ended = true
                return .invalid("the input ended inside a frame of \(length) bytes")
            }
            guard let text = String(validating: body, as: UTF8.self) else { return .invalid("a frame that is not UTF-8") }
            return .message(text)
        }

        /// Fills `buffer` unless the input ends first; returns how many bytes it read.
        private func read(into buffer: inout [UInt8]) -> Int {
            var filled = 0
            while filled < buffer.count {
                let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, $0.count - filled) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                filled += count
            }
            return filled
        }

        /// Reads and drops `count` bytes; false when the input ended first.
        private func skip(_ count: Int) -> Bool {
            var left = count
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while left > 0 {
                if left < chunk.count { chunk = [UInt8](repeating: 0, count: left) }
                let got = read(into: &chunk)
                guard got == chunk.count else { return false }
                left -= got
            }
            return true
        }
    }

    /// Writes one frame to stdout, whole.
    static func write(_ text: String) {
        var bytes = withUnsafeBytes(of: UInt32(text.utf8.count)) { Array($0) }
        bytes += text.utf8
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(1, $0.baseAddress! + written, $0.count - written) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }  // the browser went; the end of stdin follows
            written += count
        }
    }
}

/// The frames the host sends.
enum Reply {
    static func error(_ name: String, _ message: String, tab: String? = nil) -> String {
        object([("kind", quoted("error"))] + (tab.map { [("tab", $0)] } ?? []) + [("error", quoted(name)), ("message", quoted(message))])
    }

    static func quoted(_ text: String) -> String { StrictJSON.quote(text) }

    /// `{"key":value,…}` from keys and values' JSON text, in that order.
    static func object(_ members: [(String, String)]) -> String {
        StrictJSON.serialize(members.map { StrictJSON.Member(key: $0.0, rawValue: $0.1) })
    }
}

/// The pages the host recorded, by tab: each one activity of `org.baton.web.page`.
final class RecordedPages {
    /// The session bus, reached at the first page (a `hello` needs none).
    private var bus: Daemon?
    /// Tab (its JSON text, as the extension sent it) → activity id.
    private var activities: [String: String] = [:]
    private var registered = false

    private var daemon: Daemon {
        get throws {
            if let bus { return bus }
            let daemon = try Daemon(address: nil)
            bus = daemon
            return daemon
        }
    }

    /// The reply to one message.
    func handle(_ text: String) async -> String {
        let members: [StrictJSON.Member]
        do {
            members = try StrictJSON.parseObject(text, maxBytes: BrowserHost.frameLimit, maxDepth: 8)
        } catch {
            return Reply.error("BadFrame", "not a JSON object: \(error.message)")
        }
        let tab = members.first { $0.key == "tab" }?.rawValue
        switch members.string("kind") {
        case "hello":
            return Reply.object([("kind", Reply.quoted("hello")), ("version", "1")])
        case "page":
            guard let tab, let url = members.string("url") else { return Reply.error("BadFrame", "a page needs its tab and url", tab: tab) }
            let page = WebPage(url: url, title: members.string("title"), time: members.number("time"), scroll: members.number("scroll").map { Int($0) })
            do {
                let id = try await record(page, tab: tab)
                return Reply.object([("kind", Reply.quoted("recorded")), ("tab", tab), ("id", Reply.quoted(id))])
            } catch {
                return Self.reply(to: error, tab: tab)
            }
        case "closed":
            guard let tab else { return Reply.error("BadFrame", "closed needs its tab") }
            do {
                try await end(tab: tab)
                return Reply.object([("kind", Reply.quoted("ended")), ("tab", tab)])
            } catch {
                return Self.reply(to: error, tab: tab)
            }
        case let kind:
            return Reply.error("BadFrame", "unknown kind \(kind.map { "'\($0)'" } ?? "(none)"): page, closed or hello", tab: tab)
        }
    }

    /// Ends every page recorded (stdin ended).
    func endAll() async {
        for tab in activities.keys { try? await end(tab: tab) }
    }

    /// Advertises the tab's page, or updates the activity it has.
    private func record(_ page: WebPage, tab: String) async throws -> String {
        // Refused here as batond would refuse it, before any call.
        try Validate.webPageURL(page.url)
        if let id = activities[tab] {
            do {
                _ = try await daemon.connection.call(Contract.Activities.update, [
                    .string(id), .string(page.payload), .stringMap(page.options.merging(["title": page.shownTitle, "replace_payload": "true"]) { $1 }),
                ])
                return id
            } catch let error as DBusError where BatonError(error)?.code == .notFound || BatonError(error)?.code == .expired {
                activities[tab] = nil  // forgotten or ended meanwhile: advertised again
            }
        }
        let daemon = try daemon
        let advertise = {
            try await daemon.connection.call(Contract.Activities.advertise, [
                .string(WebPage.type), .string(page.shownTitle), .string(page.payload), .stringMap(page.options),
            ]).first?.stringValue ?? ""
        }
        let id: String
        do {
            if !registered { try await register() }
            id = try await advertise()
        } catch let error as DBusError where BatonError(error)?.code == .unknownActivityType {
            // The user forgot org.baton.Web (its type with it): the next page registers it again.
            try await register()
            id = try await advertise()
        }
        activities[tab] = id
        return id
    }

    private func register() async throws {
        _ = try await daemon.connection.call(Contract.Registry.registerActivityType, WebPage.registration)
        registered = true
    }

    private func end(tab: String) async throws {
        guard let id = activities.removeValue(forKey: tab) else { return }
        do {
            _ = try await daemon.connection.call(Contract.Activities.invalidate, [.string(id)])
        } catch let error as DBusError where BatonError(error)?.code == .notFound {
            // Ended already (forgotten, or by another client).
        }
    }

    private static func reply(to error: any Error, tab: String) -> String {
        switch error {
        case let error as DBusError: Reply.error(error.name, error.message, tab: tab)
        case let error as BatonError: Reply.error(error.dbusName, error.message, tab: tab)
        case let error as CLIError: Reply.error("NoBus", error.description, tab: tab)
        default: Reply.error("Failed", "\(error)", tab: tab)
        }
    }
}
