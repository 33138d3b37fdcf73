import DBus
import Testing
import TestSupport

/// The clipboard source between two batond daemons, with sync through a server and through
/// folders, each daemon's agent played by clients we did not write (gdbus reports a copy;
/// busctl reads the offer): what one machine copies is offered on the other with the same
/// bytes; what never leaves does not; an echo is not sent back; a later copy wins; the offer
/// ends with its time.
@Suite(.serialized) struct ClipboardAcrossMachinesTests {
    static let clipboard = "org.baton.Handoff1.Clipboard"
    static let text = "text/plain;charset=utf-8"

    /// What `Copied` answered for `text`, reported as an agent does, through gdbus.
    func copied(_ text: String, on world: BatonWorld, mime: String = Self.text, hints: String = "{}") async throws -> String {
        // GVariant's text for an array of bytes.
        let bytes = "[byte " + text.utf8.map { "0x" + String($0, radix: 16) }.joined(separator: ", ") + "]"
        let result = try await world.run("gdbus", [
            "call", "--session", "--dest", "org.baton.Handoff1", "--object-path", "/org/baton/Handoff1",
            "--method", "\(Self.clipboard).Copied", mime, bytes, hints,
        ])
        #expect(result.status == 0, "\(result)")
        return result.stdout.split(separator: "'").dropFirst().first.map(String.init) ?? result.stdout
    }

    /// The content of offer `id`, read through busctl (JSON), or the error's name.
    func content(_ id: String, on world: BatonWorld) async throws -> [UInt8]? {
        let result = try await world.run("busctl", ["--user", "--json=short", "call", "org.baton.Handoff1", "/org/baton/Handoff1",
                                                    Self.clipboard, "Content", "s", id])
        guard result.status == 0 else { return nil }
        // {"type":"ay","data":[[104,105]]}
        let numbers = result.stdout.split(whereSeparator: { !$0.isNumber }).compactMap { UInt8($0) }
        return numbers
    }

    @Test(arguments: MachinesMeet.allCases) func whatOneMachineCopiesTheOtherOffers(meeting: MachinesMeet) async throws {
        let desktop = try await BatonWorld.started(["--test-clock"]), laptop = try await BatonWorld.started(["--test-clock"])
        defer { desktop.close(); laptop.close() }
        let (place, _) = try await meeting.join([desktop, laptop], names: ["desktop", "laptop"])
        defer { place.close() }
        // Off until turned on, on each machine.
        #expect(try await copied("before", on: desktop) == "off")
        for world in [desktop, laptop] { _ = try await world.baton(["sources", "enable", "clipboard"]) }
        let offered = try await SignalLog(laptop.client, MatchRule(interface: Self.clipboard, member: "Offered"))
        let withdrawn = try await SignalLog(laptop.client, MatchRule(interface: Self.clipboard, member: "Withdrawn"))
        let desktopOffers = try await SignalLog(desktop.client, MatchRule(interface: Self.clipboard, member: "Offered"))

        // Copied on the desktop: offered on the laptop with the same bytes, from "desktop".
        let note = "Shopping list:\r\n- ünïcode eggs\r\n"
        #expect(try await copied(note, on: desktop) == "sent")
        let offer = try await offered.wait(for: "the laptop offers the desktop's copy", timeout: .seconds(20)) { _ in true }
        let id = try #require(offer.body.first?.stringValue)
        // As dbus/org.baton.Handoff1.xml declares them (SignalContractTests reads the declaration).
        #expect(offer.signature.text == "sstts")
        #expect(offer.body.count == 5 && offer.body[1].stringValue == Self.text && offer.body[2].uint64Value == UInt64(note.utf8.count))
        #expect(offer.body[4].stringValue == "desktop")
        #expect(try await content(id, on: laptop) == Array(note.utf8))
        let current = try await laptop.call(Self.clipboard, "Offer")
        #expect(current.first?.stringValue == id)

        // The laptop's agent puts it on the clipboard; an app there rewrites the line endings and
        // copies it again: an echo, not sent back. Nor is the primary selection or a password.
        #expect(try await copied("Shopping list:\n- ünïcode eggs", on: laptop) == "offered")
        #expect(try await copied("highlighted", on: laptop, hints: "{'selection': 'primary'}") == "primary")
        #expect(try await copied("hunter2", on: laptop, hints: "{'x-kde-passwordManagerHint': 'secret'}") == "secret")
        // The password was a later copy here: the offer is withdrawn.
        let gone = try await withdrawn.wait(for: "the offer withdrawn by a later copy on the laptop") { $0.body.first?.stringValue == id }
        #expect(gone.signature.text == "s")
        #expect(try await laptop.call(Self.clipboard, "Offer").first?.stringValue == "")

        // Over max-text: not sent. Receive only: not sent.
        _ = try await desktop.baton(["sources", "set", "clipboard", "max-text", "10"])
        #expect(try await copied("eleven char", on: desktop) == "too-large")
        _ = try await desktop.baton(["sources", "set", "clipboard", "direction", "receive"])
        #expect(try await copied("short", on: desktop) == "receive-only")
        for (name, value) in [("direction", "both"), ("max-text", "262144")] {
            _ = try await desktop.baton(["sources", "set", "clipboard", name, value])
        }

        // From the laptop, an image, offered on the desktop for the laptop's 5 s.
        _ = try await laptop.baton(["sources", "set", "clipboard", "lifetime", "5"])
        let png = "\u{89}PNG fake image bytes"
        #expect(try await copied(png, on: laptop, mime: "image/png") == "sent")
        let image = try await desktopOffers.wait(for: "the desktop offers the laptop's image", timeout: .seconds(20)) { _ in true }
        let imageID = try #require(image.body.first?.stringValue)
        #expect(image.body[1].stringValue == "image/png" && image.body[4].stringValue == "laptop")
        #expect(try await content(imageID, on: desktop) == Array(png.utf8))
        let shown = try await desktop.baton(["clipboard"])
        #expect(shown.stdout.contains("received") && shown.stdout.contains("laptop") && shown.stdout.contains("image/png"), "\(shown)")
        let desktopWithdrawn = try await SignalLog(desktop.client, MatchRule(interface: Self.clipboard, member: "Withdrawn"))
        // Well past the laptop's 5 s: each daemon's held clock began when it started, the laptop's later.
        _ = try await desktop.call("org.baton.Handoff1.Testing", "AdvanceClock", [.uint64(60_000_000)])
        try await desktopWithdrawn.wait(for: "the image's time is over on the desktop") { $0.body.first?.stringValue == imageID }
        #expect(try await content(imageID, on: desktop) == nil, "gone with its time")

        // The laptop offers again, then `baton clipboard clear` withdraws it; --show prints a text copy as it is.
        #expect(try await copied("from the desktop again", on: desktop) == "sent")
        let again = try await offered.wait(for: "the second offer", after: 1, timeout: .seconds(20)) { _ in true }
        let shownText = try await laptop.baton(["clipboard", "--show"])
        #expect(shownText.stdout == "from the desktop again", "\(shownText)")
        _ = try await laptop.baton(["clipboard", "clear"])
        try await withdrawn.wait(for: "cleared") { $0.body.first == again.body.first }
    }
}
