// `batond`, for development and the tests: the daemon's command lives in BatondCommand, which the
// shipped `baton` program runs too when started as `batond`.
import BatondCommand

await Batond.runAsProgram()
