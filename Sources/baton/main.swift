// `baton`: the command line. Everything lives in BatonCLI, which the tests drive too; this
// only runs its root command with the command line shaped as people type it — or, run as
// `baton-browser-host` (a link to baton), the browser extension's native messaging host.
import BatonCLI
import Glibc

if CommandLine.arguments.first?.split(separator: "/").last.map(String.init) == BrowserHost.programName {
    exit(await BrowserHost.run())
}
await BatonCommand.runFromCommandLine()
