import ArgumentParser
import BatonCore
import BatonKit
import DBus
#if canImport(FoundationEssentials)
import FoundationEssentials  // no ICU data: see BatonCore/ArchiveDocument.swift
#else
import Foundation
#endif
import HawkNotes
import Glibc
import UnixSignals

/// `hawk-notes`: the reference app of Baton, headless. Run by the `hawk-notes` program and by
/// `baton` when it is started as `hawk-notes` (the package ships one program, see Sources/baton).
public struct HawkNotesCommand: AsyncParsableCommand {
    public init() {}

    public static let configuration = CommandConfiguration(
        commandName: "hawk-notes",
        abstract: "Study notes for the Shadow Skye trilogy, restored and continued through Baton.",
        subcommands: [Serve.self, Books.self, Show.self])

    struct BusOptions: ParsableArguments {
        @Option(name: .long, help: ArgumentHelp("A bus address to use instead of the session bus.", valueName: "address"))
        var address: String?

        func client() throws -> BatonClient {
            try BatonClient(address.map { .address($0) } ?? .session)
        }
    }

    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Own com.raywenderlich.hawknotes: continue characterDetail activities and list the books.",
            discussion: """
                Registers its activity type with batond on start (the bus can then start it on demand) and reopens \
                its windows (RestoreScenes); SIGTERM or SIGINT ends it cleanly (Detach). HAWK_NOTES_CRASH_ON_TAB=ID \
                makes it abort while reopening a window whose current tab is ID (fault injection for tests).
                """)
        @OptionGroup var bus: BusOptions

        func run() async throws {
            let client = try bus.client()
            let crashOnTab = ProcessInfo.processInfo.environment["HAWK_NOTES_CRASH_ON_TAB"]
            let windows = try await HawkNotesApp.serve(client: client, crashOnTab: crashOnTab)
            print("serving \(HawkNotesApp.busName) with \(windows.count) windows")
            fflush(nil)  // stdout is a pipe or a file for scripts and tests: say it now
            // SIGTERM and SIGINT end the run cleanly: batond is told (Detach), then the connection closes.
            let stop = await UnixSignalsSequence(trapping: .sigterm, .sigint)
            let stopping = Task {
                for await _ in stop { break }
                try? await HawkNotesApp.detach(client: client)
                client.close()
            }
            await client.connection.waitUntilClosed()
            stopping.cancel()
        }
    }

    struct Books: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the catalog: books, taglines and characters with their ids.")

        func run() {
            for book in Catalog.books {
                print("\(book.title)  \(book.id.uuidString.lowercased())")
                print("  \(book.tagline)")
                for character in book.characters {
                    print("  - \(character.name)  \(character.id.uuidString.lowercased())")
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a scene as its window would look.")
        @ArgumentParser.Argument(help: "The scene's object path or id.") var scene: String
        @OptionGroup var bus: BusOptions

        func run() async throws {
            let client = try bus.client()
            defer { client.close() }
            do {
                print(try await HawkNotesScene(scene: try client.scene(named: scene), client: client).render())
            } catch let error as BatonError {
                throw ValidationError(error.message)
            } catch let error as DBusError where error.name == DBusError.Name.unknownObject || error.name == DBusError.Name.serviceUnknown {
                throw ValidationError("no such scene, or batond is not running: \(error.message)")
            }
        }
    }
}

extension HawkNotesCommand {
    /// Parses the process's arguments and runs the command, as `@main` would.
    /// (Called from top-level code, `main()` resolves to ParsableCommand's synchronous one.)
    public static func runAsProgram() async {
        await main()
    }
}
