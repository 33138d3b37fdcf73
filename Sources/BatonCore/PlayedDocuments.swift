import Glibc

/// What a player that says no URL plays. Totem's MPRIS `Metadata` has only a length and a track
/// number, but Totem records each file it opens in `recently-used.xbel`, as GTK apps do: its
/// track is the newest audio or video document its program recorded since it started.
public enum PlayedDocuments {
    /// Slack for comparing a process's start (whole seconds of boot time plus clock ticks) with
    /// the times GLib writes in microseconds.
    public static let startSlack: UInt64 = 2_000_000

    /// The URI of the newest audio or video document `program` (a player's `Exec` program, as
    /// `DesktopApp.program` gives it) recorded at or after `since` (µs since the epoch), or nil.
    public static func track(playedBy program: String, since: UInt64, in documents: [RecentlyUsed.Document]) -> String? {
        let name = basename(program)
        return documents
            .filter { document in
                guard document.usedAt + startSlack >= since,
                      let type = document.mimeType, type.hasPrefix("audio/") || type.hasPrefix("video/"),
                      let recorded = document.exec.flatMap(DesktopApp.program) else { return false }
                return recorded == program || basename(recorded) == name
            }
            .max { $0.usedAt < $1.usedAt }?.uri
    }

    /// The same, read from the `recently-used.xbel` at `path`; nil when there is none.
    public static func track(playedBy program: String, since: UInt64, recordedIn path: String) -> String? {
        // GTK keeps the file small (it drops documents past an age and a count); 16 MiB is far past that.
        guard let text = DesktopApp.readSmallFile(path, limit: 16 << 20) else { return nil }
        return track(playedBy: program, since: since, in: RecentlyUsed.documents(in: text))
    }

    /// The program of the desktop entry `id` (a player's `DesktopEntry`); nil when none is installed.
    public static func program(ofEntry id: String, in applicationDirectories: [String]) -> String? {
        DesktopApp.find(id: id, in: applicationDirectories)?.exec.flatMap(DesktopApp.program)
    }

    /// When process `pid` started, in µs since the epoch, from `proc` (`/proc`): its start in clock
    /// ticks after boot (`stat`'s 22nd field) and when the machine booted (`btime`); nil when
    /// either cannot be read (the process ended, or is in another pid namespace).
    public static func processStart(_ pid: UInt32, proc: String = "/proc") -> UInt64? {
        guard let stat = DesktopApp.readSmallFile("\(proc)/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return nil }
        // After the command's closing parenthesis (field 2) come fields 3, 4, …: the 22nd is the 20th.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let ticks = UInt64(fields[19]),
              let boot = DesktopApp.readSmallFile("\(proc)/stat")?.split(separator: "\n")
                .first(where: { $0.hasPrefix("btime ") }).flatMap({ UInt64($0.dropFirst(6)) }) else { return nil }
        let hertz = UInt64(max(1, sysconf(Int32(_SC_CLK_TCK))))
        return boot * 1_000_000 + ticks * 1_000_000 / hertz
    }

    private static func basename(_ path: String) -> Substring {
        path.split(separator: "/").last ?? Substring(path)
    }
}
