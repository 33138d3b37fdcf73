// `batond`, for development and the tests: the daemon's command lives in BatondCommand, which the
// shipped `baton` program runs too when started as `batond`.
import BatonCore
import BatondCommand

runProgram { await Batond.runAsProgram() }
