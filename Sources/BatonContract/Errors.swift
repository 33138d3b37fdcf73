import BatonCore
import DBus

/// Domain errors as the contract names them: `org.baton.Handoff1.Error.<Code>`, both ways.
extension BatonError: DBusErrorConvertible {
    /// The contract's name for this error: `org.baton.Handoff1.Error.<Code>`.
    public var dbusName: String { Contract.errorName(code.rawValue) }

    /// The error a contract error name and message stand for; nil for any other name.
    public init?(dbusName: String, message: String, biggestKeys: [KeySize] = []) {
        guard let code = Contract.errorCode(dbusName).flatMap(Code.init(rawValue:)) else { return nil }
        self.init(code, message, biggestKeys: biggestKeys)
    }

    /// The error a D-Bus error stands for, when it is one of the contract's.
    public init?(_ error: DBusError) {
        let keys = error.details.first?.arrayValue?.compactMap { entry -> KeySize? in
            guard case .structure(let fields) = entry, fields.count == 2, let key = fields[0].stringValue,
                  let bytes = fields[1].uint64Value, let size = Int(exactly: bytes) else { return nil }
            return KeySize(key: key, bytes: size)
        }
        self.init(dbusName: error.name, message: error.message, biggestKeys: keys ?? [])
    }

    /// An error over a size limit carries its biggest keys as a second argument, `a(st)`.
    public var dbusError: DBusError {
        guard !biggestKeys.isEmpty else { return DBusError(name: dbusName, message: message) }
        let keys = biggestKeys.map { DBusValue.structure([.string($0.key), .uint64(UInt64($0.bytes))]) }
        return DBusError(name: dbusName, message: message, details: [.array(.structure([.string, .uint64]), keys)])
    }
}
