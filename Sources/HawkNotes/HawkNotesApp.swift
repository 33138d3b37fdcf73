import BatonCore
import BatonKit
import DBus
#if canImport(FoundationEssentials)
import FoundationEssentials  // no ICU data: see BatonCore/ArchiveDocument.swift
#else
import Foundation
#endif
import Glibc

/// Hawk Notes on the bus: the Library interface, the continuation handler for
/// `characterDetail`, and the scene keys the tutorial stores.
///
/// Per-tab values are scoped by book (`BookView[<book-id>].…`), so a draft or an
/// open character belongs to one tab only: the tutorial's shared-key bug, fixed.
public enum HawkNotesApp {
    public static let appID = "com.raywenderlich.hawknotes"
    public static let busName = "com.raywenderlich.hawknotes"
    public static let path: ObjectPath = "/com/raywenderlich/hawknotes"
    public static let characterDetail = "com.raywenderlich.hawknotes.staterestore.characterDetail"

    /// Scene storage keys, as the tutorial names them.
    public enum Key {
        public static let currentTab = "ContentView.CurrentTab"
        public static let bookView = "BookView"
        public static let characterView = "CharacterView"
        public static let newNote = "newNote"
        public static let showingShop = "ShowingAmazonPage"
        public static let selectedCharacter = "SelectedCharacter"
    }

    /// Serves the app until the connection closes: Library.ListBooks and the handler,
    /// both at `path`, registers `characterDetail` with the daemon, then reopens the
    /// app's windows (`RestoreScenes`), acknowledging each that opened. Returns them.
    ///
    /// `crashOnTab` is fault injection for the crash-at-launch test: reopening a window
    /// whose current tab is that value aborts the process, as a bug in restoring would.
    @discardableResult
    public static func serve(client: BatonClient, crashOnTab: String? = nil) async throws -> [HawkNotesScene] {
        let continuation = ActivityContinuation(client: client, appID: appID, busName: busName, path: path)
        continuation.onContinue(characterDetail, title: "Character", requiredKeys: ["id"], payloadType: "Character") { continued in
            let payload = try continued.typedPayload(Character.self)
            guard let character = Catalog.character(id: payload.id), let book = Catalog.book(introducing: character) else {
                throw BatonError.invalidPayload("Hawk Notes has no character with id \(payload.id.uuidString.lowercased())")
            }
            try await continued.storage.set(Key.currentTab, book.id.uuidString.lowercased())
            try await continued.storage.scoped(Key.bookView, id: book.id.uuidString.lowercased())
                .set(Key.selectedCharacter, CharacterPath(book: book, character: character).description)
        }
        try await continuation.start(alongside: [libraryInterface])
        var windows: [HawkNotesScene] = []
        for (scene, _) in try await client.restoreScenes(appID: appID) {
            let window = HawkNotesScene(scene: scene, client: client)
            if let crashOnTab, try await scene.storage.string(Key.currentTab) == crashOnTab { abort() }
            _ = try await window.render()
            try await scene.acknowledge()
            windows.append(window)
        }
        return windows
    }

    /// A clean exit: the windows come back as `restore` at the next launch.
    public static func detach(client: BatonClient) async throws {
        try await client.detach(appID: appID)
    }

    static var libraryInterface: Interface {
        Interface("com.raywenderlich.hawknotes.Library", methods: [
            Method("ListBooks", out: [Argument("books", "aa{sv}")]) { _ in
                [.array(.dictionary(key: .string, value: .variant), Catalog.books.map { book in
                    .record([
                        "id": .string(book.id.uuidString.lowercased()), "title": .string(book.title),
                        "tagline": .string(book.tagline),
                        "characters": .array(.dictionary(key: .string, value: .variant), book.characters.map {
                            .record(["id": .string($0.id.uuidString.lowercased()), "name": .string($0.name)])
                        }),
                    ])
                })]
            },
        ])
    }
}

/// What a person does in a Hawk Notes window, as scene storage changes.
public struct HawkNotesScene: Sendable {
    public let scene: SceneHandle
    let client: BatonClient

    public init(scene: SceneHandle, client: BatonClient) {
        self.scene = scene
        self.client = client
    }

    private func tab(_ book: Book) -> SceneStorage {
        scene.storage.scoped(HawkNotesApp.Key.bookView, id: book.id.uuidString.lowercased())
    }

    public func select(_ book: Book) async throws {
        try await scene.storage.set(HawkNotesApp.Key.currentTab, book.id.uuidString.lowercased())
    }

    public func writeDraft(_ text: String, in book: Book) async throws {
        try await tab(book).set(HawkNotesApp.Key.newNote, text)
    }

    public func writeDraft(_ text: String, on character: Character) async throws {
        try await scene.storage.scoped(HawkNotesApp.Key.characterView, id: character.id.uuidString.lowercased())
            .set(HawkNotesApp.Key.newNote, text)
    }

    public func showShop(_ showing: Bool, in book: Book) async throws {
        try await tab(book).set(HawkNotesApp.Key.showingShop, showing)
    }

    /// Opens a character in a book's tab and advertises it as the scene's current activity.
    @discardableResult
    public func open(_ character: Character, in book: Book) async throws -> UserActivity {
        try await tab(book).set(HawkNotesApp.Key.selectedCharacter, CharacterPath(book: book, character: character).description)
        let activity = UserActivity(activityType: HawkNotesApp.characterDetail, client: client)
        activity.title = character.name
        activity.targetContentIdentifier = character.id.uuidString.lowercased()
        activity.isEligibleForSearch = true
        activity.keywords = [book.title]
        try activity.setTypedPayload(character)
        try await activity.becomeCurrent(in: scene)
        return activity
    }

    /// The scene drawn as its window would look, in text.
    public func render() async throws -> String {
        let storage = scene.storage
        let selectedID = try await storage.string(HawkNotesApp.Key.currentTab)
        let selected = Catalog.books.first { $0.id.uuidString.lowercased() == selectedID } ?? Catalog.goodHawk
        var lines = ["Hawk Notes — scene \(scene.id)" + (try await scene.isRestored() ? " (restored)" : "")]
        lines.append(Catalog.books.map { $0 == selected ? "[ \($0.title) ]" : "  \($0.title)  " }.joined(separator: "|"))
        lines.append(String(repeating: "─", count: 60))
        let tab = tab(selected)
        if let pathText = try await tab.string(HawkNotesApp.Key.selectedCharacter) {
            do {
                let path = try CharacterPath(decoding: pathText)
                lines.append("\(path.book.title) › \(path.character.name)")
                lines.append("  \(path.character.sketch)")
                let draft = try await storage.scoped(HawkNotesApp.Key.characterView, id: path.character.id.uuidString.lowercased())
                    .string(HawkNotesApp.Key.newNote)
                lines.append("  Draft note: " + (draft.map { "“\($0)”" } ?? "—"))
            } catch {
                lines.append("(the stored character could not be shown: \(error))")
            }
        } else {
            lines.append(selected.title)
            lines.append("  \(selected.tagline)")
            lines.append("  \(selected.synopsis)")
            lines.append("  Characters: " + selected.characters.map(\.name).joined(separator: ", "))
        }
        let draft = try await tab.string(HawkNotesApp.Key.newNote)
        lines.append("  Book draft: " + (draft.map { "“\($0)”" } ?? "—"))
        if try await tab.bool(HawkNotesApp.Key.showingShop) == true {
            lines.append("  Shop page: open (\(selected.title) at the bookshop)")
        }
        return lines.joined(separator: "\n")
    }
}
