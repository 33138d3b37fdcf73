import Glibc

/// KDE's recent documents: KIO writes a KConfig file for each document KDE's file dialog or
/// launcher opens into `~/.local/share/RecentDocuments/` (`NAME.desktop`, and `NAME[2].desktop`
/// for a second document of that name), beside `recently-used.xbel`, and the two do not always
/// agree. Each file is a link:
///
///     [Desktop Entry]
///     Type=Link
///     URL[$e]=file:$HOME/Documents/notes.txt        ($e: environment variables expanded)
///     X-KDE-LastOpenedWith=org.kde.kate             (a desktop id, without .desktop)
///
/// Read as data only, never run: only regular files (no symlink), small, of type Link, naming
/// a local file; every other key (an `Exec`, say) is ignored.
public enum KDERecentDocuments {
    /// The directory's name under the XDG data home.
    public static let directoryName = "RecentDocuments"
    /// A link KIO writes is a few hundred bytes; anything larger is not one.
    public static let maxFileBytes = 16_384
    /// The links read at most in one reading (KIO keeps about 20).
    public static let maxFiles = 500

    /// The documents the links in `directory` name, one per document (the newest link of
    /// each), `usedAt` the link's modification time.
    public static func documents(in directory: String, home: String) -> [RecentlyUsed.Document] {
        var newest: [String: RecentlyUsed.Document] = [:]
        for name in DesktopApp.fileNames(in: directory).sorted().prefix(maxFiles) where name.hasSuffix(".desktop") {
            guard let (text, modified) = readLink(directory + "/" + name), let document = document(text, home: home, modified: modified)
            else { continue }
            if let known = newest[document.uri], known.usedAt >= document.usedAt { continue }
            newest[document.uri] = document
        }
        return Array(newest.values)
    }

    /// The document one link names; nil for anything but a link to a local file.
    public static func document(_ text: String, home: String, modified: UInt64) -> RecentlyUsed.Document? {
        var type: String?, url: String?, expand = false, app: String?
        for (key, raw) in DesktopApp.mainGroup(text) {
            let value = String(raw)
            switch key {
            case "Type": type = value
            case "URL" where url == nil: url = value
            case "URL[$e]": (url, expand) = (value, true)
            case "X-KDE-LastOpenedWith" where !value.isEmpty: app = value
            default: break
            }
        }
        guard type == "Link", var url else { return nil }
        // KIO writes the home directory as `$HOME` at the path's start; no other variable is expanded.
        if expand {
            for variable in ["file:${HOME}", "file:$HOME"] where url.hasPrefix(variable) {
                url = "file:" + home + url.dropFirst(variable.count)
                break
            }
        }
        guard url.hasPrefix("file:") else { return nil }
        var path = String(url.dropFirst("file:".count))
        if path.hasPrefix("//") { path = String(path.dropFirst(2)) }
        path = RecentlyUsed.percentDecoded(path)
        guard path.hasPrefix("/"), !path.contains("\0"), !path.contains("$") || !expand else { return nil }
        return RecentlyUsed.Document(uri: fileURI(path), app: app, usedAt: modified)
    }

    /// `path` as a file URI, percent-encoded as GLib's `g_filename_to_uri` does it, so that the
    /// same document has the same URI whichever file named it.
    public static func fileURI(_ path: String) -> String {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/".utf8)
        var uri = "file://"
        for byte in path.utf8 {
            if allowed.contains(byte) {
                uri.unicodeScalars.append(UnicodeScalar(byte))
            } else {
                let hex = String(byte, radix: 16, uppercase: true)
                uri += "%" + (hex.count == 1 ? "0" : "") + hex
            }
        }
        return uri
    }

    /// A link's text and modification time (µs): a regular file, not through a symlink, small, UTF-8.
    static func readLink(_ path: String) -> (String, UInt64)? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= maxFileBytes else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var done = 0
        while done < bytes.count {
            let count = bytes[done...].withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            done += count
        }
        guard let text = String(validating: bytes[..<done], as: UTF8.self) else { return nil }
        let modified = UInt64(max(0, info.st_mtim.tv_sec)) * 1_000_000 + UInt64(max(0, info.st_mtim.tv_nsec)) / 1_000
        return (text, modified)
    }
}
