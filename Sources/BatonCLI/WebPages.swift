import ArgumentParser
import BatonContract
import BatonCore
import DBus
import Glibc

/// A web page as an activity (docs/DESIGN.md, "Sources"): type `org.baton.web.page` of the app
/// `org.baton.Web`, whose handler is `baton serve-web`, started by the bus. `baton open` and
/// the browser extension's host advertise pages alike.
struct WebPage {
    static let type = Contract.Sources.WebPages.type
    static let app = Contract.Sources.WebPages.app
    /// `RegisterActivityType`'s arguments: registered by whoever advertises a page as well as
    /// declared (share/baton/types), so that pages work before an install.
    static let registration: [DBusValue] = [
        .string(type), .string(app),
        .stringMap(["title": "Web page", "required_keys": "url", "handler": app, "handler_path": Contract.Sources.handlerPath]),
    ]

    var url: String
    var title: String?
    /// A playing video's or recording's position, in seconds.
    var time: Double?
    /// How far down the page, in pixels.
    var scroll: Int?

    /// What people see: the page's title, else its address.
    var shownTitle: String { title.flatMap { $0.isEmpty ? nil : $0 } ?? url }

    var payload: String {
        var payload = "{\"url\":\(StrictJSON.quote(url))"
        if let time, time.isFinite, time >= 0 { payload += ",\"time\":\(time)" }
        if let scroll, scroll >= 0 { payload += ",\"scroll\":\(scroll)" }
        return payload + "}"
    }

    var options: [String: String] { ["webpage_url": url, "target_content_id": url, "eligible_for_search": "true"] }

    /// The page's address as continuing opens it: a playing video's time as a media
    /// fragment (`#t=`), where the address has no fragment of its own.
    static func address(_ url: String, time: Double?) -> String {
        guard let time, time > 0, time.isFinite, !url.contains("#") else { return url }
        return url + "#t=" + String(Int(time))
    }
}

/// `baton open URL`: hand a page over to your other machines, as the browser extension does.
struct OpenPage: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "open",
        abstract: "Advertise a web page, so that it can be continued here or on your other machines.",
        discussion: """
            Any http or https address, with where you were: --time for a video's or a recording's \
            position (continuing opens it at #t=SECONDS), --scroll for how far down the page (kept \
            for the browser extension). Continuing opens the page in the default browser of the \
            machine it is continued on. Prints the activity's id.
            Example: baton open https://example.org/talk.webm --title "The talk" --time 754
            """)
    @ArgumentParser.Argument(help: "The page's http(s) address.") var url: String
    @Option(help: "What people see (default: the address).") var title: String?
    @Option(help: "A video's or recording's position, in seconds.") var time: Double?
    @Option(help: "How far down the page, in pixels.") var scroll: Int?
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await perform {
            let daemon = try global.daemon()
            let page = WebPage(url: url, title: title, time: time, scroll: scroll)
            _ = try await daemon.call(Contract.Registry.registerActivityType, WebPage.registration)
            let id = try await daemon.write(Contract.Activities.advertise, options: page.options) {
                [.string(WebPage.type), .string(page.shownTitle), .string(page.payload), .stringMap($0)]
            }.first?.stringValue ?? ""
            print(global.json ? "{\"id\":\(StrictJSON.quote(id))}" : id)
        }
    }
}

/// `baton serve-web`: the handler of `org.baton.Web`, which the bus starts to continue a web
/// page: it opens the page in the default browser (`gio open`, else `xdg-open`) and ends after
/// a quiet while.
struct ServeWeb: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve-web",
        abstract: "Open web pages continued on this machine (the bus starts it as org.baton.Web).",
        discussion: "Not for typing: installed as the D-Bus service org.baton.Web. Ends after 10 s without a page to open.",
        shouldDisplay: false)
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await Opener.serve(WebPage.app, address: global.address) { activity, _ in
            guard let url = activity["webpage_url"]?.unwrapped.stringValue, (try? Validate.webPageURL(url)) != nil else {
                throw BatonError.invalidArgument("the activity has no http(s) webpage_url to open")
            }
            let members = (try? StrictJSON.parseObject(activity["payload"]?.unwrapped.stringValue ?? "{}", maxBytes: 1 << 20, maxDepth: 16)) ?? []
            let address = WebPage.address(url, time: members.number("time"))
            try Self.openInBrowser(address)
            return ["url": .string(address)]
        }
    }

    /// Runs the desktop's opener for `address` and waits for it (it hands the page to the browser and ends).
    static func openInBrowser(_ address: String) throws(BatonError) {
        for opener in [["gio", "open"], ["xdg-open"]] {
            let arguments = opener + [address]
            // With the usual signals: the browser it starts inherits them (Swift's threads block them).
            guard let pid = try? Opener.spawn(arguments) else { continue }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            if status == 0 { return }
            throw BatonError.handlerFailed("\(arguments.joined(separator: " ")) failed (status \(status)): no browser opens http(s) pages here")
        }
        throw BatonError.handlerFailed("neither gio nor xdg-open is installed to open \(address)")
    }
}
