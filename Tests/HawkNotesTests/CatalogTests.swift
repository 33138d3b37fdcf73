import Foundation
@testable import HawkNotes
import Testing
import TestSupport

struct CatalogTests {
    @Test func theTrilogyWithFixedIDs() {
        #expect(Catalog.books.map(\.title) == ["The Good Hawk", "The Broken Raven", "The Burning Swift"])
        #expect(Catalog.goodHawk.characters.map(\.name) == ["Agatha", "Jamie"])
        #expect(Catalog.burningSwift.characters.first?.name == "Lady Beatrice")
        #expect(Catalog.agatha.id.uuidString.lowercased() == "0edb89dd-1bdb-4aad-b0b3-c2e9b397f2d5")
        let ids = Catalog.books.map(\.id) + Catalog.books.flatMap(\.characters).map(\.id)
        #expect(Set(Catalog.books.map(\.id)).count == 3)
        #expect(Set(ids).count == 3 + 5, "every character has one id across books")
        #expect(Catalog.books.allSatisfy { !$0.tagline.isEmpty && !$0.synopsis.isEmpty })
    }

    /// The GTK Hawk Notes reads the catalog from share/hawk-notes/catalog.json: the same books.
    @Test func theSharedCatalogFileIsThisCatalog() throws {
        let file = Repository.root.appendingPathComponent("share/hawk-notes/catalog.json")
        let decoder = JSONDecoder()
        #expect(try decoder.decode([Book].self, from: Data(contentsOf: file)) == Catalog.books)
    }

    @Test func eachCharacterIsIntroducedByTheirFirstBook() {
        #expect(Catalog.book(introducing: Catalog.agatha) == Catalog.goodHawk)
        #expect(Catalog.book(introducing: Catalog.sigrid) == Catalog.brokenRaven)
        #expect(Catalog.book(introducing: Catalog.ladyBeatrice) == Catalog.burningSwift)
        #expect(Catalog.book(introducing: Character(id: UUID(), name: "Stranger")) == nil)
    }

    @Test func characterPathsRoundTripAndRejectWhatIsWrong() throws {
        let path = CharacterPath(book: Catalog.goodHawk, character: Catalog.agatha)
        #expect(path.description == "b|f1597af6-7f54-4136-ae1d-dd470ba37d59::c|0edb89dd-1bdb-4aad-b0b3-c2e9b397f2d5")
        #expect(try CharacterPath(decoding: path.description) == path)
        #expect(try CharacterPath(decoding: path.description.uppercased().replacing("B|", with: "b|").replacing("C|", with: "c|")) == path)
        #expect(throws: CharacterPathError.malformed("agatha")) { try CharacterPath(decoding: "agatha") }
        #expect(throws: CharacterPathError.malformed("b|x::c|y")) { try CharacterPath(decoding: "b|x::c|y") }
        #expect(throws: CharacterPathError.self) { try CharacterPath(decoding: "b|\(Catalog.goodHawk.id)::c|\(Catalog.agatha.id)::extra") }
        let stranger = UUID()
        #expect(throws: CharacterPathError.unknownBook(stranger)) { try CharacterPath(decoding: "b|\(stranger)::c|\(Catalog.agatha.id)") }
        // Sigrid exists, but not in The Good Hawk: the tutorial's shared-key bug would produce this.
        #expect(throws: CharacterPathError.notInBook(Catalog.sigrid.id, book: "The Good Hawk")) {
            try CharacterPath(decoding: "b|\(Catalog.goodHawk.id)::c|\(Catalog.sigrid.id)")
        }
    }

    @Test func aMinimalPayloadDecodesAsACharacter() throws {
        let minimal = try JSONDecoder().decode(Character.self, from: Data(#"{"id": "0edb89dd-1bdb-4aad-b0b3-c2e9b397f2d5", "name": "Agatha"}"#.utf8))
        #expect(minimal.id == Catalog.agatha.id && minimal.sketch.isEmpty)
        let full = try JSONDecoder().decode(Character.self, from: JSONEncoder().encode(Catalog.jamie))
        #expect(full == Catalog.jamie)
    }

    @Test func notesAndFavourites() {
        var notebook = Notebook()
        notebook.add(Note(text: "on the book", bookID: Catalog.goodHawk.id))
        notebook.add(Note(text: "on Agatha", bookID: Catalog.goodHawk.id, characterID: Catalog.agatha.id))
        #expect(notebook.notes(onBook: Catalog.goodHawk.id).map(\.text) == ["on the book"])
        #expect(notebook.notes(onCharacter: Catalog.agatha.id).map(\.text) == ["on Agatha"])
        notebook.toggleFavourite(Catalog.jamie)
        #expect(notebook.isFavourite(Catalog.jamie))
        notebook.toggleFavourite(Catalog.jamie)
        #expect(!notebook.isFavourite(Catalog.jamie))
    }
}
