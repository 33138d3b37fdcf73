import Synchronization

/// The objects a connection exports, and the routing of incoming calls to them.
///
/// Objects are added and removed at run time (scenes come and go); a path
/// marked as an object manager announces its descendants with
/// `InterfacesAdded`/`InterfacesRemoved`.
final class ObjectRegistry: Sendable {
    struct Object {
        var interfaces: [Interface]
        var isObjectManager: Bool
        /// The app the object belongs to: it exists only for host clients and that app's
        /// sandboxed callers, and its signals reach only them. Nil: it exists for everyone.
        var owner: String?
        /// Whether the object managers above it list it (`GetManagedObjects`) and announce it.
        var isManaged = true

        /// Who may see the object and hear its signals.
        var audience: Audience { owner.map(Audience.app) ?? .everyone }
    }

    private struct Objects {
        var byPath: [ObjectPath: Object] = [:]
        /// The object managers among them, kept apart so that exporting one of thousands
        /// of scenes does not look at every other object.
        var managers: Set<ObjectPath> = []
    }

    private let objects = Mutex(Objects())

    /// Whether `path` exists for `caller` (every path does for a call without one).
    func isVisible(_ path: ObjectPath, to caller: Caller?) -> Bool {
        guard let caller, caller.isSandboxed else { return true }
        return object(at: path)?.audience.admits(caller) ?? true
    }

    // MARK: Registration

    /// Adds or replaces the object at `path`. Returns the object managers above it.
    func add(_ path: ObjectPath, _ object: Object) -> [ObjectPath] {
        objects.withLock { objects in
            objects.byPath[path] = object
            if object.isObjectManager { objects.managers.insert(path) } else { objects.managers.remove(path) }
            return object.isManaged ? Self.managers(above: path, in: objects) : []
        }
    }

    /// Removes the object at `path`; returns what it had and the managers above it.
    func remove(_ path: ObjectPath) -> (Object, managers: [ObjectPath])? {
        objects.withLock { objects in
            guard let object = objects.byPath.removeValue(forKey: path) else { return nil }
            objects.managers.remove(path)
            return (object, object.isManaged ? Self.managers(above: path, in: objects) : [])
        }
    }

    func object(at path: ObjectPath) -> Object? { objects.withLock { $0.byPath[path] } }

    private static func managers(above path: ObjectPath, in objects: Objects) -> [ObjectPath] {
        objects.managers.filter { path.isDescendant(of: $0) }
    }

    // MARK: Routing

    /// Finds what should answer `message`, or throws the standard error for what is missing.
    func resolve(_ message: Message) throws(DBusError) -> Route {
        let path = message.path ?? .root
        let member = message.member ?? ""
        let object = object(at: path)
        let interfaces = object?.interfaces ?? []

        if let interface = message.interface, let standard = StandardInterface(rawValue: interface) {
            guard object != nil || standard == .introspectable && isAncestorOfExported(path) else {
                throw .init(name: DBusError.Name.unknownObject, message: "no object at \(path)")
            }
            guard standard != .objectManager || object?.isObjectManager == true else {
                throw .init(name: DBusError.Name.unknownInterface, message: "\(path) is not an object manager")
            }
            guard let signature = standard.signature(of: member) else {
                throw .init(name: DBusError.Name.unknownMethod, message: "\(interface) has no method \(member)")
            }
            return .standard(standard, member: member, signature: signature, object: object)
        }

        guard object != nil || isAncestorOfExported(path) else {
            throw .init(name: DBusError.Name.unknownObject, message: "no object at \(path)")
        }
        if let name = message.interface {
            guard let interface = interfaces.first(where: { $0.name == name }) else {
                throw .init(name: DBusError.Name.unknownInterface, message: "\(path) has no interface \(name)")
            }
            guard let method = interface.method(named: member) else {
                throw .init(name: DBusError.Name.unknownMethod, message: "\(name) has no method \(member)")
            }
            return .method(method)
        }
        // Without an interface the specification lets us pick any method of that name.
        if let method = interfaces.lazy.compactMap({ $0.method(named: member) }).first {
            return .method(method)
        }
        if member == "Introspect" { return .standard(.introspectable, member: member, signature: .empty, object: object) }
        throw .init(name: DBusError.Name.unknownMethod, message: "\(path) has no method \(member)")
    }

    enum Route {
        case method(Method)
        /// A standard interface's method; `object` is what `resolve` found at the path, so
        /// that the method need not look it up again.
        case standard(StandardInterface, member: String, signature: Signature, object: Object?)

        var signature: Signature {
            switch self {
            case .method(let method): method.inputSignature
            case .standard(_, _, let signature, _): signature
            }
        }

        var ordering: Method.Ordering {
            switch self {
            case .method(let method): method.ordering
            // A setter may await a write: later calls are served meanwhile.
            case .standard(.properties, "Set", _, _): .concurrent
            // Property getters may await the owner's state.
            case .standard: .inOrder
            }
        }
    }

    private func isAncestorOfExported(_ path: ObjectPath) -> Bool {
        objects.withLock { objects in objects.byPath.keys.contains { $0.isDescendant(of: path) } }
    }

    // MARK: Standard interfaces

    enum StandardInterface: String {
        case introspectable = "org.freedesktop.DBus.Introspectable"
        case properties = "org.freedesktop.DBus.Properties"
        case objectManager = "org.freedesktop.DBus.ObjectManager"

        func signature(of member: String) -> Signature? {
            switch (self, member) {
            case (.introspectable, "Introspect"): .empty
            case (.properties, "Get"): Self.ss
            case (.properties, "GetAll"): Self.s
            case (.properties, "Set"): Self.ssv
            case (.objectManager, "GetManagedObjects"): .empty
            default: nil
            }
        }

        // Parsed once: a literal in the switch above was parsed on every call (1 000
        // instructions of a Properties.Get).
        private static let s: Signature = "s"
        private static let ss: Signature = "ss"
        private static let ssv: Signature = "ssv"

        /// The standard interfaces every exported object has, as ObjectManager names them
        /// when the object comes (`InterfacesAdded`) and goes (`InterfacesRemoved`).
        static let everyObjectHas = [introspectable.rawValue, properties.rawValue, "org.freedesktop.DBus.Peer"]
    }

    /// Runs a standard-interface method for `call` on `object`, the one at its path.
    func standard(_ standard: StandardInterface, _ member: String, on object: Object?, _ call: MethodCall) async throws -> [DBusValue] {
        let path = call.path
        switch (standard, member) {
        case (.introspectable, _):
            return [.string(introspect(path, for: call.caller))]
        case (.properties, "Get"):
            let (_, property) = try findProperty(call, on: object, at: path)
            return [.variant(try await property.value(at: path))]
        case (.properties, "GetAll"):
            let name = try call.argument(0, as: String.self)
            guard let interface = object?.interfaces.first(where: { $0.name == name }) else {
                // An empty interface name means "all"; none of ours are empty.
                throw DBusError(name: DBusError.Name.unknownInterface, message: "\(path) has no interface \(name)")
            }
            return [try await propertyRecord(interface, at: path)]
        case (.properties, "Set"):
            let (interface, property) = try findProperty(call, on: object, at: path)
            guard let set = property.setter else {
                throw DBusError(name: DBusError.Name.propertyReadOnly, message: "\(interface.name).\(property.name) is read-only")
            }
            let value = try call.argument(2, as: DBusValue.self).variantValue ?? .structure([])
            guard value.type == property.type else {
                throw DBusError.invalidArgs(
                    "\(property.name) has type '\(property.type.signature)', not '\(value.type.signature)'")
            }
            try await set(path, value)
            switch property.changeSignal {
            case .emits:
                call.connection.emitPropertiesChanged(path: path, interface: interface.name, changed: [property.name: value])
            case .invalidates:
                call.connection.emitPropertiesChanged(path: path, interface: interface.name, invalidated: [property.name])
            case .const, .none:
                break
            }
            return []
        case (.objectManager, _):
            return [try await managedObjects(below: path, for: call.caller)]
        default:
            throw DBusError(name: DBusError.Name.unknownMethod, message: "\(standard.rawValue) has no method \(member)")
        }
    }

    private func findProperty(_ call: MethodCall, on object: Object?, at path: ObjectPath) throws(DBusError) -> (Interface, Property) {
        let interfaceName = try call.argument(0, as: String.self)
        let propertyName = try call.argument(1, as: String.self)
        guard let interface = object?.interfaces.first(where: { $0.name == interfaceName }) else {
            throw .init(name: DBusError.Name.unknownInterface, message: "\(path) has no interface \(DBusError.printable(interfaceName))")
        }
        guard let property = interface.property(named: propertyName) else {
            throw .init(name: DBusError.Name.unknownProperty, message: "\(interfaceName) has no property \(DBusError.printable(propertyName))")
        }
        return (interface, property)
    }

    /// The `a{sv}` of an interface's properties: `known` when given (every property of
    /// the interface, as its `readAll` would give them), else read.
    func propertyRecord(_ interface: Interface, at path: ObjectPath, known: [String: DBusValue]? = nil) async throws -> DBusValue {
        var entries: [DBusValue.DictionaryEntry] = []
        var values = known
        if values == nil, let readAll = interface.readAll { values = try await readAll(path) }
        if let values {
            for property in interface.properties {
                guard let value = values[property.name], value.type == property.type else {
                    throw InternalError("\(interface.name) at \(path) has no '\(property.type.signature)' value for \(property.name)")
                }
                entries.append(.init(.string(property.name), .variant(value)))
            }
            return .dictionary(key: .string, value: .variant, entries)
        }
        for property in interface.properties {
            entries.append(.init(.string(property.name), .variant(try await property.value(at: path))))
        }
        return .dictionary(key: .string, value: .variant, entries)
    }

    /// The `a{sa{sv}}` describing every interface of an object, for ObjectManager; `known`
    /// holds property values the caller already has, by interface name.
    func interfacesRecord(_ object: Object, at path: ObjectPath, known: [String: [String: DBusValue]] = [:]) async throws -> DBusValue {
        var entries: [DBusValue.DictionaryEntry] = []
        for standard in StandardInterface.everyObjectHas {
            entries.append(.init(.string(standard), .dictionary(key: .string, value: .variant, [])))
        }
        for interface in object.interfaces {
            entries.append(.init(.string(interface.name), try await propertyRecord(interface, at: path, known: known[interface.name])))
        }
        return .dictionary(key: .string, value: .dictionary(key: .string, value: .variant), entries)
    }

    private func managedObjects(below manager: ObjectPath, for caller: Caller?) async throws -> DBusValue {
        let below = objects.withLock { objects in
            objects.byPath.filter { $0.key.isDescendant(of: manager) && $0.value.isManaged }.sorted { $0.key < $1.key }
        }.filter { caller.map($0.value.audience.admits) ?? true }
        var entries: [DBusValue.DictionaryEntry] = []
        for (path, object) in below {
            entries.append(.init(.objectPath(path), try await interfacesRecord(object, at: path)))
        }
        return .dictionary(
            key: .objectPath, value: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)),
            entries)
    }

    // MARK: Introspection

    /// The introspection XML of `path`: its interfaces and its direct children, those that
    /// lead to an object `caller` may see.
    func introspect(_ path: ObjectPath, for caller: Caller? = nil) -> String {
        let (object, descendants) = objects.withLock { objects -> (Object?, [ObjectPath]) in
            (objects.byPath[path], objects.byPath.filter { $0.key.isDescendant(of: path) && (caller.map($0.value.audience.admits) ?? true) }.map(\.key))
        }
        let depth = path.elements.count
        let children = Set(descendants.map { String($0.elements[depth]) }).sorted()
        var xml = IntrospectionXML.header
        xml += "<node>\n"
        xml += IntrospectionXML.standard(objectManager: object?.isObjectManager == true, properties: object != nil)
        for interface in object?.interfaces ?? [] {
            xml += IntrospectionXML.interface(interface)
        }
        for child in children {
            xml += "  <node name=\"\(child)\"/>\n"
        }
        xml += "</node>\n"
        return xml
    }
}

/// A bug on our side (a handler that broke its declared contract). It is logged
/// and replied as `org.freedesktop.DBus.Error.Failed` without details.
struct InternalError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Writes introspection XML in the format of the specification's "Introspection Data Format".
enum IntrospectionXML {
    static let header = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">

        """

    static func standard(objectManager: Bool, properties: Bool) -> String {
        var xml = """
              <interface name="org.freedesktop.DBus.Peer">
                <method name="Ping"/>
                <method name="GetMachineId">
                  <arg name="machine_uuid" type="s" direction="out"/>
                </method>
              </interface>
              <interface name="org.freedesktop.DBus.Introspectable">
                <method name="Introspect">
                  <arg name="xml_data" type="s" direction="out"/>
                </method>
              </interface>

            """
        if properties {
            xml += """
                  <interface name="org.freedesktop.DBus.Properties">
                    <method name="Get">
                      <arg name="interface_name" type="s" direction="in"/>
                      <arg name="property_name" type="s" direction="in"/>
                      <arg name="value" type="v" direction="out"/>
                    </method>
                    <method name="GetAll">
                      <arg name="interface_name" type="s" direction="in"/>
                      <arg name="properties" type="a{sv}" direction="out"/>
                    </method>
                    <method name="Set">
                      <arg name="interface_name" type="s" direction="in"/>
                      <arg name="property_name" type="s" direction="in"/>
                      <arg name="value" type="v" direction="in"/>
                    </method>
                    <signal name="PropertiesChanged">
                      <arg name="interface_name" type="s"/>
                      <arg name="changed_properties" type="a{sv}"/>
                      <arg name="invalidated_properties" type="as"/>
                    </signal>
                  </interface>

                """
        }
        if objectManager {
            xml += """
                  <interface name="org.freedesktop.DBus.ObjectManager">
                    <method name="GetManagedObjects">
                      <arg name="objects" type="a{oa{sa{sv}}}" direction="out"/>
                    </method>
                    <signal name="InterfacesAdded">
                      <arg name="object_path" type="o"/>
                      <arg name="interfaces_and_properties" type="a{sa{sv}}"/>
                    </signal>
                    <signal name="InterfacesRemoved">
                      <arg name="object_path" type="o"/>
                      <arg name="interfaces" type="as"/>
                    </signal>
                  </interface>

                """
        }
        return xml
    }

    static func interface(_ interface: Interface) -> String {
        var xml = "  <interface name=\"\(interface.name)\">\n"
        for method in interface.methods {
            let arguments = method.inputs.map { ($0, "in") } + method.outputs.map { ($0, "out") }
            if arguments.isEmpty {
                xml += "    <method name=\"\(method.name)\"/>\n"
                continue
            }
            xml += "    <method name=\"\(method.name)\">\n"
            for (argument, direction) in arguments {
                xml += "      <arg name=\"\(escape(argument.name))\" type=\"\(escape(argument.type.signature))\" direction=\"\(direction)\"/>\n"
            }
            xml += "    </method>\n"
        }
        for signal in interface.signals {
            if signal.arguments.isEmpty {
                xml += "    <signal name=\"\(signal.name)\"/>\n"
                continue
            }
            xml += "    <signal name=\"\(signal.name)\">\n"
            for argument in signal.arguments {
                xml += "      <arg name=\"\(escape(argument.name))\" type=\"\(escape(argument.type.signature))\"/>\n"
            }
            xml += "    </signal>\n"
        }
        for property in interface.properties {
            let type = escape(property.type.signature)
            if property.changeSignal == .emits {
                xml += "    <property name=\"\(property.name)\" type=\"\(type)\" access=\"\(property.access)\"/>\n"
            } else {
                xml += "    <property name=\"\(property.name)\" type=\"\(type)\" access=\"\(property.access)\">\n"
                xml += "      <annotation name=\"org.freedesktop.DBus.Property.EmitsChangedSignal\" value=\"\(property.changeSignal.rawValue)\"/>\n"
                xml += "    </property>\n"
            }
        }
        xml += "  </interface>\n"
        return xml
    }

    static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(character)
            }
        }
        return out
    }
}
