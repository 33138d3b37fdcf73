// The floor under a write's hop to the writer thread: what it costs a call to run two
// trivial writes through a serial DispatchQueue and a checked continuation (as
// BatonStore's WriterThread queues a write that finds the queue busy) against running
// them on the caller's task under the same lock. With 64 calls in flight, as `scripts/bench`
// drives Continue, the writer's queue seldom empties; with one, each hop wakes a sleeping
// thread and back. Built and run by Benchmarks/hop-floor/run.
import Dispatch
import Foundation
import Glibc

let calls = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 200_000
let writesPerCall = 2

final class Writer: @unchecked Sendable {
    let queue = DispatchQueue(label: "hop-floor.writer")
    let slot = NSLock()
    var count = 0

    func write() { count &+= 1 }

    func hop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                self.slot.lock()
                self.write()
                self.slot.unlock()
                continuation.resume()
            }
        }
    }

    func inPlace() {
        slot.lock()
        write()
        slot.unlock()
    }
}

/// CPU time of this process so far, in microseconds.
func cpu() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6 + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
}

/// CPU µs per call with each write hopping to the writer's queue, or not.
func measure(hopping: Bool, inFlight: Int) async -> Double {
    let writer = Writer()
    let before = cpu()
    await withTaskGroup(of: Void.self) { group in
        for _ in 0..<inFlight {
            group.addTask {
                for _ in 0..<(calls / inFlight) {
                    for _ in 0..<writesPerCall {
                        if hopping { await writer.hop() } else { writer.inPlace() }
                    }
                    await Task.yield()  // the call's reply: its task ends and the next begins
                }
            }
        }
    }
    return (cpu() - before) / Double(calls / inFlight * inFlight)
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
for inFlight in [64, 1] {
    var hopped: [Double] = [], inPlace: [Double] = []
    for _ in 0..<5 {
        inPlace.append(await measure(hopping: false, inFlight: inFlight))
        hopped.append(await measure(hopping: true, inFlight: inFlight))
    }
    print(String(format: "%2d in flight, %d writes a call (median of 5 alternating runs of %d calls): CPU per call in place %.2f µs, hopping %.2f µs; a hop %.2f µs",
                 inFlight, writesPerCall, calls, median(inPlace), median(hopped), (median(hopped) - median(inPlace)) / Double(writesPerCall)))
}
