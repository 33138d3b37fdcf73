import BatonStore

/// The rules when machines disagree (docs/guide.md, "The rules when machines disagree"), as
/// decisions over the facts the store gives where another machine's record meets what this
/// machine has. The store applies what they decide, in the same transaction.
///
/// An activity has one writer, the machine that advertised it. Where two changes race, the
/// later hybrid-logical-clock time wins. An end its writer made is final.
public struct ConflictRules: SyncRules {
    public init() {}

    public func record(from device: String, at hlc: Int64, endedHere: EndedHere?, storedFrom owner: String?) -> RecordVerdict {
        // An end is final, but for this machine's own request to end it: a change its writer
        // made later than the request wins, and brings it back.
        var reviving = false
        switch endedHere {
        case nil: break
        case .final: return .ignore
        case .requested(let asked):
            guard hlc > asked else { return .ignore }
            reviving = true
        }
        switch owner {
        case nil: return .insert(reviving: reviving)
        case device: return .update(reviving: reviving)
        // Another device's activity (or this machine's) under the same id: only its writer changes it.
        default: return .ignore
        }
    }

    /// The later of the request and this machine's last change of the activity wins.
    public func endsAtRequest(madeAt hlc: Int64, lastChangedHereAt: Int64) -> Bool {
        hlc > lastChangedHereAt
    }
}
