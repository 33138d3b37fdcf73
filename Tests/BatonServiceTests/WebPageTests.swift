import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// Web pages as activities: `baton open URL` advertises one; continuing it starts the handler
/// `org.baton.Web` (`baton serve-web`) through the bus, which opens the page in the default
/// browser — here a test browser, the desktop entry that mimeapps.list makes the default for
/// https, which writes down what it was given.
@Suite(.serialized)
struct WebPageTests {
    @Test func continuingAPageOpensItInTheDefaultBrowserAtItsTime() async throws {
        _ = try Executables.require("gio", package: "libglib2.0-bin")
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        let browser = try TestBrowser(on: world.bus)

        let opened = try await world.baton(["open", "https://example.org/talk.webm", "--title", "The talk", "--time", "754"])
        #expect(opened.status == 0, "\(opened)")
        let id = opened.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let shown = try await world.baton(["activities", "show", id, "--json"])
        #expect(shown.stdout.contains("\"webpage_url\":\"https://example.org/talk.webm\"") && shown.stdout.contains("\"title\":\"The talk\""), "\(shown)")

        let continued = try await world.baton(["continue", id])
        #expect(continued.status == 0 && continued.stdout == "opened it (in the browser or the app that used it)\n", "\(continued)")
        // The bus starts the handler, which starts gio, which starts the browser: slow on a busy machine.
        try await eventually("the browser was given the page at its time", timeout: .seconds(30)) {
            browser.opened == ["https://example.org/talk.webm#t=754"]
        }
        // Opened in the browser, in no scene: none piles up for org.baton.Web.
        #expect(try await world.call("org.baton.Handoff1.Scenes", "ListScenes", [.string("org.baton.Web")]).first?.arrayValue == [])
        // Only http(s), as every webpage_url.
        let refused = try await world.baton(["open", "file:///etc/passwd"])
        #expect(refused.status == 3 && refused.stderr.contains("http or https"), "\(refused)")
    }
}
