import BatonKit
import DBus
import Foundation
import Glibc
import HawkNotes
import Synchronization
import Testing
import TestSupport

/// Hawk Notes on two machines: Agatha opened on the desktop is continued on the laptop by the
/// laptop's own Hawk Notes (the desktop's app hears where it went), and the desktop can ask
/// for it to open on the laptop — through a server, and through folders a sync tool keeps the same.
@Suite(.serialized) struct ContinueAcrossMachinesTests {
    @Test(arguments: MachinesMeet.allCases) func continuedOnTheLaptopAndAskedForFromTheDesktop(meeting: MachinesMeet) async throws {
        let desktop = try await BatonWorld.started(), laptop = try await BatonWorld.started()
        defer { desktop.close(); laptop.close() }
        let (place, _) = try await meeting.join([desktop, laptop], names: ["desktop", "laptop"])
        defer { place.close() }
        let laptopID = try #require(try await laptop.syncProperty("DeviceId")?.stringValue)

        // The laptop runs the real Hawk Notes; the desktop's Hawk Notes is the library, in this process.
        let laptopApp = try Subprocess(try Executables.built("hawk-notes"), ["serve"], environment: laptop.bus.environment)
        defer { laptopApp.kill(SIGKILL) }
        try await laptop.client.waitForName(HawkNotesApp.busName, timeout: .seconds(15))
        let desktopClient = try BatonClient(.address(desktop.bus.address))
        defer { desktopClient.close() }
        try await HawkNotesApp.serve(client: desktopClient)
        let window = HawkNotesScene(scene: try await desktopClient.openScene(appID: HawkNotesApp.appID, title: "Window 1"), client: desktopClient)
        let agatha = try await window.open(Catalog.agatha, in: Catalog.goodHawk)
        let heard = Mutex<[String]>([])
        agatha.onContinued = { _, device in heard.withLock { $0.append(device) } }
        let id = try #require(agatha.id)

        // Continued on the laptop, as the laptop's user would: its Hawk Notes opens Agatha.
        try await eventually("the laptop has Agatha", timeout: .seconds(10)) {
            (try? await laptop.call("org.baton.Handoff1.Activities", "Get", [.string(id)])) != nil
        }
        let scene = try #require(try await laptop.call("org.baton.Handoff1.Activities", "Continue", [.string(id), .stringMap([:])])
            .first?.objectPathValue)
        let shown = try await laptop.run(try Executables.built("hawk-notes"), ["show", scene.text])
        #expect(shown.stdout.contains("The Good Hawk › Agatha"), "\(shown)")
        try await eventually("the desktop's Hawk Notes heard it went to the laptop", timeout: .seconds(10)) {
            heard.withLock { $0 } == [laptopID]
        }

        // Asked for from the desktop: a new window opens on the laptop, showing Agatha.
        let opened = try await SignalLog(laptop.client, MatchRule(interface: "org.baton.Handoff1.Activities", member: "Continued"))
        try await eventually("the desktop knows the laptop has Hawk Notes", timeout: .seconds(10)) {
            let devices = try await desktop.baton(["activities", "continue", id, "--device", "laptop"])
            return devices.status == 0
        }
        let continued = try await opened.wait(for: "Continued on the laptop", timeout: .seconds(10)) { $0.body.first?.stringValue == id }
        let newScene = try #require(continued.body.dropFirst().first?.objectPathValue)
        #expect(newScene != scene && continued.body.last?.boolValue == true)
        let second = try await laptop.run(try Executables.built("hawk-notes"), ["show", newScene.text])
        #expect(second.stdout.contains("The Good Hawk › Agatha"), "\(second)")
    }
}
