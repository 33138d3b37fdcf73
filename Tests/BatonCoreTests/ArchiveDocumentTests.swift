import BatonCore
import Foundation
import Testing

/// The export document on its own: what it writes reads back the same, and activities are
/// checked against the types that will hold them.
struct ArchiveDocumentTests {
    let notes = ActivityType(type: "com.example.notes.document", appID: "com.example.notes", title: "Document", requiredKeys: ["id"])

    func activity(_ type: ActivityType) -> Activity {
        Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "Chapter 3", payload: #"{"id":"c3"}"#,
                 keywords: ["draft"], createdAt: 1, updatedAt: 2)
    }

    @Test func whatItWritesReadsBackTheSame() throws {
        let scene = Scene(id: Identifier.make(), appID: notes.appID, title: "Window", createdAt: 3, lastActiveAt: 4)
        let document = ArchiveDocument(
            types: [notes], activities: [activity(notes)],
            history: [PastActivity(activity: activity(notes), endedAt: 5, endState: "expired", endReason: "expired")],
            scenes: [.init(scene: scene, storage: ["n": .int(-1), "d": .double(0.5), "b": .bytes([0, 255]), "s": .string("007"), "f": .bool(true)])])
        let read = try ArchiveDocument.decode(document.encoded(), registered: [], limits: Limits())
        #expect(read == document)
        #expect(read.encoded() == document.encoded())
    }

    @Test func anActivityMustFitTheTypeRegisteredHere() throws {
        // The export says the type is another app's; here it is registered to notes, and stays so.
        let theirs = ActivityType(type: notes.type, appID: "com.example.other", title: "Document")
        let text = ArchiveDocument(types: [theirs], activities: [activity(theirs)]).encoded()
        #expect(throws: BatonError.self) { try ArchiveDocument.decode(text, registered: [notes], limits: Limits()) }
        #expect(throws: Never.self) { try ArchiveDocument.decode(text, registered: [], limits: Limits()) }
    }
}
