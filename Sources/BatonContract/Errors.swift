import BatonCore
import DBus

/// Domain errors as the contract names them: `org.baton.Handoff1.Error.<Code>`, both ways.
extension BatonError: DBusErrorConvertible {
    /// The contract's name for this error: `org.baton.Handoff1.Error.<Code>`.
    public var dbusName: String { Contract.errorName(code.rawValue) }

    /// The error a contract error name and message stand for; nil for any other name.
    public init?(dbusName: String, message: String) {
        guard let code = Contract.errorCode(dbusName).flatMap(Code.init(rawValue:)) else { return nil }
        self.init(code, message)
    }

    /// The error a D-Bus error stands for, when it is one of the contract's.
    public init?(_ error: DBusError) {
        self.init(dbusName: error.name, message: error.message)
    }

    public var dbusError: DBusError {
        DBusError(name: dbusName, message: message)
    }
}
