import BatonCore
import BatonKit
import DBus
import Foundation
import Glibc
@testable import HawkNotes
import Testing
import TestSupport

/// A window whose state crashes Hawk Notes at launch: after three crashing launches in a
/// row, the fourth comes back without it (as Apple discards state that crashes an app).
@Suite(.serialized)
struct CrashAtLaunchTests {
    @Test func aWindowThatCrashesHawkNotesAtLaunchIsDiscarded() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let hawkNotes = try Executables.built("hawk-notes")
        let client = try BatonClient(.address(world.bus.address))
        defer { client.close() }

        // A first run: two windows, both restored fine; then one gets state that will crash
        // the app when it reopens, and the app is killed.
        var app = try await TutorialTests.HawkNotesProcess(bus: world.bus)
        defer { app.process.kill(SIGKILL) }
        let good = HawkNotesScene(scene: try await client.openScene(appID: HawkNotesApp.appID, title: "Good"), client: client)
        let poisoned = HawkNotesScene(scene: try await client.openScene(appID: HawkNotesApp.appID, title: "Poisoned"), client: client)
        try await good.select(Catalog.goodHawk)
        try await poisoned.scene.storage.set(HawkNotesApp.Key.currentTab, "poison")
        app.process.kill(SIGKILL)
        await app.process.wait()

        // Three launches crash while reopening the poisoned window.
        var environment = world.bus.environment
        environment["HAWK_NOTES_CRASH_ON_TAB"] = "poison"
        // Each launch waits until the bus has let go of the last one's name.
        func nameIsFree() async throws {
            try await eventually("Hawk Notes' name is free") { try await world.client.nameOwner(HawkNotesApp.busName) == nil }
        }
        for launch in 1...3 {
            try await nameIsFree()
            let crashed = try await Executables.run(hawkNotes, ["serve"], environment: environment)
            #expect(crashed.status == 128 + SIGABRT, "launch \(launch): \(crashed)")
        }
        #expect(try await client.scenes(appID: HawkNotesApp.appID).count == 2)

        // The fourth starts, without the poisoned window; the good one is there.
        try await nameIsFree()
        let output = world.bus.directory.appendingPathComponent("fourth.out").path
        let fd = open(output, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        let fourth = try Subprocess(hawkNotes, ["serve"], environment: environment, stdout: fd)
        close(fd)
        defer { fourth.kill(SIGKILL) }
        try await eventually("the fourth launch serves") {
            (try? String(contentsOfFile: output, encoding: .utf8))?.contains("serving \(HawkNotesApp.busName) with 1 windows") == true
        }
        #expect(try await client.scenes(appID: HawkNotesApp.appID).map(\.path) == [good.scene.path])
        #expect(world.daemonLog.contains("discarded scene \(poisoned.scene.id)"))
        #expect(!fourth.hasExited)

        // A clean stop (SIGTERM: Detach), then the next launch hears restore.
        fourth.kill(SIGTERM)
        #expect(await fourth.wait() == 0)
        let restored = try await client.restoreScenes(appID: HawkNotesApp.appID)
        #expect(restored.map(\.scene.path) == [good.scene.path])
        #expect(restored.map(\.reason) == [.restore])
        try await client.detach(appID: HawkNotesApp.appID)
        try await nameIsFree()
        app = try await TutorialTests.HawkNotesProcess(bus: world.bus)
    }
}
