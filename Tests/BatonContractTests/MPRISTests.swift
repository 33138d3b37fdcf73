import BatonContract
import BatonCore
import DBus
import Testing

/// What players' `org.mpris.MediaPlayer2.Player` properties say, read as each player sends them
/// (their shapes from the players' sources, FIELD-NOTES "MPRIS 2 players"), and the track the
/// media source makes of it.
struct MPRISTests {
    static func metadata(_ entries: [String: DBusValue]) -> DBusValue {
        .variant(.dictionary(key: .string, value: .variant, entries.sorted { $0.key < $1.key }.map {
            DBusValue.DictionaryEntry(.string($0.key), .variant($0.value))
        }))
    }

    @Test func mpvAsItSendsThem() throws {
        let state = MPRIS.PlayerState(properties: [
            "Metadata": Self.metadata([
                "xesam:url": .string("file:///music/a%20tone.wav"), "xesam:title": .string("a tone.wav"),
                "mpris:trackid": .objectPath("/0"), "mpris:length": .int64(120_000_000),
            ]),
            "PlaybackStatus": .variant(.string("Playing")), "Position": .variant(.int64(42_500_000)), "CanSeek": .variant(.boolean(true)),
        ])
        #expect(state.url == "file:///music/a%20tone.wav" && state.title == "a tone.wav" && state.artists.isEmpty)
        #expect(state.lengthUS == 120_000_000 && state.positionUS == 42_500_000 && state.isPlaying && state.canSeek)
        #expect(MPRIS.trackPath(state.trackID) == "/0")
    }

    /// Rhythmbox types `mpris:trackid` as a string (`s`), not an object path, and its
    /// positions are whole seconds; its length comes as `x` too. SetPosition still gets a path.
    @Test func rhythmboxAsItSendsThem() throws {
        let state = MPRIS.PlayerState(properties: [
            "Metadata": Self.metadata([
                "xesam:url": .string("file:///music/Field%20Recording.ogg"), "xesam:title": .string("Field Recording"),
                "xesam:artist": .array(.string, [.string("The Hawks")]),
                "mpris:trackid": .string("/org/gnome/Rhythmbox3/Track/4"), "mpris:length": .int64(200_000_000),
            ]),
            "PlaybackStatus": .variant(.string("Paused")), "Position": .variant(.int64(73_000_000)), "CanSeek": .variant(.boolean(true)),
        ])
        #expect(MPRIS.trackPath(state.trackID) == "/org/gnome/Rhythmbox3/Track/4")
        #expect(state.positionUS == 73_000_000 && !state.isPlaying)
        #expect(MediaTrack.title(title: state.title, artists: state.artists, url: state.url ?? "") == "Field Recording — The Hawks")
    }

    /// Totem (GNOME Videos 43 with totem-plugins, playing a file under Xvfb here) gives neither a
    /// URL nor a track id: its Metadata is its length and a track number. Nothing to record or seek.
    @Test func totemGivesNoURL() {
        let state = MPRIS.PlayerState(properties: [
            "Metadata": Self.metadata(["mpris:length": .int64(120_000_000), "xesam:trackNumber": .uint32(0)]),
            "PlaybackStatus": .variant(.string("Playing")), "Position": .variant(.int64(12_044_000)), "CanSeek": .variant(.boolean(true)),
        ])
        #expect(state.url == nil && MPRIS.trackPath(state.trackID) == nil && state.positionUS == 12_044_000 && state.lengthUS == 120_000_000)
    }

    @Test func aTrackReadsAsPeopleSayIt() throws {
        #expect(MediaTrack.title(title: "  ", artists: [], url: "file:///music/a%20tone.wav") == "a tone.wav")
        #expect(MediaTrack.title(title: nil, artists: ["x"], url: "https://radio.example/live?stream=1") == "live")
        #expect(MediaTrack.title(title: "Song", artists: ["A", " B "], url: "") == "Song — A, B")
        #expect(MediaTrack.clockText(5_000_000) == "0:05" && MediaTrack.clockText(754_000_000) == "12:34"
                && MediaTrack.clockText(3_723_000_000) == "1:02:03")
        let track = MediaTrack(url: "https://radio.example/a\"b", positionUS: 42, lengthUS: 0, player: "vlc")
        #expect(MediaTrack(payload: track.payload) == track, "what it writes reads back the same")
        #expect(track.isWebStream && track.localPath == nil)
        #expect(MediaTrack(payload: #"{"position_us":3}"#) == nil, "a payload without a URL is no track")
    }
}
