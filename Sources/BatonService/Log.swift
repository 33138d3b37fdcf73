import Glibc

/// Log lines on stderr with the `<N>` priority prefixes journald understands
/// (sd-daemon(3)). Messages never carry payloads or storage values.
public struct Log: Sendable {
    public let verbose: Bool

    public init(verbose: Bool) { self.verbose = verbose }

    public func error(_ message: String) { write(3, message) }
    public func warning(_ message: String) { write(4, message) }
    public func info(_ message: String) { write(6, message) }
    public func debug(_ message: String) { if verbose { write(7, message) } }

    private func write(_ priority: Int, _ message: String) {
        let line = "<\(priority)>batond: \(message)\n"
        line.utf8CString.withUnsafeBufferPointer { _ = Glibc.write(2, $0.baseAddress, $0.count - 1) }
    }
}
