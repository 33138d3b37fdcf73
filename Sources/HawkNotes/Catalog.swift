#if canImport(FoundationEssentials)
import FoundationEssentials  // no ICU data: see BatonCore/ArchiveDocument.swift
#else
import Foundation
#endif

/// A character of the Shadow Skye trilogy. Encoded as JSON, this is the payload of a
/// `characterDetail` activity; continuing one needs only its `id`.
public struct Character: Codable, Hashable, Sendable, Identifiable {
    public let id: UUID
    public let name: String
    /// One line about who they are.
    public let sketch: String

    public init(id: UUID, name: String, sketch: String = "") {
        self.id = id
        self.name = name
        self.sketch = sketch
    }

    // A shell user's payload may carry only the id (and a name): the sketch is optional.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(UUID.self, forKey: .id)
        name = try container.decodeIfPresent(String.self, forKey: .name) ?? ""
        sketch = try container.decodeIfPresent(String.self, forKey: .sketch) ?? ""
    }
}

/// A book of the trilogy, with the characters it introduces.
public struct Book: Codable, Hashable, Sendable, Identifiable {
    public let id: UUID
    public let title: String
    public let tagline: String
    public let synopsis: String
    /// Main characters, in order of appearance; the first book listing a character introduces them.
    public let characters: [Character]
}

/// The app's bundled catalog: the three books, fixed ids.
public enum Catalog {
    public static let agatha = Character(
        id: uuid("0edb89dd-1bdb-4aad-b0b3-c2e9b397f2d5"), name: "Agatha",
        sketch: "Keeper of the island's hawks, sharp-eyed and fiercely loyal.")
    public static let jamie = Character(
        id: uuid("fd0a841d-7800-4547-99b0-61a307bb99c8"), name: "Jamie",
        sketch: "A quiet boy who would rather read than fight.")
    public static let sigrid = Character(
        id: uuid("0e773c50-ae81-4611-9234-9ec676c1e16a"), name: "Sigrid",
        sketch: "A raider's daughter with a choice to make.")
    public static let ladyBeatrice = Character(
        id: uuid("dea9b1ab-cf4b-4c8d-94b2-3fdd9fbf848a"), name: "Lady Beatrice",
        sketch: "A ruler whose kindness hides an iron will.")
    public static let fletcher = Character(
        id: uuid("cde59da2-8d24-48aa-b712-dff7bcb88182"), name: "Fletcher",
        sketch: "A fisherman's son who never leaves a friend behind.")

    public static let goodHawk = Book(
        id: uuid("f1597af6-7f54-4136-ae1d-dd470ba37d59"), title: "The Good Hawk",
        tagline: "Two unlikely friends, one island to save.",
        synopsis: "When raiders come to Skye, Agatha and Jamie must cross a ruined land to bring their clan home.",
        characters: [agatha, jamie])
    public static let brokenRaven = Book(
        id: uuid("50defe16-e69c-40ff-b669-044907725139"), title: "The Broken Raven",
        tagline: "Old enemies, new loyalties.",
        synopsis: "A stranger from across the sea arrives with a warning, and Sigrid's loyalties are torn.",
        characters: [sigrid, agatha, jamie])
    public static let burningSwift = Book(
        id: uuid("9d1245ec-6db8-4ce6-b14a-e2a76bafb148"), title: "The Burning Swift",
        tagline: "Fire on the mainland, a crown at stake.",
        synopsis: "Lady Beatrice offers shelter at a price, and the friends must decide whom to trust.",
        characters: [ladyBeatrice, fletcher, agatha, jamie, sigrid])

    /// The books in reading order.
    public static let books = [goodHawk, brokenRaven, burningSwift]

    public static func book(id: UUID) -> Book? { books.first { $0.id == id } }

    public static func character(id: UUID) -> Character? {
        books.lazy.flatMap(\.characters).first { $0.id == id }
    }

    /// The book in which a character first appears.
    public static func book(introducing character: Character) -> Book? {
        books.first { $0.characters.contains { $0.id == character.id } }
    }

    private static func uuid(_ text: String) -> UUID {
        guard let id = UUID(uuidString: text) else { preconditionFailure("invalid catalog id \(text)") }
        return id
    }
}

/// `b|<book-id>::c|<character-id>`: which character is open in which book tab, as
/// the tutorial stores it in `BookView.SelectedCharacter`.
public struct CharacterPath: Hashable, Sendable, CustomStringConvertible {
    public let book: Book
    public let character: Character

    public init(book: Book, character: Character) {
        self.book = book
        self.character = character
    }

    public var description: String {
        "b|\(book.id.uuidString.lowercased())::c|\(character.id.uuidString.lowercased())"
    }

    /// Decodes a path, refusing malformed ones and ids the catalog does not know.
    public init(decoding text: String) throws(CharacterPathError) {
        let parts = text.components(separatedBy: "::")
        guard parts.count == 2, parts[0].hasPrefix("b|"), parts[1].hasPrefix("c|") else {
            throw .malformed(text)
        }
        guard let bookID = UUID(uuidString: String(parts[0].dropFirst(2))),
              let characterID = UUID(uuidString: String(parts[1].dropFirst(2))) else {
            throw .malformed(text)
        }
        guard let book = Catalog.book(id: bookID) else { throw .unknownBook(bookID) }
        guard let character = book.characters.first(where: { $0.id == characterID }) else {
            throw .notInBook(characterID, book: book.title)
        }
        self.init(book: book, character: character)
    }
}

public enum CharacterPathError: Error, Equatable, CustomStringConvertible {
    case malformed(String)
    case unknownBook(UUID)
    case notInBook(UUID, book: String)

    public var description: String {
        switch self {
        case .malformed(let text): "'\(text)' is not a character path; paths look like b|<book-id>::c|<character-id>"
        case .unknownBook(let id): "no book has the id \(id.uuidString.lowercased())"
        case .notInBook(let id, let book): "no character \(id.uuidString.lowercased()) in \(book)"
        }
    }
}

/// A study note on a book, or on one character in it.
public struct Note: Codable, Hashable, Sendable, Identifiable {
    public let id: UUID
    public var text: String
    public let bookID: UUID
    public let characterID: UUID?

    public init(id: UUID = UUID(), text: String, bookID: UUID, characterID: UUID? = nil) {
        self.id = id
        self.text = text
        self.bookID = bookID
        self.characterID = characterID
    }
}

/// The reader's notes and favourite characters.
public struct Notebook: Codable, Equatable, Sendable {
    public private(set) var notes: [Note] = []
    public private(set) var favourites: Set<UUID> = []

    public init() {}

    public mutating func add(_ note: Note) { notes.append(note) }
    public func notes(onBook id: UUID) -> [Note] { notes.filter { $0.bookID == id && $0.characterID == nil } }
    public func notes(onCharacter id: UUID) -> [Note] { notes.filter { $0.characterID == id } }
    public mutating func toggleFavourite(_ character: Character) {
        if favourites.remove(character.id) == nil { favourites.insert(character.id) }
    }
    public func isFavourite(_ character: Character) -> Bool { favourites.contains(character.id) }
}
