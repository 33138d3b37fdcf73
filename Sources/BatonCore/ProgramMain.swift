import Dispatch
import Glibc

/// Runs a program's asynchronous work to its end, then exits with status 0 (the work exits
/// sooner itself with any other).
///
/// The main thread waits for it on a semaphore. A top-level `await` would hand the main thread
/// to `dispatch_main()`, which ends it with `pthread_exit`, and that unwinds its stack through
/// the program's unwind tables, which then stay resident (Benchmarks/README, "What an idle
/// batond holds"). Nothing here runs on the main queue.
public func runProgram(_ work: @escaping @Sendable () async -> Void) -> Never {
    let finished = DispatchSemaphore(value: 0)
    Task.detached {
        await work()
        finished.signal()
    }
    finished.wait()
    exit(0)
}
