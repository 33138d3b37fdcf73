import BatonCore

/// Durable continuations: a `Continue` writes its scene as `pending` with a continuation
/// row before the app's handler is asked, so a continuation the app cannot take now is
/// kept (across restarts) and delivered again when the app appears; it becomes `ready`
/// when the handler returns, and `failed` after `Store.continuationLifetime`.
extension Store {
    /// How long a continuation waits for its app before its scene becomes `failed`.
    public static let continuationLifetime: UInt64 = 24 * 3600 * 1_000_000

    static let sceneReadySQL =
        "UPDATE scene SET activity_id = ?, last_active_at = ?, state = 'ready' WHERE id = ? RETURNING \(SceneRow.Column.list)"

    /// Continuations still waiting, oldest first; one app's when `appID` is given.
    public func pendingContinuations(appID: String? = nil) throws -> [PendingContinuation] {
        try read { db in
            let columns = ContinuationRow.Column.allCases.map { "c." + $0.name }.joined(separator: ", ")
            let sql = "SELECT \(columns) FROM continuation c JOIN scene s ON s.id = c.scene_id"
                + (appID == nil ? "" : " WHERE s.app_id = ?") + " ORDER BY c.requested_at, c.scene_id"
            return try db.cachedStatement(sql: sql).rows(appID.map { [$0] } ?? [], ContinuationRow.decode)
        }
    }

    /// The continuation waiting in a scene, if any.
    public func pendingContinuation(sceneID: String) throws -> PendingContinuation? {
        try read { db in
            try db.cachedStatement(sql: ContinuationRow.selectSQL + " WHERE scene_id = ?").row([sceneID], ContinuationRow.decode)
        }
    }

    /// When the oldest continuation still waiting was asked for, to schedule its failure.
    public func oldestContinuationRequest() throws -> UInt64? {
        try read { db in
            try Int64.fetchOne(db.cachedStatement(sql: "SELECT MIN(requested_at) FROM continuation")).map(Time.decode)
        }
    }
}

extension WriteTransaction {
    /// Opens `scene` (its state `pending`) with the continuation of `activityID` waiting in it.
    /// With a request made before, writes nothing and returns the first call's scene id.
    @discardableResult
    public func insertPending(_ scene: Scene, activityID: String, request: Request? = nil) throws -> String {
        var pending = scene
        pending.state = .pending
        // Whether the activity is still there is checked when the continuation completes.
        return try once(request) {
            try db.cachedStatement(sql: SceneRow.insertSQL).execute(arguments: SceneRow.arguments(pending))
            try db.cachedStatement(sql: ContinuationRow.upsertSQL).execute(arguments: ContinuationRow.arguments(
                PendingContinuation(sceneID: scene.id, activityID: activityID, createdScene: true, requestedAt: scene.createdAt)))
            return scene.id
        }.result
    }

    /// Makes an existing scene wait for the continuation of `activityID` (a later one
    /// replaces one that waited). With a request made before, writes nothing.
    public func markPending(sceneID: String, activityID: String, now: UInt64, request: Request? = nil) throws {
        _ = try once(request) {
            try db.cachedStatement(sql: "UPDATE scene SET state = 'pending' WHERE id = ?").execute(arguments: [sceneID])
            if db.changesCount == 0 { throw BatonError.notFound("no scene \(sceneID)") }
            let created = try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT created_scene FROM continuation WHERE scene_id = ?"), arguments: [sceneID]) ?? false
            try db.cachedStatement(sql: ContinuationRow.upsertSQL).execute(arguments: ContinuationRow.arguments(
                PendingContinuation(sceneID: sceneID, activityID: activityID, createdScene: created, requestedAt: now)))
            return sceneID
        }
    }

    /// The handler answered: its storage goes into the scene, which now shows the activity
    /// and is `ready`; returns the scene so. `NotFound` (nothing written) when the activity
    /// went meanwhile, or the continuation is no longer the one waiting in the scene.
    @discardableResult
    public func completeContinuation(
        sceneID: String, activityID: String, storage: [(String, StorageValue)], now: UInt64
    ) throws -> Scene {
        try checkStorage(storage)
        let waiting = try db.cachedStatement(sql: "SELECT activity_id, requested_at FROM continuation WHERE scene_id = ?")
            .row([sceneID]) { (activity: $0.string(0), requestedAt: $0.time(1)) }
        guard let waiting, waiting.activity == activityID else {
            throw BatonError.notFound("no continuation of \(activityID) waits in scene \(sceneID)")
        }
        try Store.requireActivity(activityID, askedAt: waiting.requestedAt, in: db)
        // The scene as it now is, for its announcement: no read after the write.
        let scene = try db.cachedStatement(sql: Store.sceneReadySQL).row([activityID, Time.encode(now), sceneID], SceneRow.decode)
        guard let scene else { throw BatonError.notFound("no scene \(sceneID)") }
        _ = try applyStorage(sceneID: sceneID, set: storage, remove: [])
        try db.cachedStatement(sql: "DELETE FROM continuation WHERE scene_id = ?").execute(arguments: [sceneID])
        try noteOutcome(activityID, scene: sceneID, state: "ready")
        return scene
    }

    /// The continuation will not happen (the app refused it, or its activity went): a scene
    /// opened for it is deleted (true is returned), an existing one is `ready` as before.
    /// `why` is kept for `Explain`.
    @discardableResult
    public func abandonContinuation(sceneID: String, why: String) throws -> Bool {
        let created = try Bool.fetchOne(
            db.cachedStatement(sql: "SELECT created_scene FROM continuation WHERE scene_id = ?"), arguments: [sceneID]) ?? false
        if let activity = try String.fetchOne(
            db.cachedStatement(sql: "SELECT activity_id FROM continuation WHERE scene_id = ?"), arguments: [sceneID]) {
            try noteOutcome(activity, scene: sceneID, state: "refused", error: why)
        }
        if created {
            try db.cachedStatement(sql: "DELETE FROM scene WHERE id = ?").execute(arguments: [sceneID])
        } else {
            try db.cachedStatement(sql: "DELETE FROM continuation WHERE scene_id = ?").execute(arguments: [sceneID])
            try db.cachedStatement(sql: "UPDATE scene SET state = 'ready' WHERE id = ?").execute(arguments: [sceneID])
        }
        return created
    }

    /// A delivery did not reach the app: counted, with why; the scene stays `pending`.
    public func noteDeliveryFailed(sceneID: String, error: String) throws {
        try db.cachedStatement(sql: "UPDATE continuation SET attempts = attempts + 1, last_error = ? WHERE scene_id = ?")
            .execute(arguments: [error, sceneID])
        if let activity = try String.fetchOne(
            db.cachedStatement(sql: "SELECT activity_id FROM continuation WHERE scene_id = ?"), arguments: [sceneID]) {
            try noteOutcome(activity, scene: sceneID, state: "pending", error: error)
        }
    }

    /// Continuations asked for before `before` that never arrived: their scenes become
    /// `failed`. Returns those scenes' ids.
    public func failContinuations(requestedBefore before: UInt64) throws -> [String] {
        let failed = try db.cachedStatement(sql: "DELETE FROM continuation WHERE requested_at < ? RETURNING scene_id, activity_id")
            .rows([Time.encode(before)]) { row in (scene: row.string(0), activity: row.string(1)) }
        for (scene, activity) in failed {
            try db.cachedStatement(sql: "UPDATE scene SET state = 'failed' WHERE id = ?").execute(arguments: [scene])
            try noteOutcome(activity, scene: scene, state: "failed", error: "its app did not take it within a day")
        }
        return failed.map(\.scene)
    }
}
