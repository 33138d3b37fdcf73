// `hawk-notes`, for development and the tests: the reference app's command lives in
// HawkNotesCommand, which the shipped `baton` program runs too when started as `hawk-notes`.
import BatonCore
import HawkNotesCommand

runProgram { await HawkNotesCommand.runAsProgram() }
