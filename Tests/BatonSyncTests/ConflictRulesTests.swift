import BatonStore
import BatonSync
import Testing

/// Sync's rules as decisions over facts, without a store or a server; `SyncStoreTests` and
/// `SyncEngineTests` check the store and two machines apply them.
struct ConflictRulesTests {
    let rules = ConflictRules()

    @Test(arguments: [
        // (how it ended here, whose copy is stored here) → verdict, for the laptop's record stamped 100.
        (nil, nil, RecordVerdict.insert(reviving: false)),
        (nil, "laptop", .update(reviving: false)),
        (nil, "", .ignore),                                   // this machine's, under the same id
        (nil, "phone", .ignore),                              // a third machine's
        (EndedHere.final, nil, .ignore),                      // its writer ended it: for good
        (.final, "laptop", .ignore),
        (.requested(99), nil, .insert(reviving: true)),       // changed after this machine asked
        (.requested(100), nil, .ignore),                      // not later: the request stands
        (.requested(101), nil, .ignore),
    ] as [(EndedHere?, String?, RecordVerdict)])
    func aRecordOfAnotherMachinesActivity(ended: EndedHere?, owner: String?, verdict: RecordVerdict) {
        #expect(rules.record(from: "laptop", at: 100, endedHere: ended, storedFrom: owner) == verdict)
    }

    @Test func aRequestToEndLosesToALaterChangeHere() {
        #expect(rules.endsAtRequest(madeAt: 101, lastChangedHereAt: 100))
        #expect(!rules.endsAtRequest(madeAt: 100, lastChangedHereAt: 100))
        #expect(!rules.endsAtRequest(madeAt: 99, lastChangedHereAt: 100))
        #expect(rules.endsAtRequest(madeAt: 1, lastChangedHereAt: 0), "never sent: any request is later")
    }
}
