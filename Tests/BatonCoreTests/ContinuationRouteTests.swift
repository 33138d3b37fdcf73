import BatonCore
import Testing

/// Where `Continue` goes, decided without a bus or a store: every route and every refusal.
struct ContinuationRouteTests {
    static let app = "com.raywenderlich.hawknotes"
    static let typeName = app + ".staterestore.characterDetail"
    static let withHandler = ActivityType(type: typeName, appID: app, handler: app)
    static let withoutHandler = ActivityType(type: typeName, appID: app)
    static let outside: Set<String> = ["org.freedesktop.RecentDocument", "org.baton.web.page"]

    static func activity(
        type: String = typeName, content: String? = "agatha", page: String? = nil, handoff: Bool = true
    ) -> Activity {
        Activity(id: "a1", type: type, appID: type == typeName ? app : "org.baton.Source", title: "Agatha", payload: "{}",
                 targetContentID: content, webpageURL: page, eligibleForHandoff: handoff, createdAt: 1, updatedAt: 1)
    }

    func route(
        _ options: [String: String] = [:], of activity: Activity = activity(), confinedTo app: String? = nil,
        type: ActivityType? = withHandler, unrecorded: Bool = false, thisDevice: String = ""
    ) throws -> ContinuationRoute {
        try ContinuationRoute.route(for: activity, confinedTo: app, options: try ContinuationRoute.Options(options), thisDevice: thisDevice,
                                    type: type, unrecorded: unrecorded, opensOutside: Self.outside)
    }

    func refusal(_ body: () throws -> ContinuationRoute) -> BatonError.Code? {
        do {
            _ = try body()
            return nil
        } catch let error as BatonError {
            return error.code
        } catch {
            return nil
        }
    }

    @Test func intoTheSceneThatShowsTheContentOrANewOne() throws {
        #expect(try route() == .scene(Self.withHandler, .showing("agatha"), .handler))
        #expect(try route(of: Self.activity(content: nil)) == .scene(Self.withHandler, .new, .handler))
        #expect(try route(["new_scene": "true"]) == .scene(Self.withHandler, .new, .handler))
        #expect(try route(["scene": "/org/baton/Handoff1/scene/x"]) == .scene(Self.withHandler, .named("/org/baton/Handoff1/scene/x"), .handler))
        #expect(try route(type: Self.withoutHandler) == .scene(Self.withoutHandler, .showing("agatha"), .withoutHandler))
        #expect(try route(unrecorded: true) == .scene(Self.withHandler, .showing("agatha"), .unrecorded))
        #expect(try route(["wait": "false"]) == .scene(Self.withHandler, .showing("agatha"), .handler))
    }

    @Test func sourcesOpenOutsideAScene() throws {
        for type in Self.outside {
            #expect(try route(of: Self.activity(type: type), type: nil) == .outside, "\(type)")
            // Named into a scene, a source's activity goes there like any other.
            let registered = ActivityType(type: type, appID: "org.baton.Source")
            #expect(try route(["scene": "s"], of: Self.activity(type: type), type: registered) == .scene(registered, .named("s"), .withoutHandler))
        }
        // No app here continues it: its web page, unless a scene was named.
        #expect(try route(of: Self.activity(page: "https://example.org"), type: nil) == .webPage)
        #expect(refusal { try route(["scene": "s"], of: Self.activity(page: "https://example.org"), type: nil) } == .unknownActivityType)
        #expect(refusal { try route(type: nil) } == .unknownActivityType)
    }

    @Test func toAnotherMachine() throws {
        #expect(try route(["device": "laptop"], thisDevice: "d1") == .onDevice("laptop"))
        #expect(try route(["device": "laptop"]) == .onDevice("laptop"), "sync off: the daemon says SyncUnavailable")
        // This machine, or none named: here.
        #expect(try route(["device": "d1"], thisDevice: "d1") == .scene(Self.withHandler, .showing("agatha"), .handler))
        #expect(try route(["device": ""]) == .scene(Self.withHandler, .showing("agatha"), .handler))
        // Before the sources: a document continued on its machine opens there.
        #expect(try route(["device": "laptop"], of: Self.activity(type: "org.freedesktop.RecentDocument"), type: nil) == .onDevice("laptop"))
        #expect(refusal { try route(["device": "laptop"], unrecorded: true) } == .notEligible, "what was paused stays here")
    }

    @Test func refusalsNameWhatToChange() throws {
        #expect(refusal { try route(["colour": "red"]) } == .invalidArgument)
        #expect(refusal { try route(["wait": "soon"]) } == .invalidArgument)
        #expect(refusal { try route(["new_scene": "true", "scene": "s"]) } == .invalidArgument)
        #expect(refusal { try route(of: Self.activity(handoff: false)) } == .notEligible)
        // A sandboxed caller sees only its own app's activities: another's does not exist for it.
        #expect(refusal { try route(confinedTo: "org.example.Other") } == .notFound)
        #expect(try route(confinedTo: Self.app) == .scene(Self.withHandler, .showing("agatha"), .handler))
        #expect(try ContinuationRoute.Options(["wait": "false", "new_scene": "true"]) == ContinuationRoute.Options(newScene: true, wait: false))
    }
}
