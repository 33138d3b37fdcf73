import BatonCore
import Foundation
import GRDB

// Each table's columns are declared once, as a row type's `Column` enum: the SQL column
// lists, the statement arguments (an exhaustive switch, so the compiler asks for every new
// column) and the decoding all follow from it. A new field is a migration, a case here and
// its record field in the contract.

/// A table's columns, in the order the row type's queries select and bind them.
protocol TableColumns: CaseIterable, RawRepresentable<Int32> where AllCases == [Self] {
    /// The column's name in SQL.
    var name: String { get }
}

extension TableColumns {
    /// The column names, comma-separated, in declaration order (`SELECT` and `INSERT` lists).
    static var list: String { allCases.map(\.name).joined(separator: ", ") }
    /// `?` placeholders for an `INSERT` of every column.
    static var placeholders: String { allCases.map { _ in "?" }.joined(separator: ", ") }
    /// Column index in a row selected with `list`.
    var index: Int { Int(rawValue) }
}

/// `activity_type`: one registration per row.
struct ActivityTypeRow: FetchableRecord {
    enum Column: Int32, TableColumns {
        case type, appID, title, handler, handlerPath, requiredKeys, payloadType

        var name: String {
            switch self {
            case .type: "type"
            case .appID: "app_id"
            case .title: "title"
            case .handler: "handler"
            case .handlerPath: "handler_path"
            case .requiredKeys: "required_keys"
            case .payloadType: "payload_type"
            }
        }
    }

    let value: ActivityType

    init(row: Row) {
        value = ActivityType(
            type: row[Column.type.index], appID: row[Column.appID.index], title: row[Column.title.index],
            handler: row[Column.handler.index], handlerPath: row[Column.handlerPath.index],
            requiredKeys: KeywordList.split(row[Column.requiredKeys.index]), payloadType: row[Column.payloadType.index])
    }

    static func arguments(_ type: ActivityType) -> StatementArguments {
        StatementArguments(Column.allCases.map { column -> DatabaseValue in
            switch column {
            case .type: type.type.databaseValue
            case .appID: type.appID.databaseValue
            case .title: type.title.databaseValue
            case .handler: type.handler.databaseValue
            case .handlerPath: type.handlerPath.databaseValue
            case .requiredKeys: KeywordList.join(type.requiredKeys).databaseValue
            case .payloadType: type.payloadType.databaseValue
            }
        })
    }

    /// Adds a registration, or replaces every field of the one with its name.
    static let upsertSQL = "INSERT INTO activity_type (\(Column.list)) VALUES (\(Column.placeholders)) ON CONFLICT(type) DO UPDATE SET "
        + Column.allCases.dropFirst().map { "\($0.name) = excluded.\($0.name)" }.joined(separator: ", ")
}

/// `activity`: one live activity per row; `seq` (not listed) orders them and is the search indexes' rowid.
struct ActivityRow: FetchableRecord {
    /// `id` comes first: `update` binds it as `?1` and every other column by its position.
    enum Column: Int32, TableColumns {
        case id, type, appID, title, payload, payloadType, targetContentID, persistentID, keywords, webpageURL
        case eligibleForHandoff, eligibleForSearch, sceneID, createdAt, updatedAt, expiresAt

        var name: String {
            switch self {
            case .id: "id"
            case .type: "type"
            case .appID: "app_id"
            case .title: "title"
            case .payload: "payload"
            case .payloadType: "payload_type"
            case .targetContentID: "target_content_id"
            case .persistentID: "persistent_id"
            case .keywords: "keywords"
            case .webpageURL: "webpage_url"
            case .eligibleForHandoff: "eligible_for_handoff"
            case .eligibleForSearch: "eligible_for_search"
            case .sceneID: "scene_id"
            case .createdAt: "created_at"
            case .updatedAt: "updated_at"
            case .expiresAt: "expires_at"
            }
        }
    }

    let value: Activity

    init(row: Row) {
        value = Activity(
            id: row[Column.id.index], type: row[Column.type.index], appID: row[Column.appID.index],
            title: row[Column.title.index], payload: row[Column.payload.index], payloadType: row[Column.payloadType.index],
            targetContentID: row[Column.targetContentID.index], persistentID: row[Column.persistentID.index],
            keywords: KeywordList.split(row[Column.keywords.index]), webpageURL: row[Column.webpageURL.index],
            eligibleForHandoff: row[Column.eligibleForHandoff.index], eligibleForSearch: row[Column.eligibleForSearch.index],
            sceneID: row[Column.sceneID.index], createdAt: Time.decode(row[Column.createdAt.index]),
            updatedAt: Time.decode(row[Column.updatedAt.index]),
            expiresAt: (row[Column.expiresAt.index] as Int64?).map(Time.decode))
    }

    static func arguments(_ activity: Activity) -> StatementArguments {
        StatementArguments(Column.allCases.map { column -> DatabaseValue in
            switch column {
            case .id: activity.id.databaseValue
            case .type: activity.type.databaseValue
            case .appID: activity.appID.databaseValue
            case .title: activity.title.databaseValue
            case .payload: activity.payload.databaseValue
            case .payloadType: activity.payloadType.databaseValue
            case .targetContentID: activity.targetContentID.databaseValue
            case .persistentID: activity.persistentID.databaseValue
            case .keywords: KeywordList.join(activity.keywords).databaseValue
            case .webpageURL: activity.webpageURL.databaseValue
            case .eligibleForHandoff: activity.eligibleForHandoff.databaseValue
            case .eligibleForSearch: activity.eligibleForSearch.databaseValue
            case .sceneID: activity.sceneID.databaseValue
            case .createdAt: Time.encode(activity.createdAt).databaseValue
            case .updatedAt: Time.encode(activity.updatedAt).databaseValue
            case .expiresAt: activity.expiresAt.map(Time.encode).databaseValue
            }
        })
    }

    static let insertSQL = "INSERT INTO activity (\(Column.list)) VALUES (\(Column.placeholders))"
    /// Every column but `id` set from its numbered parameter, so the arguments are the insert's.
    static let updateSQL = "UPDATE activity SET "
        + Column.allCases.dropFirst().map { "\($0.name) = ?\($0.rawValue + 1)" }.joined(separator: ", ")
        + " WHERE id = ?1"
}

/// `scene`: one window session per row (its storage is in `scene_storage`).
struct SceneRow: FetchableRecord {
    enum Column: Int32, TableColumns {
        case id, appID, title, activityID, createdAt, lastActiveAt

        var name: String {
            switch self {
            case .id: "id"
            case .appID: "app_id"
            case .title: "title"
            case .activityID: "activity_id"
            case .createdAt: "created_at"
            case .lastActiveAt: "last_active_at"
            }
        }
    }

    let value: Scene

    init(row: Row) {
        value = Scene(
            id: row[Column.id.index], appID: row[Column.appID.index], title: row[Column.title.index],
            activityID: row[Column.activityID.index], createdAt: Time.decode(row[Column.createdAt.index]),
            lastActiveAt: Time.decode(row[Column.lastActiveAt.index]))
    }

    static func arguments(_ scene: Scene) -> StatementArguments {
        StatementArguments(Column.allCases.map { column -> DatabaseValue in
            switch column {
            case .id: scene.id.databaseValue
            case .appID: scene.appID.databaseValue
            case .title: scene.title.databaseValue
            case .activityID: scene.activityID.databaseValue
            case .createdAt: Time.encode(scene.createdAt).databaseValue
            case .lastActiveAt: Time.encode(scene.lastActiveAt).databaseValue
            }
        })
    }

    static let insertSQL = "INSERT INTO scene (\(Column.list)) VALUES (\(Column.placeholders))"
}

/// `scene_storage`: a value is kept as a kind code and a value SQLite stores natively.
enum StorageColumns {
    enum Kind: Int64 {
        case bool = 0, int, double, string, bytes
    }

    /// Sets one key (`scene_id`, `key`, `kind`, `value`, `size`). No kind is stored as NULL, so a
    /// NULL value can only be empty bytes, kept as an empty blob.
    static let upsertSQL = """
        INSERT INTO scene_storage (scene_id, key, kind, value, size) VALUES (?, ?, ?, IFNULL(?, x''), ?)
        ON CONFLICT(scene_id, key) DO UPDATE SET kind = excluded.kind, value = excluded.value, size = excluded.size
        """

    static func stored(_ value: StorageValue) -> (Kind, DatabaseValue) {
        switch value {
        case .bool(let v): (.bool, v.databaseValue)
        case .int(let v): (.int, v.databaseValue)
        case .double(let v): (.double, v.databaseValue)
        case .string(let v): (.string, v.databaseValue)
        // GRDB binds empty bytes as NULL; the insert stores NULL as an empty blob (`insertSQL`).
        case .bytes(let v): (.bytes, Data(v).databaseValue)
        }
    }

    /// The value `stored(_:)` wrote, from `row` (kind at `kindIndex`, value after it);
    /// nil for a kind this version does not know.
    static func value(from row: Row, kindIndex: Int) -> StorageValue? {
        switch Kind(rawValue: row[kindIndex]) {
        case .bool: .bool(row[kindIndex + 1])
        case .int: .int(row[kindIndex + 1])
        case .double: .double(row[kindIndex + 1])
        case .string: .string(row[kindIndex + 1])
        case .bytes: .bytes([UInt8]((row[kindIndex + 1] as Data?) ?? Data()))
        case nil: nil
        }
    }
}

/// Lists kept in one text column, joined by the unit separator (U+001F).
enum KeywordList {
    static let separator: Unicode.Scalar = "\u{1F}"

    static func join(_ items: [String]) -> String { items.joined(separator: String(separator)) }

    /// Split on the separator's byte: splitting on a `Character` walks grapheme clusters.
    static func split(_ text: String) -> [String] {
        text.isEmpty ? [] : text.utf8.split(separator: UInt8(ascii: separator)).map { String(decoding: $0, as: UTF8.self) }
    }
}

/// Times are microseconds since the epoch as `UInt64`, stored as SQLite's signed integers bit for bit.
enum Time {
    static func encode(_ time: UInt64) -> Int64 { Int64(bitPattern: time) }
    static func decode(_ stored: Int64) -> UInt64 { UInt64(bitPattern: stored) }
}
