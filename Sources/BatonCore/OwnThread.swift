import Glibc

/// Threads of their own, over POSIX threads: for work that waits outside Swift's concurrency
/// (`poll()` on an inotify descriptor or a server's socket, a whole file read or written), which
/// must hold none of the cooperative pool's few threads (two on two cores). Foundation's `Thread`
/// would bring all of Foundation, and its ICU data, into every program that links this module.
public enum OwnThread {
    /// Why a thread could not be started.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Runs `body` on a new, detached thread.
    public static func start(_ body: @escaping @Sendable () -> Void) throws(Failure) {
        final class Body {
            let run: @Sendable () -> Void
            init(_ run: @escaping @Sendable () -> Void) { self.run = run }
        }
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { context in
            guard let context else { return nil }
            Unmanaged<Body>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            throw Failure(description: "cannot start a thread: \(String(cString: strerror(result)))")
        }
        pthread_detach(thread)
    }

    /// Runs `work` on a thread of its own and returns its result.
    public static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            do {
                try start { continuation.resume(with: Result { try work() }) }
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }
}
