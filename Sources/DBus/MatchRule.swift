/// A D-Bus match rule: which broadcast signals a subscription wants.
///
/// The bus delivers signals only to connections with a matching rule
/// (specification, "Match Rules"); the same rule then picks, inside this
/// process, which subscription sees each signal.
public struct MatchRule: Hashable, Sendable {
    public var sender: String?
    public var interface: String?
    public var member: String?
    public var path: ObjectPath?
    /// Matches this path and every path below it.
    public var pathNamespace: ObjectPath?
    /// `arg0`: the first body argument, when it is a string equal to this.
    public var arg0: String?
    /// `arg0namespace`: the first body argument, when it is a string that is this bus or
    /// interface name or one below it (`org.mpris.MediaPlayer2` matches `org.mpris.MediaPlayer2.mpv`).
    public var arg0Namespace: String?

    public init(
        sender: String? = nil, interface: String? = nil, member: String? = nil,
        path: ObjectPath? = nil, pathNamespace: ObjectPath? = nil, arg0: String? = nil, arg0Namespace: String? = nil
    ) {
        self.arg0Namespace = arg0Namespace
        self.sender = sender
        self.interface = interface
        self.member = member
        self.path = path
        self.pathNamespace = pathNamespace
        self.arg0 = arg0
    }

    /// Throws `InvalidArgs` when a field could not form a valid rule.
    public func validate() throws(DBusError) {
        if let sender { try DBusNames.validate(sender, as: .busName) }
        if let interface { try DBusNames.validate(interface, as: .interface) }
        if let member { try DBusNames.validate(member, as: .member) }
        if let arg0 { try DBusNames.validateString(arg0) }
        if let arg0Namespace { try DBusNames.validate(arg0Namespace, as: .busName) }
        if path != nil && pathNamespace != nil {
            throw .invalidArgs("a match rule cannot have both path and path_namespace")
        }
    }

    /// The rule as the bus's `AddMatch` takes it.
    public var text: String {
        var parts = ["type='signal'"]
        func add(_ key: String, _ value: String?) {
            // Inside quotes only the quote itself needs escaping, as '\''. (Split and joined:
            // `replacing` would bring _StringProcessing's code into batond's pages.)
            if let value { parts.append("\(key)='\(value.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''"))'") }
        }
        add("sender", sender)
        add("interface", interface)
        add("member", member)
        add("path", path?.text)
        add("path_namespace", pathNamespace?.text)
        add("arg0", arg0)
        add("arg0namespace", arg0Namespace)
        return parts.joined(separator: ",")
    }

    /// True when `message` is a signal this rule selects.
    ///
    /// A well-known `sender` cannot be checked here (signals carry the unique
    /// name), so it is left to the bus; unique names are compared.
    public func matches(_ message: Message) -> Bool {
        guard message.kind == .signal else { return false }
        if let sender, sender.hasPrefix(":"), message.sender != sender { return false }
        if let interface, message.interface != interface { return false }
        if let member, message.member != member { return false }
        if let path, message.path != path { return false }
        if let pathNamespace {
            guard let messagePath = message.path,
                  messagePath == pathNamespace || messagePath.isDescendant(of: pathNamespace) else { return false }
        }
        if let arg0 {
            // Like the bus, arg0 compares string arguments only.
            guard case .string(let first)? = message.body.first, first == arg0 else { return false }
        }
        if let arg0Namespace {
            guard case .string(let first)? = message.body.first,
                  first == arg0Namespace || first.hasPrefix(arg0Namespace + ".") else { return false }
        }
        return true
    }
}
