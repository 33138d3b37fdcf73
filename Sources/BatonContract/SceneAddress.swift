import BatonCore
import DBus

/// Where scenes live on the bus, `/org/baton/Handoff1/scene/<id with _ for ->`: the one
/// rule for a scene's id and its object path, shared by the daemon, BatonKit and the CLI.
public enum SceneAddress {
    public static let root = Contract.scenesPath

    /// The object path of a scene; `id` is a normalized id, so the path is always valid.
    public static func path(forID id: String) -> String {
        root + "/" + swapping(id, UInt8(ascii: "-"), for: UInt8(ascii: "_"))
    }

    /// The scene id named by an object path or by an id, as people and programs give either.
    public static func id(from text: String) throws(BatonError) -> String {
        guard text.hasPrefix("/") else { return try Identifier.normalize(text, what: "scene") }
        let prefix = root + "/"
        guard text.hasPrefix(prefix) else {
            throw .invalidArgument("'\(printable(text))' is not a scene path; scenes live under \(prefix)")
        }
        return try Identifier.normalize(swapping(String(text.dropFirst(prefix.count)), UInt8(ascii: "_"), for: UInt8(ascii: "-")), what: "scene")
    }

    /// `text` with every `old` byte (ASCII) replaced by `new`: cheaper than the generic
    /// `replacing(_:with:)` on a hot path (ids are 36 bytes).
    private static func swapping(_ text: String, _ old: UInt8, for new: UInt8) -> String {
        String(decoding: text.utf8.map { $0 == old ? new : $0 }, as: UTF8.self)
    }
}

extension SceneAddress {
    /// A scene's object path, typed; ids are normalized UUIDs, so the path always validates.
    public static func objectPath(forID id: String) -> ObjectPath {
        (try? ObjectPath(validating: path(forID: id))) ?? ObjectPath(stringLiteral: root)
    }
}
