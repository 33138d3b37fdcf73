import BatonCore

// Each table's columns are declared once, as a row type's `Column` enum: the SQL column
// lists, the statement arguments (an exhaustive switch, so the compiler asks for every new
// column) and the decoding all follow from it. An activity's columns are its declared fields
// (`ActivityField`): a new field is a migration and its declaration.

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
}

/// `activity_type`: one registration per row.
struct ActivityTypeRow {
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

    static func decode(_ row: Columns) -> ActivityType {
        ActivityType(
            type: row.string(Column.type), appID: row.string(Column.appID), title: row.string(Column.title),
            handler: row.optionalString(Column.handler), handlerPath: row.string(Column.handlerPath),
            requiredKeys: KeywordList.split(row.string(Column.requiredKeys)), payloadType: row.optionalString(Column.payloadType))
    }

    /// The values of `Column`, in its order (the round-trip tests fail when they are not).
    static func arguments(_ type: ActivityType) -> StatementArguments {
        [type.type, type.appID, type.title, type.handler, type.handlerPath, KeywordList.join(type.requiredKeys), type.payloadType]
    }

    static let selectSQL = "SELECT \(Column.list) FROM activity_type"

    /// Adds a registration, or replaces every field of the one with its name.
    static let upsertSQL = "INSERT INTO activity_type (\(Column.list)) VALUES (\(Column.placeholders)) ON CONFLICT(type) DO UPDATE SET "
        + Column.allCases.dropFirst().map { "\($0.name) = excluded.\($0.name)" }.joined(separator: ", ")
}

/// `activity`: one live activity per row; `seq` (not listed) orders them and is the search
/// indexes' rowid. `history` has the same columns and a past activity's. One column per
/// declared field (`ActivityField`), in its order.
enum ActivityRow {
    private static let declarations = ActivityField.declarations

    /// The column names, comma-separated, in declaration order (`SELECT` and `INSERT` lists).
    static let list = declarations.map(\.column).joined(separator: ", ")
    /// How many: a query's columns after them start at this index.
    static let count = Int32(declarations.count)

    /// The fields and their kinds, in column order (`ActivityField`'s hot-path arrays).
    private static let fields = ActivityField.allCases
    private static let kinds = ActivityField.kinds

    static func decode(_ row: Columns) -> Activity {
        var activity = Activity.empty
        for index in fields.indices {
            let column = Int32(index)
            let value: FieldValue = switch kinds[index] {
            case .text: .text(row.string(column))
            case .optionalText: .optionalText(row.optionalString(column))
            case .flag: .flag(row.bool(column))
            case .list: .list(KeywordList.split(row.string(column)))
            case .time: .time(row.time(column))
            case .optionalTime: .optionalTime(row.optionalTime(column))
            }
            fields[index].set(value, in: &activity)
        }
        return activity
    }

    /// The values of the columns, in their order.
    static func arguments(_ activity: Activity) -> StatementArguments {
        StatementArguments(fields.map { field -> (any SQLiteBindable)? in
            switch field.value(of: activity) {
            case .text(let value): value
            case .optionalText(let value): value
            case .flag(let value): value
            case .list(let value): KeywordList.join(value)
            case .time(let value): Time.encode(value)
            case .optionalTime(let value): value.map(Time.encode)
            }
        })
    }

    static let selectSQL = "SELECT \(list) FROM activity"
    static let insertSQL = "INSERT INTO activity (\(list)) VALUES (\(declarations.map { _ in "?" }.joined(separator: ", ")))"
    /// Every column but `id` set from its numbered parameter, so the arguments are the insert's.
    static let updateSQL = "UPDATE activity SET "
        + declarations.enumerated().dropFirst().map { "\($0.element.column) = ?\($0.offset + 1)" }.joined(separator: ", ")
        + " WHERE id = ?1"

    /// The columns a change of which other machines must hear of (the outbox trigger's `UPDATE OF`).
    static let syncedColumns = declarations.filter { !$0.isLocal }.map(\.column).joined(separator: ", ")
}

/// `scene`: one window session per row (its storage is in `scene_storage`).
struct SceneRow {
    enum Column: Int32, TableColumns {
        case id, appID, title, activityID, createdAt, lastActiveAt, state, restoreReason

        var name: String {
            switch self {
            case .id: "id"
            case .appID: "app_id"
            case .title: "title"
            case .activityID: "activity_id"
            case .createdAt: "created_at"
            case .lastActiveAt: "last_active_at"
            case .state: "state"
            case .restoreReason: "restore_reason"
            }
        }
    }

    static func decode(_ row: Columns) -> Scene {
        Scene(
            id: row.string(Column.id), appID: row.string(Column.appID), title: row.string(Column.title),
            activityID: row.optionalString(Column.activityID), createdAt: row.time(Column.createdAt),
            lastActiveAt: row.time(Column.lastActiveAt), state: Scene.State(rawValue: row.string(Column.state)) ?? .ready,
            restoreReason: Scene.RestoreReason(rawValue: row.string(Column.restoreReason)) ?? .launch)
    }

    /// The values of `Column`, in its order (the round-trip tests fail when they are not).
    static func arguments(_ scene: Scene) -> StatementArguments {
        [scene.id, scene.appID, scene.title, scene.activityID, Time.encode(scene.createdAt), Time.encode(scene.lastActiveAt),
         scene.state.rawValue, scene.restoreReason.rawValue]
    }

    static let selectSQL = "SELECT \(Column.list) FROM scene"
    /// A scene opened while its app runs (attached) is one that run knows: `handed_out`, so that
    /// at the next launch it comes back for the reason that run ended, not as `launch`.
    /// (`?2` is the app id.)
    static let insertSQL = """
        INSERT INTO scene (\(Column.list), handed_out) VALUES (\(Column.placeholders),
            EXISTS (SELECT 1 FROM app_session WHERE app_id = ?2 AND state = 'attached'))
        """
}

/// `continuation`: a continuation waiting for its app, one per scene at most.
struct ContinuationRow {
    enum Column: Int32, TableColumns {
        case sceneID, activityID, createdScene, requestedAt, attempts, lastError

        var name: String {
            switch self {
            case .sceneID: "scene_id"
            case .activityID: "activity_id"
            case .createdScene: "created_scene"
            case .requestedAt: "requested_at"
            case .attempts: "attempts"
            case .lastError: "last_error"
            }
        }
    }

    static func decode(_ row: Columns) -> PendingContinuation {
        PendingContinuation(
            sceneID: row.string(Column.sceneID), activityID: row.string(Column.activityID),
            createdScene: row.bool(Column.createdScene), requestedAt: row.time(Column.requestedAt),
            attempts: Int(row.int64(Column.attempts)), lastError: row.optionalString(Column.lastError))
    }

    static func arguments(_ pending: PendingContinuation) -> StatementArguments {
        [pending.sceneID, pending.activityID, pending.createdScene ? 1 : 0, Time.encode(pending.requestedAt),
         pending.attempts, pending.lastError]
    }

    static let selectSQL = "SELECT \(Column.list) FROM continuation"
    /// A later continuation into the same scene replaces the one that waited.
    static let upsertSQL = "INSERT OR REPLACE INTO continuation (\(Column.list)) VALUES (\(Column.placeholders))"
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

    static func stored(_ value: StorageValue) -> (Kind, SQLiteValue) {
        switch value {
        case .bool(let v): (.bool, v.sqliteValue)
        case .int(let v): (.int, .integer(v))
        case .double(let v): (.double, .real(v))
        case .string(let v): (.string, .text(v))
        // Empty bytes bind as an empty blob; GRDB bound them as NULL, which the insert stores as one too.
        case .bytes(let v): (.bytes, .blob(v))
        }
    }

    /// The value `stored(_:)` wrote, from `row` (kind at `kindIndex`, value after it);
    /// nil for a kind this version does not know.
    static func value(from row: Columns, kindIndex: Int32) -> StorageValue? {
        switch Kind(rawValue: row.int64(kindIndex)) {
        case .bool: .bool(row.bool(kindIndex + 1))
        case .int: .int(row.int64(kindIndex + 1))
        case .double: .double(row.double(kindIndex + 1))
        case .string: .string(row.string(kindIndex + 1))
        case .bytes: .bytes(row.bytes(kindIndex + 1))
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
