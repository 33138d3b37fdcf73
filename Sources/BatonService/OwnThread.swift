import Foundation

/// Runs `work` on a thread of its own and returns its result: for work that blocks for long
/// (reading a whole file, writing to a pipe someone else reads), which must hold neither the
/// bus thread nor one of Swift's few concurrency threads (two on two cores).
func onThreadOfItsOwn<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}
