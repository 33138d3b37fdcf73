/// Text as a search compares it: case- and accent-insensitive ("Agnès" finds "agnes"), with no
/// ICU and no Foundation.
///
/// A letter with a diacritic becomes its base letter, found through the names in the standard
/// library's own Unicode data: "LATIN SMALL LETTER E WITH GRAVE" is "LATIN SMALL LETTER E"
/// with something added. That covers the Latin, Greek and Cyrillic letters that carry marks,
/// as the store's FTS5 index (`unicode61 remove_diacritics 2`) folds them for the searches
/// SQLite answers; combining marks typed separately are dropped; then the text is lowercased.
public enum TextFolding {
    /// `text` folded: base letters, no combining marks, lowercase.
    public static func fold(_ text: String) -> String {
        var folded = String.UnicodeScalarView()
        for scalar in text.unicodeScalars where scalar.properties.generalCategory != .nonspacingMark {
            folded.append(bases[scalar.value] ?? scalar)
        }
        return String(folded).lowercased()
    }

    /// The folded words of `text`, split at spaces and punctuation: what a search matches.
    public static func words(_ text: String) -> [String] {
        fold(text).split(whereSeparator: { $0.isWhitespace || $0.isPunctuation }).map(String.init)
    }

    /// Each letter with a diacritic, by code point, and its base letter.
    private static let bases: [UInt32: Unicode.Scalar] = {
        // Basic Latin letters, Latin-1 Supplement to Latin Extended-B, Greek and Coptic, Cyrillic, Latin Extended
        // Additional, Greek Extended.
        let blocks: [ClosedRange<UInt32>] = [0x41...0x7A, 0xC0...0x24F, 0x370...0x4FF, 0x1E00...0x1FFF]
        let scalars = blocks.joined().compactMap(Unicode.Scalar.init)
        var byName: [String: Unicode.Scalar] = [:]
        for scalar in scalars { if let name = scalar.properties.name { byName[name] = scalar } }
        var bases: [UInt32: Unicode.Scalar] = [:]
        for scalar in scalars {
            guard let name = scalar.properties.name, let with = name.firstRange(of: " WITH ") else { continue }
            if let base = byName[String(name[..<with.lowerBound])] { bases[scalar.value] = base }
        }
        return bases
    }()
}
