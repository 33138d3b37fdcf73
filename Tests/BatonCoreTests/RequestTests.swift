@testable import BatonCore
import Testing

struct IdentifierTests {
    @Test func identifiersAreLowercaseVersion7AndNormalize() throws {
        let id = Identifier.make()
        #expect(try Identifier.normalize(id) == id)
        #expect(id == id.lowercased())
        // Every id: 36 characters, dashes where UUIDs have them, version 7, RFC 9562 variant,
        // and every hex digit appears in every random position over many draws.
        var seen = Array(repeating: Set<Character>(), count: 36)
        for _ in 0..<2000 {
            let characters = Array(Identifier.make())
            #expect(characters.count == 36)
            #expect([8, 13, 18, 23].allSatisfy { characters[$0] == "-" })
            #expect(characters[14] == "7" && "89ab".contains(characters[19]), "\(String(characters))")
            for (index, character) in characters.enumerated() { seen[index].insert(character) }
        }
        #expect((20..<36).filter { $0 != 23 }.allSatisfy { seen[$0] == Set("0123456789abcdef") })
        // The time comes first, to the millisecond and then in 1/4096ths of it: ids sort by it.
        #expect(Identifier.make(at: 1_790_000_000_123_456).hasPrefix("01a0c450-6c7b-774b-"))
        let times: [UInt64] = [1_790_000_000_000_000, 1_790_000_000_000_001, 1_790_000_000_000_999, 1_790_000_000_001_000, 1_790_000_001_000_000]
        let ids = times.map { Identifier.make(at: $0) }
        #expect(ids.sorted() == ids && Set(ids).count == ids.count)
        #expect(try Identifier.normalize("3F2A9C1E-0000-4000-8000-00000000ABCD") == "3f2a9c1e-0000-4000-8000-00000000abcd")
        #expect(Set((0..<1000).map { _ in Identifier.make() }).count == 1000)
        for bad in ["", "3f2a9c1e", "3f2a9c1e-0000-4000-8000-00000000abcg", "3f2a9c1e_0000-4000-8000-00000000abcd", "../../etc/passwd"] {
            #expect(throws: BatonError.self) { try Identifier.normalize(bad) }
        }
    }

    @Test func reverseDNSNames() {
        let limits = Limits()
        for good in ["com.raywenderlich.hawknotes.staterestore.characterDetail", "org.baton.x-y_z", "a.b"] {
            #expect(throws: Never.self) { try Validate.reverseDNS(good, what: "type", limits: limits) }
        }
        for bad in ["", "single", "a..b", ".a.b", "a.b.", "a/b.c", "a.b\u{0}c", "émoji.🦅", String(repeating: "a.", count: 200) + "a"] {
            #expect(throws: BatonError.self) { try Validate.reverseDNS(bad, what: "type", limits: limits) }
        }
    }
}

struct RequestTests {
    let limits = Limits()
    let characterDetail = ActivityType(
        type: "com.raywenderlich.hawknotes.staterestore.characterDetail", appID: "com.raywenderlich.hawknotes",
        title: "Character", handler: "com.raywenderlich.hawknotes", requiredKeys: ["id"], payloadType: "Character")

    @Test func registrationReadsEveryOptionAndRefusesUnknownOnes() throws {
        let type = try ActivityType.registration(
            type: characterDetail.type, appID: characterDetail.appID,
            options: ["title": "Character", "handler": "com.raywenderlich.hawknotes", "required_keys": " id , ", "payload_type": "Character"],
            limits: limits)
        #expect(type == characterDetail)
        do {
            _ = try ActivityType.registration(type: characterDetail.type, appID: characterDetail.appID, options: ["handlr": "x"], limits: limits)
            Issue.record("a misspelt option was accepted")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.message == "RegisterActivityType has no option 'handlr'; its options are title, handler, handler_path, required_keys, payload_type, replace")
        }
    }

    @Test func advertiseChecksPayloadOptionsAndBuildsTheActivity() throws {
        let advertisement = try Advertisement.parse(
            type: characterDetail, title: "Agatha", payload: #"{"id":"a1","name":"Agatha"}"#,
            options: ["target_content_id": "a1", "keywords": "witch, mentor,", "expires_in": "60",
                      "eligible_for_search": "true", "webpage_url": "https://example.org/agatha", "scene": "/org/baton/Handoff1/scene/x"],
            limits: limits)
        let activity = advertisement.makeActivity(id: "id-1", type: characterDetail, sceneID: "s", now: 1_000_000)
        #expect(activity.appID == "com.raywenderlich.hawknotes")
        #expect(activity.keywords == ["witch", "mentor"])
        #expect(activity.expiresAt == 61_000_000)
        #expect(activity.eligibleForHandoff && activity.eligibleForSearch)
        #expect(activity.payloadType == "Character")
        #expect(advertisement.scene == "/org/baton/Handoff1/scene/x")
        #expect(activity.isExpired(at: 61_000_000) && !activity.isExpired(at: 60_999_999))

        let failures: [([String: String], String, BatonError.Code)] = [
            (["expires_in": "0"], "{\"id\":1}", .invalidArgument),
            (["expires_in": "-5"], "{\"id\":1}", .invalidArgument),
            (["eligible_for_search": "yes"], "{\"id\":1}", .invalidArgument),
            (["webpage_url": "javascript:alert(1)"], "{\"id\":1}", .invalidArgument),
            (["keywords": (0...64).map { "k\($0)" }.joined(separator: ",")], "{\"id\":1}", .quotaExceeded),
            (["colour": "red"], "{\"id\":1}", .invalidArgument),
            ([:], "{\"name\":\"no id\"}", .invalidPayload),
            ([:], "{\"id\":1,\"id\":2}", .invalidPayload),
        ]
        for (options, payload, code) in failures {
            do {
                _ = try Advertisement.parse(type: characterDetail, title: "t", payload: payload, options: options, limits: limits)
                Issue.record("accepted \(options) \(payload)")
            } catch {
                #expect(error.code == code, "\(options): \(error)")
            }
        }
        #expect(throws: BatonError.quotaExceeded("the title is 1025 bytes; the limit is 1024")) {
            try Advertisement.parse(type: characterDetail, title: String(repeating: "x", count: 1025), payload: "{\"id\":1}", options: [:], limits: limits)
        }
    }

    @Test func updateMergesPayloadKeysAndKeepsRequiredOnes() throws {
        let original = try Advertisement.parse(type: characterDetail, title: "Agatha", payload: #"{"id":"a1","name":"Agatha"}"#,
                                               options: ["keywords": "witch"], limits: limits)
            .makeActivity(id: "x", type: characterDetail, sceneID: nil, now: 10)
        let update = try ActivityUpdate(payload: #"{"name":"Agatha the Wise","book":1}"#, options: ["title": "Agatha!", "expires_in": "1"], limits: limits)
        let updated = try update.apply(to: original, type: characterDetail, now: 20, limits: limits)
        #expect(updated.payload == #"{"id":"a1","name":"Agatha the Wise","book":1}"#)
        #expect(updated.title == "Agatha!" && updated.keywords == ["witch"])
        #expect(updated.updatedAt == 20 && updated.createdAt == 10 && updated.expiresAt == 1_000_020)

        let untouched = try ActivityUpdate(payload: "", options: [:], limits: limits).apply(to: original, type: characterDetail, now: 30, limits: limits)
        #expect(untouched.payload == original.payload)
        #expect(throws: BatonError.self) { try ActivityUpdate(payload: "{\"a\":NaN}", options: [:], limits: limits) }
        #expect(throws: BatonError.self) {
            try ActivityUpdate(payload: "", options: ["colour": "x"], limits: limits).apply(to: original, type: characterDetail, now: 1, limits: limits)
        }
        // The scene to move to is for the service to resolve: "" (resign), a scene, or unchanged.
        #expect(try ActivityUpdate(payload: "", options: ["scene": ""], limits: limits).scene == "")
        #expect(try ActivityUpdate(payload: "", options: ["scene": "/x"], limits: limits).scene == "/x")
        #expect(try ActivityUpdate(payload: "", options: [:], limits: limits).scene == nil)
    }

    @Test func storageValuesAreChecked() {
        #expect(throws: Never.self) { try StorageValue.string("b|x::c|y").validate(key: "k", limits: limits) }
        #expect(throws: BatonError.self) { try StorageValue.string("a\u{0}b").validate(key: "k", limits: limits) }
        #expect(throws: BatonError.self) { try StorageValue.double(.nan).validate(key: "k", limits: limits) }
        #expect(throws: BatonError.self) { try StorageValue.bytes(Array(repeating: 0, count: 64 * 1024 + 1)).validate(key: "k", limits: limits) }
        #expect(throws: BatonError.self) { try Validate.storageKey("", limits: limits) }
    }

    /// Short strings live inside the String value and long ones on the heap: a NUL is found
    /// in both, wherever it is, and text without one passes.
    @Test func textWithANulByteIsRefused() {
        let long = String(repeating: "x", count: 300)
        for text in ["\u{0}", "a\u{0}", "\u{0}b", "Agatha\u{0}", long + "\u{0}", "\u{0}" + long, long + "\u{0}" + long] {
            #expect(throws: BatonError.invalidArgument("the title contains a NUL byte")) {
                try Validate.text(text, what: "the title", limit: 1_000)
            }
        }
        for text in ["", "Agatha", long] {
            #expect(throws: Never.self) { try Validate.text(text, what: "the title", limit: 1_000) }
        }
    }
}
