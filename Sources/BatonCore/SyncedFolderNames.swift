/// Names in a synced folder that are never Baton's: what sync tools and editors leave there
/// while they work — hidden and `~` names (Syncthing's `.syncthing.NAME.tmp`, Nextcloud's
/// `.~lock` and partials), `.tmp`, `.part`, and the `.sync-conflict-` copies Syncthing makes
/// when two machines change one file.
public enum SyncedFolderNames {
    public static func isLeftByTools(_ name: String) -> Bool {
        name.hasPrefix(".") || name.hasPrefix("~") || name.hasSuffix(".tmp") || name.hasSuffix(".part") || name.contains(".sync-conflict-")
    }
}
