import BatonCore

/// An app's runs: `RestoreScenes` at launch hands the app its scenes with why each comes
/// back, and remembers the caller's unique bus name as the app's instance; `Detach` is a
/// clean exit; an instance whose name vanishes without it has crashed, and its scenes come
/// back as `recover`. A scene handed out as `recover` `Store.recoverLimit` times in a row,
/// with no `Acknowledge` and no storage write in between, is the likely cause of the
/// crashes and is discarded (Apple deletes state after a crash at launch).
extension Store {
    /// How many times in a row a scene may come back as `recover` before it is discarded.
    public static let recoverLimit = 3

    /// What `RestoreScenes` hands out, and what it discarded.
    public struct Restoration: Sendable {
        public var scenes: [Scene]
        /// Scenes discarded now for coming back as `recover` too often.
        public var discarded: [Scene]
    }

    static func restoreCounters(_ sceneID: String, in db: SQLiteConnection) throws -> (handedOut: Bool, recovers: Int) {
        let statement = try db.cachedStatement(sql: "SELECT handed_out, recover_count FROM scene WHERE id = ?")
        return try statement.row([sceneID]) { row in (row.bool(0), Int(row.int64(1))) } ?? (false, 0)
    }

    /// Apps whose instance batond last knew as attached, with its bus name.
    public func attachedInstances() throws -> [(appID: String, instance: String)] {
        try read { db in
            try db.cachedStatement(sql: "SELECT app_id, instance FROM app_session WHERE state = 'attached' ORDER BY app_id")
                .rows([]) { row in (row.string(0), row.string(1)) }
        }
    }
}

extension WriteTransaction {
    /// Hands `appID`'s scenes to its new instance `instance`, oldest first.
    public func restoreScenes(appID: String, instance: String) throws -> Store.Restoration {
        let ended = try String.fetchOne(db.cachedStatement(sql: "SELECT state FROM app_session WHERE app_id = ?"), arguments: [appID])
        // Never attached, or detached cleanly: restore; otherwise (vanished, or still
        // attached as far as batond knows: it lost track across its own restart) recover.
        let reason: Scene.RestoreReason = ended == nil || ended == "detached" ? .restore : .recover
        let scenes = try db.cachedStatement(sql: SceneRow.selectSQL + " WHERE app_id = ? ORDER BY created_at, id").rows([appID], SceneRow.decode)
        var restoration = Store.Restoration(scenes: [], discarded: [])
        for var scene in scenes {
            let (handedOut, recovers) = try Store.restoreCounters(scene.id, in: db)
            scene.restoreReason = handedOut ? reason : .launch
            if scene.restoreReason == .recover && recovers >= Store.recoverLimit {
                if let activity = scene.activityID {
                    try noteOutcome(activity, scene: scene.id, state: "discarded", error: """
                        its scene came back as recover \(Store.recoverLimit) times in a row without \(appID) acknowledging it, \
                        so it likely made the app crash at launch; it was discarded
                        """)
                }
                try db.cachedStatement(sql: "DELETE FROM scene WHERE id = ?").execute(arguments: [scene.id])
                restoration.discarded.append(scene)
                continue
            }
            try db.cachedStatement(sql: """
                UPDATE scene SET restore_reason = ?, handed_out = 1,
                    recover_count = CASE WHEN ? = 'recover' THEN recover_count + 1 ELSE 0 END WHERE id = ?
                """).execute(arguments: [scene.restoreReason.rawValue, scene.restoreReason.rawValue, scene.id])
            restoration.scenes.append(scene)
        }
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO app_session (app_id, instance, state) VALUES (?, ?, 'attached')")
            .execute(arguments: [appID, instance])
        return restoration
    }

    /// The app exits cleanly: its scenes come back as `restore`.
    public func detach(appID: String) throws {
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO app_session (app_id, instance, state) VALUES (?, '', 'detached')")
            .execute(arguments: [appID])
    }

    /// The bus name `instance` vanished: the apps it was the attached instance of crashed.
    /// Returns those apps.
    @discardableResult
    public func instanceVanished(_ instance: String) throws -> [String] {
        try String.fetchAll(db.cachedStatement(sql: """
            UPDATE app_session SET state = 'vanished' WHERE instance = ? AND state = 'attached' RETURNING app_id
            """), arguments: [instance])
    }

    /// The app restored the scene fine: it is no longer a crash suspect.
    public func acknowledge(sceneID: String) throws {
        try db.cachedStatement(sql: "UPDATE scene SET recover_count = 0 WHERE id = ?").execute(arguments: [sceneID])
        if db.changesCount == 0 { throw BatonError.notFound("no scene \(sceneID)") }
    }
}
