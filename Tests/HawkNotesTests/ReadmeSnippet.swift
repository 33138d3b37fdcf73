// Compiles the guide's BatonKit example (docs/guide.md, "Using BatonKit") so it cannot drift from the API.
import BatonKit
import Foundation

private struct Document: Codable { var id: UUID }

private func readmeBatonKitExample(bookID: String, document: Document) async throws {
    let client = try BatonClient()                       // the session bus
    let scene = try await client.openScene(appID: "com.example.notes")
    try await scene.storage.scoped("BookView", id: bookID).set("newNote", "a draft")

    let activity = UserActivity(activityType: "com.example.notes.document", client: client)
    activity.title = "Chapter 3"
    try activity.setTypedPayload(document)               // any Encodable that encodes as an object
    try await activity.becomeCurrent(in: scene)

    // The counterpart of onContinueUserActivity: the daemon calls this to open a scene.
    let continuation = ActivityContinuation(client: client, appID: "com.example.notes", busName: "com.example.notes")
    continuation.onContinue("com.example.notes.document", requiredKeys: ["id"]) { continued in
        let document = try continued.typedPayload(Document.self)
        try await continued.storage.set("OpenDocument", document.id.uuidString)
    }
    try await continuation.start()
}
