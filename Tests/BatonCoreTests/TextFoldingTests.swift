import BatonCore
import Testing

/// Search's folding without ICU: case and accents fall away as in the store's FTS5 index.
struct TextFoldingTests {
    @Test func accentsAndCaseFallAway() {
        #expect(TextFolding.fold("Agnès") == "agnes")
        #expect(TextFolding.fold("ÇA VA, Chloé? Ångström Øre naïve Dvořák Łódź") == "ca va, chloe? angstrom ore naive dvorak lodz")
        #expect(TextFolding.fold("Ἀθῆναι Ελλάδα") == TextFolding.fold("αθηναι ελλαδα"))
        // A mark typed as its own code point after the letter.
        #expect(TextFolding.fold("Agne\u{300}s") == "agnes")
        // What has no diacritic stays as it is, lowercased.
        #expect(TextFolding.fold("Straße 🦅 東京") == "straße 🦅 東京")
    }

    @Test func wordsSplitAtSpacesAndPunctuation() {
        #expect(TextFolding.words("Lady Beatrice, of Strathclyde — Agnès!") == ["lady", "beatrice", "of", "strathclyde", "agnes"])
        #expect(TextFolding.words("  ").isEmpty)
    }
}
