import ArgumentParser
import BatonCore
import BatonService
import DBus
import Glibc

/// `batond`: the Baton daemon. All logic lives in BatonService; this parses options. Run by the
/// `batond` program and by `baton` when it is started as `batond` (the package ships one program,
/// see Sources/baton).
public struct Batond: AsyncParsableCommand {
    public init() {}

    public static let configuration = CommandConfiguration(
        commandName: "batond",
        abstract: "Serve org.baton.Handoff1: user activities and scene restoration on the D-Bus session bus.",
        discussion: """
            Normally started by systemd (systemctl --user start batond) or by D-Bus activation. \
            State lives in $XDG_STATE_HOME/baton/baton.sqlite (~/.local/state/baton/ by default), \
            which batond creates with mode 0700 and refuses if other users can reach it. \
            Every acknowledged write is committed first.

            Logs go to stderr, with journald priorities when stderr is the journal. On SIGTERM \
            or SIGINT batond stops taking calls, answers every call it took, and exits 0. \
            Under systemd it reports READY, STATUS and STOPPING and pings the watchdog.
            """)

    @Option(name: .long, help: ArgumentHelp(
        "The SQLite database file, instead of the default; created 0600.", valueName: "path"))
    var database: String?

    @Option(name: .long, help: ArgumentHelp("A bus address to use instead of the session bus.", valueName: "address"))
    var address: String?

    @Option(name: .long, help: ArgumentHelp("Seconds Continue waits for an app's handler.", valueName: "seconds"))
    var handlerTimeout: Double = 10

    @Option(name: .long, help: ArgumentHelp(
        "Live activities each app may keep; past it, its oldest non-persistent ones are removed.", valueName: "count"))
    var maxLiveActivities: Int = Limits.default.liveActivitiesPerApp

    @Option(name: .long, help: ArgumentHelp(
        "Calls one client may have waiting for answers; beyond, batond answers LimitsExceeded at once.", valueName: "count"))
    var maxCallsPerClient: Int = 256

    @Option(name: .long, help: ArgumentHelp(
        "Days the history keeps activities that ended; 0 keeps no history.", valueName: "days"))
    var historyDays: UInt64 = Limits.default.historySeconds / 86_400

    @Option(name: .long, help: ArgumentHelp(
        "MiB the history may take; past it, the activities that ended first go first. 0 keeps no history.", valueName: "MiB"))
    var historySize: Int = Limits.default.historyBytes / (1024 * 1024)

    @Flag(name: .long, help: "Log each registration, continuation and purge.")
    var verbose = false

    // For tests only: batond runs on a clock that stands still until a test moves it
    // (org.baton.Handoff1.Testing.AdvanceClock).
    @Flag(name: .long, help: .hidden)
    var testClock = false

    public func validate() throws {
        guard handlerTimeout > 0, handlerTimeout <= 600 else {
            throw ValidationError("--handler-timeout must be between 0 and 600 seconds")
        }
        guard maxCallsPerClient >= 1, maxCallsPerClient <= 100_000 else {
            throw ValidationError("--max-calls-per-client must be between 1 and 100000")
        }
        guard maxLiveActivities >= 1, maxLiveActivities <= 1_000_000 else {
            throw ValidationError("--max-live-activities must be between 1 and 1000000")
        }
        guard historyDays <= 3650 else { throw ValidationError("--history-days must be between 0 and 3650") }
        guard historySize >= 0, historySize <= 1_048_576 else { throw ValidationError("--history-size must be between 0 and 1048576 MiB") }
    }

    public func run() async throws {
        var options = DaemonOptions()
        options.database = database
        if let address { options.bus = .address(address) }
        options.verbose = verbose
        options.testClock = testClock
        options.limits.liveActivitiesPerApp = maxLiveActivities
        options.limits.historySeconds = historyDays * 86_400
        options.limits.historyBytes = historySize * 1024 * 1024
        options.callsPerCaller = maxCallsPerClient
        options.handlerTimeout = .milliseconds(Int(handlerTimeout * 1000))
        let status = await Daemon.run(options, environment: ProcessEnvironment.current())
        if status != 0 { throw ExitCode(status) }
    }
}

extension Batond {
    /// Parses the process's arguments and runs the daemon, as `@main` would.
    /// (Called from top-level code, `main()` resolves to ParsableCommand's synchronous one.)
    public static func runAsProgram() async {
        await main()
    }
}
