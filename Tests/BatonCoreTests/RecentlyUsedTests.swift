import BatonCore
import Foundation
import Testing

struct RecentlyUsedTests {
    /// As GTK 4's RecentManager wrote it here (one document), with a second bookmark by hand:
    /// a title, entities, two apps (the later one is the app), and one without any time.
    static let file = """
        <?xml version="1.0" encoding="UTF-8"?>
        <xbel version="1.0"
              xmlns:bookmark="http://www.freedesktop.org/standards/desktop-bookmarks"
              xmlns:mime="http://www.freedesktop.org/standards/shared-mime-info"
        >
          <bookmark href="file:///tmp/rd/doc.txt" added="2026-11-26T05:53:20.293478Z" modified="2026-11-26T05:53:20.293482Z" visited="2026-11-26T05:53:20.293479Z">
            <info>
              <metadata owner="http://freedesktop.org">
                <mime:mime-type type="text/plain"/>
                <bookmark:applications>
                  <bookmark:application name="org.example.Viewer" exec="&apos;org.example.Viewer %u&apos;" modified="2026-11-26T05:53:20.293480Z" count="1"/>
                </bookmark:applications>
              </metadata>
            </info>
          </bookmark>
          <!-- a comment <bookmark href="file:///nope"> -->
          <bookmark href="file:///home/me/Notes%20%26%20plans.odt" modified="2000-02-29T23:59:59Z">
            <title>Tom &amp; Jerry&#x2019;s plans</title>
            <info><metadata owner="http://freedesktop.org">
              <mime:mime-type type="application/vnd.oasis.opendocument.text"/>
              <bookmark:applications>
                <bookmark:application name="libreoffice" exec="'soffice %u'" modified="2000-02-29T23:59:59.5Z" count="2"/>
                <bookmark:application name="org.gnome.TextEditor" exec="'gnome-text-editor %u'" modified="2000-01-01T00:00:00Z" count="1"/>
              </bookmark:applications>
            </metadata></info>
          </bookmark>
          <bookmark href="file:///no/time"></bookmark>
          <bookmark modified="2000-02-29T23:59:59Z"></bookmark>
        </xbel>
        """

    @Test func readsWhatGTKWrites() {
        let documents = RecentlyUsed.documents(in: Self.file)
        #expect(documents == [
            RecentlyUsed.Document(uri: "file:///tmp/rd/doc.txt", title: nil, mimeType: "text/plain", app: "org.example.Viewer",
                                  exec: "'org.example.Viewer %u'", usedAt: 1_795_672_400_293_480),
            RecentlyUsed.Document(uri: "file:///home/me/Notes%20%26%20plans.odt", title: "Tom & Jerry\u{2019}s plans",
                                  mimeType: "application/vnd.oasis.opendocument.text", app: "libreoffice", exec: "'soffice %u'",
                                  usedAt: 951_868_799_500_000),
        ])
        #expect(documents.map(\.displayName) == ["doc.txt", "Tom & Jerry\u{2019}s plans"])
        #expect(RecentlyUsed.Document(uri: "file:///home/me/Notes%20%26%20plans.odt", usedAt: 0).displayName == "Notes & plans.odt")
    }

    @Test func timesAreReadExactlyOrNotAtAll() {
        #expect(RecentlyUsed.time("2026-11-26T05:53:20.293478Z") == 1_795_672_400_293_478)
        #expect(RecentlyUsed.time("2000-02-29T23:59:59Z") == 951_868_799_000_000)
        #expect(RecentlyUsed.time("2000-02-29T23:59:59.123456789Z") == 951_868_799_123_456)
        for bad in ["", "2026-11-26", "2026-13-01T00:00:00Z", "2026-11-26T05:53:20", "2026-11-26T05:53:20+01:00", "1795672400", "2026-11-26T05:53:20.Z"] {
            #expect(RecentlyUsed.time(bad) == nil, "\(bad)")
        }
    }

    @Test func anythingElseGivesNoDocumentsAndNoCrash() {
        for text in ["", "<", "<<<>>>", "<bookmark href=\"x\"", "<bookmark href='file:///a' modified='2000-02-29T23:59:59Z'>", "&&&;", String(repeating: "<a ", count: 1000)] {
            #expect(RecentlyUsed.documents(in: text) == [], "\(text.prefix(40))")
        }
    }
}

/// What a player that says no URL plays: the newest audio or video file its program recorded
/// since it started (Totem's bookmark as Totem 43 wrote it here: name "Videos", exec `'totem %u'`).
struct PlayedDocumentsTests {
    static func document(_ uri: String, mime: String?, exec: String?, at usedAt: UInt64) -> RecentlyUsed.Document {
        RecentlyUsed.Document(uri: uri, mimeType: mime, app: "Videos", exec: exec, usedAt: usedAt)
    }

    @Test func theNewestAudioOrVideoFileTheProgramRecordedSinceItStarted() throws {
        let started: UInt64 = 100_000_000
        let documents = [
            Self.document("file:///m/old.ogg", mime: "audio/x-vorbis+ogg", exec: "'totem %u'", at: started - PlayedDocuments.startSlack - 1),
            Self.document("file:///m/a%20tone.wav", mime: "audio/x-wav", exec: "'totem %u'", at: started + 1),
            Self.document("file:///m/film.webm", mime: "video/webm", exec: "'/usr/bin/totem %u'", at: started + 5),
            Self.document("file:///m/notes.txt", mime: "text/plain", exec: "'totem %u'", at: started + 9),
            Self.document("file:///m/other.ogg", mime: "audio/ogg", exec: "'mpv %u'", at: started + 9),
            Self.document("file:///m/untyped", mime: nil, exec: "'totem %u'", at: started + 9),
        ]
        #expect(PlayedDocuments.track(playedBy: "totem", since: started, in: documents) == "file:///m/film.webm")
        #expect(PlayedDocuments.track(playedBy: "totem", since: started, in: Array(documents.prefix(2))) == "file:///m/a%20tone.wav")
        // Recorded before the player started (beyond the slack): another run's, not this one's.
        #expect(PlayedDocuments.track(playedBy: "totem", since: started, in: Array(documents.prefix(1))) == nil)
        #expect(PlayedDocuments.track(playedBy: "vlc", since: started, in: documents) == nil)
    }

    @Test func aProcessStartIsReadFromProc() throws {
        let proc = FileManager.default.temporaryDirectory.appendingPathComponent("baton-proc-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: proc) }
        try FileManager.default.createDirectory(atPath: proc + "/4242", withIntermediateDirectories: true)
        try "cpu  1 2 3\nbtime 1764633600\nprocesses 9\n".write(toFile: proc + "/stat", atomically: true, encoding: .utf8)
        // The command may hold spaces and parentheses: fields are counted after its last ')'.
        try "4242 (tot) em) S 1 4242 4242 0 -1 4194560 5 0 0 0 1 2 0 0 20 0 4 0 250 0 0\n"
            .write(toFile: proc + "/4242/stat", atomically: true, encoding: .utf8)
        let hertz = UInt64(sysconf(Int32(_SC_CLK_TCK)))
        #expect(PlayedDocuments.processStart(4242, proc: proc) == 1_764_633_600_000_000 + 250 * 1_000_000 / hertz)
        #expect(PlayedDocuments.processStart(4243, proc: proc) == nil)
        #expect(PlayedDocuments.processStart(UInt32(getpid())).map { $0 <= WallClock.nowMicroseconds() } == true)
    }
}
