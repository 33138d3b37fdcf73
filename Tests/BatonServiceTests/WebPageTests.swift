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
        let world = try BatonWorld()
        defer { world.close() }
        let home = world.bus.directory
        let log = home.appendingPathComponent("browser.log")
        let browser = home.appendingPathComponent("browser.sh")
        try "#!/bin/sh\nprintf '%s\\n' \"$1\" >> '\(log.path)'\n".write(to: browser, atomically: true, encoding: .utf8)
        chmod(browser.path, 0o755)
        let applications = URL(fileURLWithPath: world.bus.dataHome).appendingPathComponent("applications")
        try FileManager.default.createDirectory(at: applications, withIntermediateDirectories: true)
        try "[Desktop Entry]\nType=Application\nName=Test browser\nExec=\(browser.path) %u\nMimeType=x-scheme-handler/https;x-scheme-handler/http;\n"
            .write(to: applications.appendingPathComponent("test-browser.desktop"), atomically: true, encoding: .utf8)
        let config = home.appendingPathComponent("config")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try "[Default Applications]\nx-scheme-handler/https=test-browser.desktop\nx-scheme-handler/http=test-browser.desktop\n"
            .write(to: config.appendingPathComponent("mimeapps.list"), atomically: true, encoding: .utf8)
        // As scripts/install writes it (dbus/org.baton.Web.service), with this test's directories.
        try world.bus.installService(name: "org.baton.Web", exec: "/usr/bin/env XDG_CONFIG_HOME=\(config.path) XDG_DATA_HOME=\(world.bus.dataHome) "
            + "\(try Executables.built("baton")) serve-web")
        try await world.startDaemon()

        let opened = try await world.baton(["open", "https://example.org/talk.webm", "--title", "The talk", "--time", "754"])
        #expect(opened.status == 0, "\(opened)")
        let id = opened.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let shown = try await world.baton(["activities", "show", id, "--json"])
        #expect(shown.stdout.contains("\"webpage_url\":\"https://example.org/talk.webm\"") && shown.stdout.contains("\"title\":\"The talk\""), "\(shown)")

        let continued = try await world.baton(["continue", id])
        #expect(continued.status == 0, "\(continued)")
        try await eventually("the browser was given the page at its time") {
            (try? String(contentsOf: log, encoding: .utf8)) == "https://example.org/talk.webm#t=754\n"
        }
        // Only http(s), as every webpage_url.
        let refused = try await world.baton(["open", "file:///etc/passwd"])
        #expect(refused.status == 3 && refused.stderr.contains("http or https"), "\(refused)")
    }
}
