/// "3 min ago", "in 2 h": times relative to now, for people (the CLI, the desktop's search).
public func relativeTime(_ microseconds: UInt64, now: UInt64 = WallClock.nowMicroseconds()) -> String {
    let future = microseconds > now
    let seconds = Int((future ? microseconds - now : now - microseconds) / 1_000_000)
    let amount: String = switch seconds {
    case ..<5: "now"
    case ..<60: "\(seconds) s"
    case ..<3600: "\(seconds / 60) min"
    case ..<86_400: "\(seconds / 3600) h"
    default: "\(seconds / 86_400) d"
    }
    if amount == "now" { return "just now" }
    return future ? "in \(amount)" : "\(amount) ago"
}

