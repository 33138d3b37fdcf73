import BatonCore
import FoundationEssentials
import Logging

/// Activity types an installed app declares in a file, so that batond knows them before the
/// app first runs (an activity of the type can be advertised, and continuing one starts the
/// app through the bus), as a desktop file makes an app known before it is opened.
///
/// Files are `baton/types/*.json` under `$XDG_DATA_HOME` and each of `$XDG_DATA_DIRS`; a file
/// name found in an earlier directory hides the same name in later ones. Each holds one app:
///
///     {"app_id": "com.example.Notes",
///      "types": {"com.example.notes.editing": {"title": "Editing", "required_keys": "id"}}}
///
/// where each type's options are `RegisterActivityType`'s. A declared type that is not
/// registered is registered at start; one that is registered already is left as it is (the
/// app's own registration is the newer word), and one registered to another app is not taken.
public enum DeclaredTypes {
    /// One type read from a file, or why the file could not be used.
    public struct Declaration: Sendable, Equatable {
        public let file: String
        public let type: ActivityType
    }

    /// The directories searched, most important first.
    public static func directories(environment: [String: String]) -> [String] {
        XDGData.directories(environment: environment).map { $0 + "/baton/types" }
    }

    /// Every declaration in `directories`, and a sentence for each file that could not be read.
    public static func read(from directories: [String], limits: Limits) -> (declarations: [Declaration], problems: [String]) {
        var seen: Set<String> = []
        var declarations: [Declaration] = []
        var problems: [String] = []
        for directory in directories {
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".json") }.sorted()
            for name in names where seen.insert(name).inserted {
                let file = directory + "/" + name
                do {
                    declarations += try parse(file: file, limits: limits)
                } catch {
                    problems.append("ignored the declared types in \(file): \(describe(error))")
                }
            }
        }
        return (declarations, problems)
    }

    private struct File: Decodable {
        let app_id: String
        let types: [String: [String: String]]
    }

    private static func parse(file: String, limits: Limits) throws -> [Declaration] {
        let data = try Data(contentsOf: URL(fileURLWithPath: file))
        guard data.count <= 64 * 1024 else { throw BatonError.invalidArgument("it is larger than 64 KiB") }
        let contents = try JSONDecoder().decode(File.self, from: data)
        return try contents.types.keys.sorted().map { name in
            let options = contents.types[name] ?? [:]
            if options["replace"] != nil { throw BatonError.invalidArgument("\(name): a declaration cannot replace another app's type") }
            let type = try ActivityType.registration(type: name, appID: contents.app_id, options: options, limits: limits)
            try RegistryInterface.checkHandlerAddress(type)
            return Declaration(file: file, type: type)
        }
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case let error as BatonError: error.message
        case DecodingError.dataCorrupted(let context): "it is not JSON (\(context.debugDescription))"
        case DecodingError.keyNotFound(let key, _): "it has no \"\(key.stringValue)\""
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            "\(context.codingPath.map(\.stringValue).joined(separator: ".")) is not what a declaration holds (app_id: a string; types: an object of objects of strings)"
        default: "\(error)"
        }
    }
}

extension HandoffService {
    /// Registers the declared types that are not registered yet; logs what it skipped and why.
    func registerDeclaredTypes(from directories: [String]) async throws {
        let (declarations, problems) = DeclaredTypes.read(from: directories, limits: limits)
        for problem in problems { log.warning("\(problem)") }
        guard !declarations.isEmpty else { return }
        let skipped = try await store.writing { transaction -> [String] in
            var skipped: [String] = []
            for declaration in declarations {
                if let registered = try transaction.activityType(declaration.type.type) {
                    if registered.appID != declaration.type.appID {
                        skipped.append("\(declaration.file) declares \(declaration.type.type) for \(declaration.type.appID), but it is registered to \(registered.appID); left as it is")
                    }
                    continue
                }
                try transaction.register(declaration.type)
            }
            return skipped
        }
        for message in skipped { log.warning("\(message)") }
    }
}
