// `baton`: the command line. Everything lives in BatonCLI, which the tests drive too;
// this only makes its root command the program's entry point (and so async).
import ArgumentParser
import BatonCLI

@main
extension BatonCommand {}
