import BatonCore

/// Export and import (`ArchiveDocument`): everything of the user's read in one snapshot,
/// and a checked document written in one transaction, all or nothing.
extension Store {
    /// What an import added, and how much it left as it was because it was there already.
    public struct Imported: Sendable, Equatable {
        public var types = 0, history = 0, unchanged = 0
        public var activities: [Activity] = []
        public var scenes: [Scene] = []
        public init() {}
    }

    /// The types, this machine's live activities, the history and the scenes with their
    /// storage, of `appID` or of every app, in one snapshot of its own (`readAlone`).
    public func exportContents(appID: String?, now: UInt64) throws -> ArchiveDocument {
        let only = appID == nil ? "" : " AND app_id = ?"
        let arguments: StatementArguments = appID.map { [$0] } ?? []
        return try readAlone { db in
            var document = ArchiveDocument()
            document.types = try db.cachedStatement(sql: ActivityTypeRow.selectSQL + " WHERE 1" + only).rows(arguments, ActivityTypeRow.decode)
            document.activities = try db.cachedStatement(sql: ActivityRow.selectSQL
                + " WHERE device_id = '' AND (expires_at IS NULL OR expires_at > ?)" + only)
                .rows([Time.encode(now)] + arguments, ActivityRow.decode)
                .map { activity in
                    var kept = activity
                    kept.sceneID = nil  // a scene says what it shows (activity_id)
                    return kept
                }
            document.history = try db.cachedStatement(sql: Self.pastSelect + " WHERE 1" + only).rows(arguments, Self.decodePast)
            let scenes = try db.cachedStatement(sql: SceneRow.selectSQL + " WHERE 1" + only).rows(arguments, SceneRow.decode)
            for scene in scenes {
                let storage = try db.cachedStatement(sql: "SELECT key, kind, value FROM scene_storage WHERE scene_id = ?")
                    .rows([scene.id]) { row in (row.string(0), StorageColumns.value(from: row, kindIndex: 1)) }
                var clean = scene
                clean.state = .ready
                clean.restoreReason = .launch
                let values = Dictionary(storage.compactMap { key, value in value.map { (key, $0) } }, uniquingKeysWith: { $1 })
                document.scenes.append(.init(scene: clean, storage: values))
            }
            return document
        }
    }

    /// A past activity, as the history trigger writes one.
    static let insertPastSQL = """
        INSERT INTO history (\(ActivityRow.list), ended_at, end_state, end_reason, size)
        SELECT *, \(historyRowSize) FROM (SELECT \(ActivityField.declarations.map { "? AS \($0.column)" }.joined(separator: ", ")),
                                                      ? AS ended_at, ? AS end_state, ? AS end_reason)
        """
}

extension WriteTransaction {
    /// Writes what `document` has that is not here yet, keeping its ids; what is here (by
    /// id, or a type by name) stays as it is. One transaction: over a limit (an app's live
    /// activities, say), nothing is written.
    public func importContents(_ document: ArchiveDocument) throws -> Store.Imported {
        activitiesChange()
        registrationsChange()
        var counts = Store.Imported()
        for type in document.types {
            if try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM activity_type WHERE type = ?"), arguments: [type.type]) != nil {
                counts.unchanged += 1
                continue
            }
            try db.cachedStatement(sql: ActivityTypeRow.upsertSQL).execute(arguments: ActivityTypeRow.arguments(type))
            counts.types += 1
        }
        let known = "SELECT 1 FROM activity WHERE id = ?1 UNION ALL SELECT 1 FROM history WHERE id = ?1"
        for activity in document.activities {
            if try Bool.fetchOne(db.cachedStatement(sql: known), arguments: [activity.id]) != nil {
                counts.unchanged += 1
                continue
            }
            var local = activity
            local.deviceID = ""
            local.sceneID = nil
            try db.cachedStatement(sql: ActivityRow.insertSQL).execute(arguments: ActivityRow.arguments(local))
            counts.activities.append(local)
        }
        for app in Set(counts.activities.map(\.appID)) {
            let live = try Int.fetchOne(db.cachedStatement(sql: "SELECT count FROM app_activity_count WHERE app_id = ?"), arguments: [app]) ?? 0
            guard live <= limits.liveActivitiesPerApp else {
                throw BatonError.quotaExceeded("with the import \(app) would have \(live) live activities; the limit is \(limits.liveActivitiesPerApp)")
            }
        }
        for past in document.history {
            if try Bool.fetchOne(db.cachedStatement(sql: known), arguments: [past.activity.id]) != nil {
                counts.unchanged += 1
                continue
            }
            var activity = past.activity
            activity.sceneID = nil
            try db.cachedStatement(sql: Store.insertPastSQL)
                .execute(arguments: ActivityRow.arguments(activity) + [Time.encode(past.endedAt), past.endState, past.endReason])
            counts.history += 1
        }
        if counts.history > 0 { try Store.trimHistory(db, now: wallClock.now(), limits: limits) }
        for contents in document.scenes {
            if try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM scene WHERE id = ?"), arguments: [contents.scene.id]) != nil {
                counts.unchanged += 1
                continue
            }
            try db.cachedStatement(sql: SceneRow.insertSQL).execute(arguments: SceneRow.arguments(contents.scene))
            _ = try applyStorage(sceneID: contents.scene.id, set: contents.storage.sorted { $0.key < $1.key }, remove: [])
            counts.scenes.append(contents.scene)
        }
        return counts
    }
}
