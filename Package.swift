// swift-tools-version: 6.2
import PackageDescription

// The shipped programs are linked by lld, with relative relocations packed (DT_RELR, glibc ≥ 2.36).
// batond carries about 82 000 of them: 2 MB of .rela.dyn that the loader read at every start and
// kept resident, now 16 KB. Its idle RSS fell from 20.7 to 19.1 MB (Benchmarks/rss, README there).
// Nor do they export their symbols (38 000 in batond, nothing calls dlsym on it): the loader kept
// the whole dynamic symbol table resident, 2.3 MB of batond's idle RSS.
let packedRelocations: [LinkerSetting] = [
    .unsafeFlags(["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs", "-Xlinker", "--no-export-dynamic"], .when(platforms: [.linux])),
]

// Nonisolated async functions run on their caller's executor (SE-0461), as they will by default
// in a later language mode. Calls arrive on the connection's bus thread; without this, each
// nonisolated async call on their way asked the runtime whether to switch executors (about
// 1 600 of a Properties.Get's 69 400 instructions under callgrind).
//
// Warnings are errors in our own targets only: a `-Xswiftc -warnings-as-errors` on the command
// line would reach every dependency too, so `scripts/test` would rebuild them all after a plain
// `swift build`.
let swiftSettings: [SwiftSetting] = [.enableUpcomingFeature("NonisolatedNonsendingByDefault"), .treatAllWarnings(as: .error)]

// The layers are described in docs/DESIGN.md; each target owns one of them.
let package = Package(
    name: "Baton",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "DBus", targets: ["DBus"]),
        .library(name: "BatonCore", targets: ["BatonCore"]),
        .library(name: "BatonKit", targets: ["BatonKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // Sync across machines only (BatonSync): the encryption of what leaves the machine.
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
    ],
    targets: [
        // libdbus-1 through pkg-config; Debian's package is libdbus-1-dev.
        .systemLibrary(
            name: "CDBus",
            pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]
        ),
        // Debian's libsqlite3 through pkg-config (libsqlite3-dev): the store's database.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // Debian's libpq (libpq-dev's header; libpq5 at run time): the sync server's client, TLS and SCRAM
        // included. Opened with dlopen when batond first syncs through PostgreSQL, not linked (shim.h says why).
        .systemLibrary(name: "CPostgres"),
        // libX11 and libXfixes for the clipboard agent, opened at run time (Sources/CX11/shim.h).
        .systemLibrary(name: "CX11"),
        // glibc's <malloc.h>: malloc_trim, for an idle batond to hand back what malloc keeps free.
        .systemLibrary(name: "CMalloc"),
        // A small, safe Swift API over libdbus: one bus thread, typed values, exported objects.
        .target(name: "DBus", dependencies: ["CDBus"]),
        // The domain: activity types, activities, scenes, storage values, validation, limits. No D-Bus, no SQL.
        .target(name: "BatonCore"),
        // The D-Bus contract declared once for the daemon, BatonKit and baton: names, paths, methods and
        // signals with their arguments, records, scene values, the error mapping both ways. No Foundation.
        .target(name: "BatonContract", dependencies: ["DBus", "BatonCore"]),
        // Persistence of the domain in SQLite (WAL) through a small layer of our own over libsqlite3:
        // one writer connection, one reader.
        .target(name: "BatonStore", dependencies: ["BatonCore", "CSQLite"]),
        // Sync across machines: the key and its recovery words, sealed records, the outbox drained to PostgreSQL
        // and the other devices' logs applied to the store, as one Service.
        .target(name: "BatonSync", dependencies: [
            "BatonCore", "BatonStore", "CPostgres",
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // The org.baton.Handoff1 interfaces: D-Bus to domain, handler calls, the daemon's life as Services in a ServiceGroup.
        .target(name: "BatonService", dependencies: [
            "DBus", "BatonContract", "BatonCore", "BatonStore", "BatonSync", "CMalloc",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // The Swift client library for apps: UserActivity, scenes and their storage.
        .target(name: "BatonKit", dependencies: ["DBus", "BatonContract", "BatonCore"]),
        // The reference app's model (books, characters, notes, paths) and its scenes.
        .target(name: "HawkNotes", dependencies: ["BatonKit"]),
        // The daemon's command line over BatonService; run by `batond` and by `baton` started as `batond`.
        .target(name: "BatondCommand", dependencies: [
            "BatonService", "BatonCore", "DBus", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // The daemon, a thin executable (development and tests; the package ships `baton` under this name).
        .executableTarget(name: "batond", dependencies: ["BatondCommand", "BatonCore"], linkerSettings: packedRelocations),

        // Shared by every test suite: private buses, temp directories, running built binaries.
        .target(name: "TestSupport", dependencies: ["DBus", "BatonCore"], path: "Tests/TestSupport"),
        .testTarget(name: "DBusTests", dependencies: ["DBus", "TestSupport"]),
        .testTarget(name: "BatonCoreTests", dependencies: ["BatonCore"]),
        .testTarget(name: "BatonContractTests", dependencies: ["BatonContract", "BatonCore", "DBus", "CDBus"]),
        .testTarget(name: "BatonStoreTests", dependencies: ["BatonStore", "BatonSync", "TestSupport", "CSQLite"]),
        .testTarget(name: "BatonServiceTests", dependencies: [
            "BatonService", "TestSupport", "batond", "hawk-notes", "baton", .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "BatonSyncTests", dependencies: ["BatonSync", "TestSupport", "BatonKit", "HawkNotes", "batond", "baton", "hawk-notes"]),
        .testTarget(name: "BatonKitTests", dependencies: ["BatonKit", "TestSupport", "batond"]),
        .testTarget(name: "BatonCLITests", dependencies: ["TestSupport", "baton", "batond"], exclude: ["Snapshots"]),
        .testTarget(name: "HawkNotesTests", dependencies: ["HawkNotes", "TestSupport", "batond", "hawk-notes"]),

        // Benchmarks (run on demand, see Benchmarks/README.md): the echo server built on our layer.
        .executableTarget(name: "dbus-echo-server", dependencies: ["DBus"], path: "Benchmarks/EchoServer"),
        // Benchmarks: a connection's calls while thousands of its calls wait (Benchmarks/pending-calls).
        .executableTarget(name: "bench-pending-calls", dependencies: ["DBus"], path: "Benchmarks/PendingCalls"),
        // Benchmarks: the least a Swift program can do to make baton's benchmarked call (no DBus module).
        .executableTarget(name: "cli-floor", dependencies: ["CDBus"], path: "Benchmarks/CLIFloor", linkerSettings: packedRelocations),
        // Benchmarks: sync across machines on loopback (scripts/bench-sync): latency, catch-up, a fleet of 200 devices.
        .executableTarget(name: "bench-sync", dependencies: [
            "BatonCore", "BatonStore", "BatonSync", "DBus", "TestSupport", .product(name: "Logging", package: "swift-log"),
        ], path: "Benchmarks/SyncBench"),
        // The companion CLI: commands over the bus, tables or JSON. No Foundation, for a fast start.
        .target(name: "BatonCLI", dependencies: [
            "DBus", "BatonContract", "BatonCore", "ClipboardAgent", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // The clipboard agent of a graphical session (`baton clipboard-agent`): the display's side.
        .target(name: "ClipboardAgent", dependencies: ["CX11", "DBus", "BatonContract", "BatonCore"]),
        // The shipped program: the CLI, and by the name it is started as the daemon, the browser's
        // host and the reference app (Sources/baton/main.swift).
        .executableTarget(name: "baton", dependencies: [
            "BatonCLI", "BatonCore", "BatondCommand", "HawkNotesCommand", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ], linkerSettings: packedRelocations),
        // The reference app's command line: serve (handler and library), books, show SCENE.
        .target(name: "HawkNotesCommand", dependencies: [
            "HawkNotes", "BatonKit", "BatonCore", "DBus", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ]),
        // The reference app, a thin executable (development and tests; the package ships `baton` under this name).
        .executableTarget(name: "hawk-notes", dependencies: ["HawkNotesCommand", "BatonCore"], linkerSettings: packedRelocations),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + swiftSettings
}
