import BatonCore

extension Store {
    // MARK: Scenes

    // MARK: Routing continuations

    /// The content ids a scene says it shows, sorted.
    public func handlesContent(sceneID: String) throws -> [String] {
        try read { db in
            try String.fetchAll(db.cachedStatement(sql: "SELECT content_id FROM scene_content WHERE scene_id = ? ORDER BY content_id"),
                                arguments: [sceneID])
        }
    }

    /// The scene of `appID` that already shows `contentID` — its current activity's target
    /// content id is it, or it handles it — the most recently active one; nil when none does.
    public func scene(showing contentID: String, appID: String) throws -> String? {
        try read { db in
            try String.fetchOne(db.cachedStatement(sql: """
                SELECT id FROM (
                    SELECT s.id, s.last_active_at FROM activity a JOIN scene s ON s.activity_id = a.id
                    WHERE a.target_content_id = ?1 AND s.app_id = ?2
                    UNION ALL
                    SELECT s.id, s.last_active_at FROM scene_content c JOIN scene s ON s.id = c.scene_id
                    WHERE c.content_id = ?1 AND s.app_id = ?2
                ) ORDER BY last_active_at DESC, id LIMIT 1
                """), arguments: [contentID, appID])
        }
    }

    /// Throws `NotFound` unless the activity exists: a continuation waits for the app's
    /// handler, and an activity invalidated meanwhile is not continued.
    /// A live activity, or the history's copy of one that had ended when it was asked for
    /// (at `askedAt` or before: on a clock that stands still, as the tests hold it, the end and
    /// the ask can share a microsecond): Continue continues from that, but not from one that
    /// ended under way.
    static func requireActivity(_ id: String, askedAt: UInt64, in db: SQLiteConnection) throws {
        guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM activity WHERE id = ?1 UNION ALL SELECT 1 FROM history WHERE id = ?1 AND ended_at <= ?2"),
                                arguments: [id, Time.encode(askedAt)]) != nil else {
            throw BatonError.notFound("activity \(id) was invalidated while it was being continued; no scene was opened or changed")
        }
    }

    public func scene(id: String) throws -> Scene? {
        try read { db in
            try db.cachedStatement(sql: Self.sceneByID).row([id], SceneRow.decode)
        }
    }

    /// Scenes, oldest first; all apps' when `appID` is nil.
    public func scenes(appID: String? = nil) throws -> [Scene] {
        try read { db in
            if let appID {
                return try db.cachedStatement(sql: SceneRow.selectSQL + " WHERE app_id = ? ORDER BY created_at, id")
                    .rows([appID], SceneRow.decode)
            }
            return try db.cachedStatement(sql: SceneRow.selectSQL + " ORDER BY created_at, id").rows([], SceneRow.decode)
        }
    }

    static let sceneByID = SceneRow.selectSQL + " WHERE id = ?"

    // MARK: Scene storage

    /// Every stored value of a scene, by key.
    public func storage(sceneID: String) throws -> [String: StorageValue] {
        try read { db in
            let rows = try db.cachedStatement(sql: "SELECT key, kind, value FROM scene_storage WHERE scene_id = ?")
                .rows([sceneID]) { row in (row.string(0), StorageColumns.value(from: row, kindIndex: 1)) }
            return Dictionary(rows.compactMap { key, value in value.map { (key, $0) } }, uniquingKeysWith: { $1 })
        }
    }

    /// One stored value, or nil.
    public func storageValue(sceneID: String, key: String) throws -> StorageValue? {
        try read { db in
            try db.cachedStatement(sql: "SELECT kind, value FROM scene_storage WHERE scene_id = ? AND key = ?")
                .row([sceneID, key]) { StorageColumns.value(from: $0, kindIndex: 0) } ?? nil
        }
    }
}

extension WriteTransaction {
    public func insert(_ scene: Scene) throws {
        try insert(scene, storage: [])
    }

    /// Creates a scene together with its first storage, in one transaction: a
    /// continuation either opens a complete scene or none at all. Returns the scene's id:
    /// the first call's, when `request` was made before (and then nothing is written).
    /// A scene showing an activity is not created once that activity is gone (`NotFound`).
    @discardableResult
    public func insert(_ scene: Scene, storage: [(String, StorageValue)], request: Request? = nil) throws -> String {
        try checkStorage(storage)
        return try once(request) {
            if let activity = scene.activityID { try Store.requireActivity(activity, askedAt: scene.createdAt, in: db) }
            try db.cachedStatement(sql: SceneRow.insertSQL).execute(arguments: SceneRow.arguments(scene))
            if let activity = scene.activityID { try noteOutcome(activity, scene: scene.id, state: "ready") }
            _ = try applyStorage(sceneID: scene.id, set: storage, remove: [])
            return scene.id
        }.result
    }

    /// Makes `activityID` the current activity of an existing scene and applies storage, in
    /// one transaction (none, when `request` was made before, or the activity is gone).
    public func continueInto(
        sceneID: String, activityID: String, storage: [(String, StorageValue)], now: UInt64, request: Request? = nil
    ) throws {
        try checkStorage(storage)
        _ = try once(request) {
            try Store.requireActivity(activityID, askedAt: now, in: db)
            try db.cachedStatement(sql: "UPDATE scene SET activity_id = ?, last_active_at = ? WHERE id = ?")
                .execute(arguments: [activityID, Time.encode(now), sceneID])
            if db.changesCount == 0 { throw BatonError.notFound("no scene \(sceneID)") }
            _ = try applyStorage(sceneID: sceneID, set: storage, remove: [])
            try noteOutcome(activityID, scene: sceneID, state: "ready")
            return sceneID
        }
    }

    /// Replaces the content ids a scene says it shows (SwiftUI's `handlesExternalEvents`).
    public func setHandlesContent(_ ids: [String], sceneID: String) throws {
        try db.cachedStatement(sql: "UPDATE scene SET last_active_at = last_active_at WHERE id = ?").execute(arguments: [sceneID])
        if db.changesCount == 0 { throw BatonError.notFound("no scene \(sceneID)") }
        try db.cachedStatement(sql: "DELETE FROM scene_content WHERE scene_id = ?").execute(arguments: [sceneID])
        for id in Set(ids) {
            try db.cachedStatement(sql: "INSERT INTO scene_content (scene_id, content_id) VALUES (?, ?)").execute(arguments: [sceneID, id])
        }
    }

    /// Updates a scene's title, current activity and last-active time.
    public func update(_ scene: Scene) throws {
        try db.cachedStatement(sql: "UPDATE scene SET title = ?, activity_id = ?, last_active_at = ? WHERE id = ?")
            .execute(arguments: [scene.title, scene.activityID, Time.encode(scene.lastActiveAt), scene.id])
        if db.changesCount == 0 { throw BatonError.notFound("no scene \(scene.id)") }
    }

    /// Renames a scene (only its title: a concurrent change of its activity is kept).
    public func setTitle(_ title: String, ofScene id: String) throws {
        try db.cachedStatement(sql: "UPDATE scene SET title = ? WHERE id = ?").execute(arguments: [title, id])
        if db.changesCount == 0 { throw BatonError.notFound("no scene \(id)") }
    }

    /// Removes a scene with its storage. Returns false when there was none.
    public func deleteScene(id: String) throws -> Bool {
        try db.cachedStatement(sql: "DELETE FROM scene WHERE id = ?").execute(arguments: [id])
        return db.changesCount > 0
    }

    /// Sets and removes values of a scene in one transaction: all or nothing, and
    /// refused with `QuotaExceeded` if the scene's storage would pass its limit.
    /// Returns the keys that were actually removed.
    @discardableResult
    public func changeStorage(sceneID: String, set values: [(String, StorageValue)], remove keys: [String]) throws -> [String] {
        try checkStorage(values)
        // A storage write means the app runs with this scene: it is no longer a crash suspect.
        try db.cachedStatement(sql: "UPDATE scene SET recover_count = 0 WHERE id = ?").execute(arguments: [sceneID])
        if db.changesCount == 0 { throw BatonError.notFound("no scene \(sceneID)") }
        return try applyStorage(sceneID: sceneID, set: values, remove: keys)
    }

    func checkStorage(_ values: [(String, StorageValue)]) throws {
        for (key, value) in values {
            try Validate.storageKey(key, limits: limits)
            try value.validate(key: key, limits: limits)
        }
    }

    /// Writes storage changes inside the caller's transaction and checks the scene's total.
    func applyStorage(sceneID: String, set values: [(String, StorageValue)], remove keys: [String]) throws -> [String] {
        // A scene opened or continued into without storage changes nothing: no total to check.
        if values.isEmpty && keys.isEmpty { return [] }
        var removed: [String] = []
        for key in keys {
            try db.cachedStatement(sql: "DELETE FROM scene_storage WHERE scene_id = ? AND key = ?").execute(arguments: [sceneID, key])
            if db.changesCount > 0 { removed.append(key) }
        }
        for (key, value) in values {
            let (kind, stored) = StorageColumns.stored(value)
            try db.cachedStatement(sql: StorageColumns.upsertSQL)
                .execute(arguments: [sceneID, key, kind.rawValue, stored, key.utf8.count + value.byteSize])
        }
        let total = try Int.fetchOne(
            db.cachedStatement(sql: "SELECT COALESCE(SUM(size), 0) FROM scene_storage WHERE scene_id = ?"), arguments: [sceneID]) ?? 0
        guard total <= limits.sceneStorageBytes else {
            // Throwing rolls the whole transaction back: nothing of this change is kept.
            let keys = try db.cachedStatement(sql: "SELECT key, size FROM scene_storage WHERE scene_id = ? ORDER BY size DESC LIMIT ?")
                .rows([sceneID, SizeReport.keysNamed]) { KeySize(key: $0.string(0), bytes: Int($0.int64(1))) }
            throw SizeReport.error("the scene's storage", bytes: total, limit: limits.sceneStorageBytes, keys: keys)
        }
        return removed
    }
}
