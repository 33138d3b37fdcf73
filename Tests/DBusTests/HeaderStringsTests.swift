@testable import DBus
import Testing

/// The strings of incoming headers, shared between messages that name the same thing.
struct HeaderStringsTests {
    /// Where a string's bytes live: equal for two strings only when they share storage.
    private func storage(_ text: String) -> UnsafeRawPointer? {
        text.utf8.withContiguousStorageIfAvailable { UnsafeRawPointer($0.baseAddress) } ?? nil
    }

    @Test func aStringSeenAgainIsSharedNotCopied() {
        var known = HeaderStrings()
        let first = "/org/baton/Handoff1/scene/one".withCString { known.string($0) }
        let again = "/org/baton/Handoff1/scene/one".withCString { known.string($0) }
        #expect(again == first)
        #expect(storage(again) != nil && storage(again) == storage(first))
    }

    @Test func stringsOfTheSameLengthAreNeverMistakenForEachOther() {
        var known = HeaderStrings()
        let paths = (0..<10).map { "/org/baton/Handoff1/scene/\($0)" }
        for path in paths { _ = path.withCString { known.string($0) } }
        for path in paths.reversed() {
            #expect(path.withCString { known.string($0) } == path)
        }
    }

    @Test func manyMoreStringsThanItKeepsStillReadBackExactly() {
        var known = HeaderStrings()
        // Three rounds over 100 names: every round evicts what the last one stored.
        for _ in 0..<3 {
            for index in 0..<100 {
                let name = "org.example.Interface\(index)"
                #expect(name.withCString { known.string($0) } == name)
            }
        }
        // Short strings (stored inline) and the empty string go through as they are.
        #expect(":1.42".withCString { known.string($0) } == ":1.42")
        #expect("".withCString { known.string($0) } == "")
    }
}
