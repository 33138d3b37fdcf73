import BatonContract
import BatonCore
import DBus
#if canImport(FoundationEssentials)
import FoundationEssentials  // no ICU data: see BatonCore/ArchiveDocument.swift
#else
import Foundation
#endif

/// One scene of the daemon: a window session with its own persisted storage.
public struct SceneHandle: Sendable, Hashable {
    let client: BatonClient
    /// The scene's object path, `/org/baton/Handoff1/scene/<id with _>`.
    public let path: ObjectPath

    init(client: BatonClient, path: ObjectPath) {
        self.client = client
        self.path = path
    }

    /// The scene's id.
    public var id: String { (try? SceneAddress.id(from: path.text)) ?? "" }

    public static func == (lhs: SceneHandle, rhs: SceneHandle) -> Bool { lhs.path == rhs.path }
    public func hash(into hasher: inout Hasher) { hasher.combine(path) }

    func call(_ method: ContractMethod, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await client.call(method, arguments, path: path)
    }

    private func property(_ name: String) async throws -> DBusValue? {
        try await client.connection.call(
            BatonClient.busName, path, "org.freedesktop.DBus.Properties", "Get",
            [.string(Contract.Interface.scene), .string(name)]).first?.unwrapped
    }

    /// The id of the scene's current activity, if any.
    public func activityID() async throws -> String? {
        let id = try await property(Contract.Scene.Property.activityID)?.stringValue ?? ""
        return id.isEmpty ? nil : id
    }

    /// The content ids this scene shows (SwiftUI's `handlesExternalEvents`): continuing an
    /// activity whose `targetContentIdentifier` is one of them comes into this scene.
    public func setHandlesContent(_ ids: [String]) async throws {
        _ = try await call(Contract.Scene.setHandlesContent, [.strings(ids)])
    }

    /// What `setHandlesContent(_:)` set, sorted.
    public func handlesContent() async throws -> [String] {
        try await property(Contract.Scene.Property.handlesContent).flatMap([String].init(dbusValue:)) ?? []
    }

    /// `ready`, `pending` (a continuation waits for the app) or `failed` (it never arrived).
    public func state() async throws -> Scene.State {
        try await property(Contract.Scene.Property.state)?.stringValue.flatMap(Scene.State.init(rawValue:)) ?? .ready
    }

    /// Why the app's last `restoreScenes` handed it out (`launch` before that).
    public func restoreReason() async throws -> Scene.RestoreReason {
        try await property(Contract.Scene.Property.restoreReason)?.stringValue.flatMap(Scene.RestoreReason.init(rawValue:)) ?? .launch
    }

    /// The app restored this scene fine: it no longer counts towards discarding scenes that
    /// come back as `recover` again and again (those that crash the app at launch).
    public func acknowledge() async throws {
        _ = try await call(Contract.Scene.acknowledge)
    }

    /// True when the scene came back from storage after a daemon restart.
    public func isRestored() async throws -> Bool { try await property(Contract.Scene.Property.restored)?.boolValue ?? false }

    /// The scene's storage, whole or narrowed to a scope.
    public var storage: SceneStorage { SceneStorage(scene: self, prefix: "") }

    /// Storage changes of this scene as they happen (from any client), until the
    /// stream is dropped. Subscribed before it returns: no later change is missed.
    public func changes() async throws -> AsyncStream<StorageChange> {
        let signals = try await client.connection.signals(matching: MatchRule(
            sender: BatonClient.busName, interface: Contract.Interface.scene, member: Contract.Scene.storageChanged.name, path: path))
        let (stream, continuation) = AsyncStream<StorageChange>.makeStream()
        let forwarder = Task {
            for await signal in signals {
                guard signal.body.count == 2, let changed = signal.body[0].stringKeyedValue,
                      let removed = [String](dbusValue: signal.body[1]) else { continue }
                continuation.yield(StorageChange(changed: Set(changed.keys), removed: Set(removed)))
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in forwarder.cancel() }
        return stream
    }

    /// Discards the scene and its storage, as closing a window does.
    public func close() async throws { _ = try await call(Contract.Scene.close) }
}

/// Which keys of a scene's storage changed: set (read their new values) or removed.
public struct StorageChange: Sendable, Equatable {
    public let changed: Set<String>
    public let removed: Set<String>
}

/// Typed access to a scene's storage: the values `@SceneStorage` accepts.
///
/// Keys can be scoped below the scene (`storage.scoped("BookView", id: book.id)`), so
/// that a per-tab value is stored per tab. The Hawk Notes tutorial's bug, every tab
/// restoring the same draft and the same character, comes from sharing one key.
public struct SceneStorage: StorageWriter {
    let scene: SceneHandle
    let prefix: String

    /// Storage whose keys live under `name[id].` — one namespace per tab, document or item.
    public func scoped(_ name: String, id: String? = nil) -> SceneStorage {
        SceneStorage(scene: scene, prefix: prefix + name + (id.map { "[\($0)]" } ?? "") + ".")
    }

    /// The full key a name is stored under.
    public func key(_ name: String) -> String { prefix + name }

    // MARK: Raw values

    func rawValue(_ name: String) async throws -> StorageValue? {
        do {
            return try await scene.call(Contract.Scene.get, [.string(key(name))]).first.flatMap { try? Records.storageValue($0, key: name) }
        } catch let error as BatonError where error.code == .notFound {
            // A missing key is the everyday case; a missing scene is not.
            if error.message.contains("has no value") { return nil }
            throw error
        }
    }

    /// Every value stored under this storage's scope, by full key (all of the scene's when unscoped).
    public func all() async throws -> [String: StorageValue] {
        let record = try await scene.call(Contract.Scene.getAll).first?.stringKeyedValue ?? [:]
        var values: [String: StorageValue] = [:]
        for (key, value) in record where key.hasPrefix(prefix) { values[key] = try? Records.storageValue(value, key: key) }
        return values
    }

    public func setRaw(_ name: String, _ value: StorageValue) async throws {
        _ = try await scene.call(Contract.Scene.set, [.string(key(name)), .variant(Records.value(value))])
    }

    /// Removes a value; nothing happens if there is none.
    public func remove(_ name: String) async throws {
        _ = try await scene.call(Contract.Scene.remove, [.string(key(name))])
    }

    // MARK: Typed values

    public func bool(_ name: String) async throws -> Bool? {
        if case .bool(let v)? = try await rawValue(name) { return v }
        return nil
    }
    public func int(_ name: String) async throws -> Int? {
        if case .int(let v)? = try await rawValue(name) { return Int(exactly: v) }
        return nil
    }
    public func double(_ name: String) async throws -> Double? {
        if case .double(let v)? = try await rawValue(name) { return v }
        return nil
    }
    public func string(_ name: String) async throws -> String? {
        if case .string(let v)? = try await rawValue(name) { return v }
        return nil
    }
    public func url(_ name: String) async throws -> URL? {
        try await string(name).flatMap { URL(string: $0) }
    }
    public func data(_ name: String) async throws -> Data? {
        if case .bytes(let v)? = try await rawValue(name) { return Data(v) }
        return nil
    }
    /// A RawRepresentable value stored as its string raw value.
    public func value<T: RawRepresentable>(_ name: String, as type: T.Type = T.self) async throws -> T? where T.RawValue == String {
        try await string(name).flatMap(T.init(rawValue:))
    }
    /// A RawRepresentable value stored as its integer raw value.
    public func value<T: RawRepresentable>(_ name: String, as type: T.Type = T.self) async throws -> T? where T.RawValue == Int {
        try await int(name).flatMap(T.init(rawValue:))
    }
    /// A Codable value stored as a JSON string.
    public func codable<T: Decodable>(_ name: String, as type: T.Type = T.self) async throws -> T? {
        guard let text = try await string(name) else { return nil }
        return try JSONDecoder().decode(T.self, from: Data(text.utf8))
    }
}

/// Where typed values are written: a live scene (`SceneStorage`) or the storage a
/// continuation handler gives a new scene (`InitialStorage`). Keys can be scoped the same way.
public protocol StorageWriter: Sendable {
    /// The full key a name is stored under.
    func key(_ name: String) -> String
    /// Stores one value under `key(name)`.
    func setRaw(_ name: String, _ value: StorageValue) async throws
}

extension StorageWriter {
    public func set(_ name: String, _ value: Bool) async throws { try await setRaw(name, .bool(value)) }
    public func set(_ name: String, _ value: Int) async throws { try await setRaw(name, .int(Int64(value))) }
    public func set(_ name: String, _ value: Double) async throws { try await setRaw(name, .double(value)) }
    public func set(_ name: String, _ value: String) async throws { try await setRaw(name, .string(value)) }
    public func set(_ name: String, _ value: URL) async throws { try await setRaw(name, .string(value.absoluteString)) }
    public func set(_ name: String, _ value: Data) async throws { try await setRaw(name, .bytes(Array(value))) }
    /// Stores a RawRepresentable by its raw value. Chosen over the Codable overload for
    /// types that are both, which is where a naive implementation recurses forever.
    public func set<T: RawRepresentable>(_ name: String, _ value: T) async throws where T.RawValue == String {
        try await setRaw(name, .string(value.rawValue))
    }
    public func set<T: RawRepresentable>(_ name: String, _ value: T) async throws where T.RawValue == Int {
        try await setRaw(name, .int(Int64(value.rawValue)))
    }
    /// Stores a Codable value as a JSON string.
    public func setCodable<T: Encodable>(_ name: String, _ value: T) async throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        try await setRaw(name, .string(String(decoding: try encoder.encode(value), as: UTF8.self)))
    }
}
