import BatonCore
import Foundation
import Testing

/// KDE's `RecentDocuments/*.desktop` links, as KIO writes them and as a hostile hand writes them.
struct KDERecentDocumentsTests {
    @Test func aLinkNamesItsDocumentAndTheAppThatOpenedIt() throws {
        let link = "[Desktop Entry]\nIcon=text-plain\nName=Field notes.txt\nType=Link\nURL[$e]=file:$HOME/Documents/Field notes.txt\nX-KDE-LastOpenedWith=org.kde.kate\n"
        let document = try #require(KDERecentDocuments.document(link, home: "/home/ana", modified: 7))
        #expect(document.uri == "file:///home/ana/Documents/Field%20notes.txt")
        #expect(document.app == "org.kde.kate" && document.usedAt == 7)
        // The same, as GLib would write its URI; and ${HOME}, and a URL without expansion.
        #expect(RecentlyUsed.localPath(document.uri) == "/home/ana/Documents/Field notes.txt")
        #expect(KDERecentDocuments.document("[Desktop Entry]\nType=Link\nURL[$e]=file:${HOME}/a\n", home: "/h", modified: 1)?.uri == "file:///h/a")
        #expect(KDERecentDocuments.document("[Desktop Entry]\nType=Link\nURL=file:///srv/ünï #1.txt\n", home: "/h", modified: 1)?.uri
            == "file:///srv/%C3%BCn%C3%AF%20%231.txt")
    }

    @Test func anythingButALinkToALocalFileIsNothing() {
        for text in [
            "[Desktop Entry]\nType=Application\nExec=rm -rf ~\nURL=file:///etc/passwd\n",   // an application
            "[Desktop Entry]\nType=Link\nURL=https://example.org/\n",                         // not a local file
            "[Desktop Entry]\nType=Link\nURL[$e]=file:$SECRET/x\n",                           // a variable not expanded
            "[Desktop Entry]\nType=Link\n",                                                   // no URL
            "[Other Group]\nType=Link\nURL=file:///a\n",                                      // not the main group
            "[Desktop Entry]\nType=Link\nURL=file:relative/path\n",                           // not absolute
        ] {
            #expect(KDERecentDocuments.document(text, home: "/h", modified: 1) == nil, "\(text)")
        }
    }

    @Test func aDirectoryOfLinksGivesEachDocumentOnceAndSkipsWhatIsNoLink() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kde-links-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func write(_ name: String, _ text: String, modified: Double) throws {
            let url = directory.appendingPathComponent(name)
            try text.write(to: url, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: modified)], ofItemAtPath: url.path)
        }
        let link = "[Desktop Entry]\nType=Link\nURL[$e]=file:$HOME/report.odt\n"
        try write("report.odt.desktop", link + "X-KDE-LastOpenedWith=org.kde.calligrawords\n", modified: 1_000)
        try write("report.odt[2].desktop", link + "X-KDE-LastOpenedWith=libreoffice-writer\n", modified: 2_000)
        try write("huge.desktop", "[Desktop Entry]\nType=Link\nURL=file:///big\n" + String(repeating: "#", count: 20_000), modified: 3_000)
        try write("notes.txt", "[Desktop Entry]\nType=Link\nURL=file:///notes\n", modified: 3_000)  // not a .desktop file
        let elsewhere = directory.appendingPathComponent("elsewhere")
        try "[Desktop Entry]\nType=Link\nURL=file:///linked\n".write(to: elsewhere, atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: directory.appendingPathComponent("symlink.desktop").path, withDestinationPath: elsewhere.path)

        let documents = KDERecentDocuments.documents(in: directory.path, home: "/home/ana")
        #expect(documents.count == 1, "\(documents)")
        #expect(documents.first?.uri == "file:///home/ana/report.odt")
        #expect(documents.first?.app == "libreoffice-writer" && documents.first?.usedAt == 2_000_000_000, "the newest link wins")
    }
}
