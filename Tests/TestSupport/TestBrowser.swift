import Foundation
import Glibc

/// A browser for tests: a desktop entry that mimeapps.list makes the default for http(s) in a
/// bus's XDG directories, which writes down each address it is given; and the web pages'
/// handler `org.baton.Web` (`baton serve-web`) installed on that bus, as scripts/install does,
/// seeing those directories.
public struct TestBrowser: Sendable {
    /// Every address given so far, one per line.
    public let log: URL

    public init(on bus: PrivateBus) throws {
        let home = bus.directory
        log = home.appendingPathComponent("browser.log")
        let browser = home.appendingPathComponent("browser.sh")
        try "#!/bin/sh\nprintf '%s\\n' \"$1\" >> '\(log.path)'\n".write(to: browser, atomically: true, encoding: .utf8)
        chmod(browser.path, 0o755)
        let applications = URL(fileURLWithPath: bus.dataHome).appendingPathComponent("applications")
        try FileManager.default.createDirectory(at: applications, withIntermediateDirectories: true)
        try "[Desktop Entry]\nType=Application\nName=Test browser\nExec=/bin/sh \(browser.path) %u\nMimeType=x-scheme-handler/https;x-scheme-handler/http;\n"
            .write(to: applications.appendingPathComponent("test-browser.desktop"), atomically: true, encoding: .utf8)
        let config = home.appendingPathComponent("config")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try "[Default Applications]\nx-scheme-handler/https=test-browser.desktop\nx-scheme-handler/http=test-browser.desktop\n"
            .write(to: config.appendingPathComponent("mimeapps.list"), atomically: true, encoding: .utf8)
        try bus.installService(name: "org.baton.Web", exec: "/usr/bin/env XDG_CONFIG_HOME=\(config.path) XDG_DATA_HOME=\(bus.dataHome) "
            + "\(try Executables.built("baton")) serve-web")
    }

    /// The addresses given so far.
    public var opened: [String] {
        ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }
}
