@testable import BatonCore
import Testing

struct StrictJSONTests {
    func parse(_ text: String, maxBytes: Int = 64 * 1024, maxDepth: Int = 64) throws(BatonError) -> [StrictJSON.Member] {
        try StrictJSON.parseObject(text, maxBytes: maxBytes, maxDepth: maxDepth)
    }

    @Test func acceptsObjectsAndKeepsTopLevelMembersAsWritten() throws {
        let members = try parse(#" { "id" : "8c1b", "name":"Agatha", "n": -1.5e+3, "ok": true, "none": null, "tags": [ "a", {"b": []} ], "esc": "\u00e9\ud83e\udd85\n" } "#)
        #expect(members.map(\.key) == ["id", "name", "n", "ok", "none", "tags", "esc"])
        #expect(members[0].rawValue == #""8c1b""#)
        #expect(members[2].rawValue == "-1.5e+3")
        #expect(members[5].rawValue == #"[ "a", {"b": []} ]"#)
        #expect(try parse("{}").isEmpty)
        #expect(try parse(#"{"emoji 🦅": "ü"}"#).first?.key == "emoji 🦅")
    }

    @Test(arguments: [
        ("", "must be a JSON object"), ("[]", "must be a JSON object"), ("\"x\"", "must be a JSON object"),
        ("{", "ends in the middle"), (#"{"a":1,}"#, "expected a quoted key"), (#"{"a":1"#, "ends in the middle"),
        (#"{"a":1} x"#, "unexpected text after"), (#"{"a":NaN}"#, "NaN and Infinity"), (#"{"a":-Infinity}"#, "NaN and Infinity"),
        (#"{"a":Infinity}"#, "NaN and Infinity"), (#"{"a":01}"#, "leading zeros"), (#"{"a":1.}"#, "after '.'"),
        (#"{"a":1e}"#, "exponent"), (#"{"a":tru}"#, "true, false and null"), (#"{'a':1}"#, "expected a quoted key"),
        (#"{"a":"\x"}"#, "invalid escape"), ("{\"a\":\"tab\there\"}", "control characters"),
        (#"{"a":"\ud83e"}"#, "high surrogate without a low"), (#"{"a":"\udd85"}"#, "low surrogate without a high"),
        (#"{"a":"\u0000"}"#, "\\u0000 is not allowed"), (#"{"a":1,"a":2}"#, "duplicate key \"a\""),
        (#"{"a":1,"\u0061":2}"#, "duplicate key \"a\""), (#"{"x":{"k":1,"k":2}}"#, "duplicate key \"k\""),
        (#"{"a":+1}"#, "unexpected character"), ("{\"a\":1}\u{0}", "unexpected text after"),
    ])
    func refusesWhatIsNotStrictJSON(_ text: String, _ reason: String) {
        do {
            _ = try parse(text)
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.code == .invalidPayload)
            #expect(error.message.contains(reason), "\(text): \(error.message)")
        }
    }

    @Test func depthIsLimitedWithoutRecursion() throws {
        func nested(_ depth: Int) -> String {
            "{\"a\":" + String(repeating: "[", count: depth - 1) + String(repeating: "]", count: depth - 1) + "}"
        }
        #expect(throws: Never.self) { try parse(nested(64)) }
        #expect(throws: BatonError.invalidPayload("the payload is nested deeper than 64 levels")) { try parse(nested(65)) }
        #expect(throws: BatonError.self) { try parse(nested(100_000), maxBytes: 1 << 20) }
    }

    @Test func sizeIsLimited() {
        let big = "{\"a\":\"" + String(repeating: "x", count: 64 * 1024) + "\"}"
        do {
            _ = try parse(big)
            Issue.record("accepted an oversize payload")
        } catch {
            #expect(error.code == .quotaExceeded)
            #expect(error.message.contains("the limit is 64 KiB; biggest keys: a 64 KiB"))
        }
    }

    @Test func anOversizePayloadNamesItsBiggestKeys() {
        let payload = #"{"id":"agatha","blob":""# + String(repeating: "x", count: 70_000) + #"","notes":""#
            + String(repeating: "n", count: 1_100) + #"","tiny":1,"name":"Agatha"}"#
        #expect(throws: BatonError(.quotaExceeded, """
            the payload is 69.5 KiB (71161 bytes); the limit is 64 KiB; biggest keys: blob 68.4 KiB, notes 1.1 KiB, name 15 bytes
            """, biggestKeys: [
                KeySize(key: "blob", bytes: 70_009), KeySize(key: "notes", bytes: 1_110), KeySize(key: "name", bytes: 15),
            ])) { try parse(payload) }
        // Not JSON as well as too big: the total and the limit all the same.
        #expect(throws: BatonError(.quotaExceeded, "the payload is 64 KiB (65537 bytes); the limit is 64 KiB")) {
            try parse(String(repeating: "x", count: 65_537))
        }
    }

    @Test func sizesReadAsPeopleReadThem() {
        #expect(SizeReport.text(1) == "1 byte")
        #expect(SizeReport.text(1023) == "1023 bytes")
        #expect(SizeReport.text(1024) == "1 KiB")
        #expect(SizeReport.text(1536) == "1.5 KiB")
        #expect(SizeReport.text(64 * 1024) == "64 KiB")
        #expect(SizeReport.text(3 * 1024 * 1024 + 104_858) == "3.1 MiB")
    }

    @Test func mergeReplacesInPlaceAndAppendsNewKeys() throws {
        let base = try parse(#"{"id":"1","name":"Agatha","book":1}"#)
        let change = try parse(#"{"book": 2, "note":"a \"draft\""}"#)
        let merged = StrictJSON.merge(base, with: change)
        #expect(merged == #"{"id":"1","name":"Agatha","book":2,"note":"a \"draft\""}"#)
        #expect(try parse(merged).count == 4)
        #expect(StrictJSON.quote("tab\tnew\nline\u{1}") == #""tab\tnew\nline\u0001""#)
    }
}
