// `baton`: the command line. Everything lives in BatonCLI, which the tests drive too; this only
// runs its root command with the command line shaped as people type it.
//
// The package ships this one program under four names (links to it), chosen by the name it is
// started as: `batond` (the daemon), `baton-browser-host` (the browser extension's native
// messaging host), `hawk-notes` (the reference app) and `baton`. The Swift runtime and
// FoundationEssentials, the bulk of each program that links them, are in the package once.
import BatonCLI
import BatonCore
import BatondCommand
import Glibc
import HawkNotesCommand

let name = CommandLine.arguments.first?.split(separator: "/").last.map(String.init)
runProgram {
    switch name {
    case "batond":
        await Batond.runAsProgram()
    case "hawk-notes":
        await HawkNotesCommand.runAsProgram()
    case BrowserHost.programName:
        exit(await BrowserHost.run())
    default:
        await BatonCommand.runFromCommandLine()
    }
}
