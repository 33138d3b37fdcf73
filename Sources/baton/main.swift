// `baton`: the command line. Everything lives in BatonCLI, which the tests drive too; this
// only runs its root command with the command line shaped as people type it.
import BatonCLI

await BatonCommand.runFromCommandLine()
