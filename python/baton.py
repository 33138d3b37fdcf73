"""Baton from Python: advertise, find and continue user activities, and keep scene storage.

Nothing but PyGObject's Gio (Debian: python3-gi) and the contract, org.baton.Handoff1
(dbus/org.baton.Handoff1.xml). The client's calls wait for their answer; the handler side
answers batond from a GLib main loop, the one a GTK app already runs.

    import baton

    client = baton.Client()                                    # the session bus
    client.register_type("com.example.notes.document", "com.example.notes", required_keys=["id"])
    id = client.advertise("com.example.notes.document", "Chapter 3", {"id": "c3"},
                          keywords=["draft"], searchable=True)
    [found] = client.search("draft")
    scene = client.continue_activity(id)                        # a Scene
    scene.set("ContentView.CurrentTab", "b3")                  # bool, int, float, str or bytes
    scene.get("ContentView.CurrentTab")                         # 'b3'

    # The app's side: batond calls this to continue an activity of the type in a new scene.
    handler = baton.Handler(client, "com.example.notes", bus_name="com.example.notes")
    handler.on_continue("com.example.notes.document",
                        lambda activity, scene: {"OpenDocument": activity["payload"]["id"]})
    handler.start()                                             # then run a GLib main loop

Errors are BatonError, whose `name` is the contract's short name (NotFound,
InvalidPayload, StorageUnavailable, …) and whose message says what to do.
"""

import json
import uuid

from gi.repository import Gio, GLib

BUS_NAME = "org.baton.Handoff1"
ROOT = "/org/baton/Handoff1"
PREFIX = "org.baton.Handoff1."

# The errors a write may be sent again for, with the same request_id: the reply was lost,
# or batond could not get the disk in time. batond returns the first result to a repeat.
_RETRIED = {"org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout", PREFIX + "Error.StorageUnavailable"}

_HANDLER_XML = """
<node>
  <interface name="org.baton.Handoff1.Handler">
    <method name="ContinueActivity">
      <arg name="scene" type="o" direction="in"/>
      <arg name="activity" type="a{sv}" direction="in"/>
      <arg name="storage" type="a{sv}" direction="out"/>
    </method>
    <method name="ActivityContinued">
      <arg name="id" type="s" direction="in"/>
      <arg name="scene" type="o" direction="in"/>
      <arg name="device" type="s" direction="in"/>
    </method>
  </interface>
</node>
"""


class BatonError(Exception):
    """A named error from batond (or the bus): `name` is NotFound, InvalidPayload, …"""

    def __init__(self, dbus_name, message):
        super().__init__(message)
        self.dbus_name = dbus_name
        self.name = dbus_name.rsplit(".", 1)[-1]
        self.message = message

    def __str__(self):
        return "%s: %s" % (self.name, self.message)


def _error(error):
    """A GLib.Error from a call as a BatonError."""
    remote = Gio.DBusError.get_remote_error(error)
    if remote is None:
        return BatonError("org.freedesktop.DBus.Error.Failed", error.message)
    Gio.DBusError.strip_remote_error(error)
    return BatonError(remote, error.message)


def variant(value):
    """A storage value as the contract stores it: b, x, d, s or ay."""
    if isinstance(value, bool):
        return GLib.Variant("b", value)
    if isinstance(value, int):
        return GLib.Variant("x", value)
    if isinstance(value, float):
        return GLib.Variant("d", value)
    if isinstance(value, str):
        return GLib.Variant("s", value)
    if isinstance(value, (bytes, bytearray)):
        return GLib.Variant("ay", bytes(value))
    raise TypeError("scene storage holds bool, int, float, str or bytes, not %s" % type(value).__name__)


def _storage(values):
    """Storage values as the contract's a{sv}."""
    return {key: variant(value) for key, value in values.items()}


def _plain(value):
    """A GLib.Variant as Python values: variants opened, byte arrays as bytes (unpack()
    would give lists of ints), dictionaries as dicts."""
    kind = value.get_type_string()
    if kind == "v":
        return _plain(value.get_variant())
    if kind == "ay":
        return bytes(value.get_data_as_bytes().get_data())
    children = [value.get_child_value(i) for i in range(value.n_children())] if value.is_container() else []
    if kind.startswith("a{"):
        return {_plain(entry.get_child_value(0)): _plain(entry.get_child_value(1)) for entry in children}
    if kind.startswith("a"):
        return [_plain(child) for child in children]
    if kind.startswith("("):
        return tuple(_plain(child) for child in children)
    return value.unpack()


def _activity(record):
    """An activity record with its payload as a dict."""
    record = dict(record)
    if isinstance(record.get("payload"), str):
        record["payload"] = json.loads(record["payload"])
    return record


def _options(**fields):
    """Call options as the contract takes them: strings, booleans as true/false, lists comma-joined."""
    options = {}
    for key, value in fields.items():
        if value is None:
            continue
        if isinstance(value, bool):
            options[key] = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            options[key] = ",".join(value)
        else:
            options[key] = str(value)
    return options


def _keywords(keywords):
    """Keywords as a list, or as the contract's comma-separated text."""
    return keywords if keywords is None or isinstance(keywords, str) else list(keywords)


class Client:
    """A connection to batond on the session bus (or on `address`)."""

    def __init__(self, address=None, timeout=30):
        if address:
            flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
            self.connection = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)
        else:
            self.connection = Gio.bus_get_sync(Gio.BusType.SESSION, None)
        self.timeout_ms = int(timeout * 1000)

    def call(self, interface, method, signature=None, arguments=None, reply=None, path=ROOT):
        """One method call: the reply's values as a tuple. Raises BatonError."""
        parameters = GLib.Variant("(%s)" % signature, arguments) if signature else None
        reply_type = GLib.VariantType.new("(%s)" % reply) if reply is not None else None
        try:
            result = self.connection.call_sync(BUS_NAME, path, PREFIX + interface, method, parameters, reply_type,
                                               Gio.DBusCallFlags.NONE, self.timeout_ms, None)
        except GLib.Error as error:
            raise _error(error) from None
        return tuple(_plain(result.get_child_value(i)) for i in range(result.n_children()))

    def _write(self, interface, method, signature, arguments, reply, options):
        """A write batond makes idempotent: sent with a request_id, and once more with the
        same one when the answer was lost or the disk was busy."""
        options.setdefault("request_id", str(uuid.uuid4()))
        for attempt in (1, 2):
            try:
                return self.call(interface, method, signature, arguments(options), reply)
            except BatonError as error:
                if attempt == 2 or error.dbus_name not in _RETRIED:
                    raise

    # Activity types

    def register_type(self, type, app_id, title="", required_keys=(), handler=None, handler_path=None, payload_type=None):
        options = _options(title=title, required_keys=list(required_keys) or None, handler=handler,
                           handler_path=handler_path, payload_type=payload_type)
        self.call("Registry", "RegisterActivityType", "ssa{ss}", (type, app_id, options), "")

    def unregister_type(self, type):
        self.call("Registry", "UnregisterActivityType", "s", (type,), "")

    def types(self):
        (records,) = self.call("Registry", "ListActivityTypes", reply="aa{sv}")
        return records

    # Activities

    def advertise(self, type, title, payload=None, *, keywords=(), searchable=None, handoff=None, history=None,
                  expires_in=None, scene=None, request_id=None, **fields):
        """Stores an activity; returns its id. `payload`: a dict (JSON object). Any other field
        an app sets goes by its record name (target_content_id="c3", webpage_url=..., and
        fields newer than this client): batond names the unknown ones in its error."""
        options = _options(keywords=_keywords(keywords) or None, eligible_for_search=searchable, eligible_for_handoff=handoff,
                           eligible_for_history=history, expires_in=expires_in, scene=_path(scene), request_id=request_id)
        options.update(_options(**fields))
        text = json.dumps(payload if payload is not None else {})
        (id,) = self._write("Activities", "Advertise", "sssa{ss}", lambda o: (type, title, text, o), "s", options)
        return id

    def update(self, id, payload=None, *, title=None, replace=False, keywords=None, searchable=None, scene=None, request_id=None,
               **fields):
        """Merges `payload`'s keys into the stored one (or replaces it with replace=True); other
        fields by their record names, as advertise takes them."""
        options = _options(title=title, keywords=_keywords(keywords), eligible_for_search=searchable, scene=_path(scene),
                           replace_payload=True if replace else None, request_id=request_id)
        options.update(_options(**fields))
        text = json.dumps(payload) if payload is not None else ""
        self._write("Activities", "Update", "ssa{ss}", lambda o: (id, text, o), "", options)

    def invalidate(self, id):
        self.call("Activities", "Invalidate", "s", (id,), "")

    def get(self, id):
        (record,) = self.call("Activities", "Get", "s", (id,), "a{sv}")
        return _activity(record)

    def list(self, **filters):
        """Live activities, newest first; filters: type, app_id, scene, persistent_id,
        target_content_id, id_prefix, device, limit."""
        (records,) = self.call("Activities", "List", "a{ss}", (_options(**filters),), "aa{sv}")
        return [_activity(record) for record in records]

    def search(self, query, limit=0):
        (records,) = self.call("Activities", "Search", "su", (query, limit), "aa{sv}")
        return [_activity(record) for record in records]

    def explain(self, id):
        (explanation,) = self.call("Activities", "Explain", "s", (id,), "a{sv}")
        return explanation

    def continue_activity(self, id, *, scene=None, new_scene=False, wait=True, request_id=None, device=None):
        """Continues an activity in a scene of its app (its handler fills it); returns the Scene.
        With `device` (a machine's sync id), it is continued on that machine instead: returns None."""
        options = _options(scene=_path(scene), new_scene=True if new_scene else None, wait=None if wait else False,
                           request_id=request_id, device=device)
        (path,) = self._write("Activities", "Continue", "sa{ss}", lambda o: (id, o), "o", options)
        return None if device else Scene(self, path)

    def history(self, **filters):
        """Activities that ended, the most recent first; filters: app_id, type, query, id_prefix, since, limit."""
        (records,) = self.call("Archive", "History", "a{ss}", (_options(**filters),), "aa{sv}")
        return [_activity(record) for record in records]

    # Scenes

    def open_scene(self, app_id, title=None, request_id=None):
        (path,) = self._write("Scenes", "OpenScene", "sa{ss}", lambda o: (app_id, o), "o", _options(title=title, request_id=request_id))
        return Scene(self, path)

    def scene(self, path_or_id):
        return Scene(self, _path(path_or_id))

    def scenes(self, app_id=""):
        (paths,) = self.call("Scenes", "ListScenes", "s", (app_id,), "ao")
        return [Scene(self, path) for path in paths]

    def restore_scenes(self, app_id):
        """At an app's launch: its scenes and why each comes back (launch, restore, recover)."""
        (pairs,) = self.call("Scenes", "RestoreScenes", "s", (app_id,), "a(os)")
        return [(Scene(self, path), reason) for path, reason in pairs]

    def detach(self, app_id):
        """At an app's clean exit: its scenes come back as restore."""
        self.call("Scenes", "Detach", "s", (app_id,), "")


def _path(scene):
    """A scene's object path from a Scene, a path or an id."""
    if scene is None or isinstance(scene, Scene):
        return scene.path if scene else None
    if scene.startswith("/"):
        return scene
    return ROOT + "/scene/" + scene.lower().replace("-", "_")


class Scene:
    """One window session and its storage (SwiftUI's @SceneStorage), on the bus at `path`."""

    def __init__(self, client, path):
        self.client = client
        self.path = path

    @property
    def id(self):
        return self.path.rsplit("/", 1)[-1].replace("_", "-")

    def __repr__(self):
        return "Scene(%r)" % self.path

    def __eq__(self, other):
        return isinstance(other, Scene) and other.path == self.path

    def __hash__(self):
        return hash(self.path)

    def _call(self, method, signature=None, arguments=None, reply=""):
        return self.client.call("Scene", method, signature, arguments, reply, path=self.path)

    def get(self, key, default=None):
        try:
            (value,) = self._call("Get", "s", (key,), "v")
        except BatonError as error:
            if error.name == "NotFound":
                return default
            raise
        return value

    def set(self, key, value):
        self._call("Set", "sv", (key, variant(value)))

    def set_many(self, values):
        self.client.call("Scene", "SetMany", "a{sv}", (_storage(values),), "", path=self.path)

    def remove(self, key):
        self._call("Remove", "s", (key,))

    def all(self):
        (values,) = self._call("GetAll", reply="a{sv}")
        return values

    def close(self):
        self._call("Close")

    def acknowledge(self):
        self._call("Acknowledge")

    def property(self, name):
        """One of the scene's properties: Id, AppId, Title, ActivityId, State, Restored, RestoreReason, …"""
        try:
            result = self.client.connection.call_sync(
                BUS_NAME, self.path, "org.freedesktop.DBus.Properties", "Get", GLib.Variant("(ss)", (PREFIX + "Scene", name)),
                GLib.VariantType.new("(v)"), Gio.DBusCallFlags.NONE, self.client.timeout_ms, None)
        except GLib.Error as error:
            raise _error(error) from None
        return _plain(result.get_child_value(0))


class Handler:
    """An app's side of continuation: batond calls it to continue activities of its types.

    `on_continue(type, function)` declares a type; `function(activity, scene)` gets the
    activity (a dict, payload decoded) and the new Scene, and returns the storage to put in
    the scene (a dict), or raises to refuse the continuation. `start()` exports the handler,
    takes `bus_name` and registers the types with batond; calls arrive on the main context
    that was the thread's default when it was called, so run a GLib main loop there.
    """

    def __init__(self, client, app_id, bus_name, path="/"):
        self.client = client
        self.app_id = app_id
        self.bus_name = bus_name
        self.path = path
        self.functions = {}
        self.registrations = []
        self.on_continued = None  # optional: function(id, scene_path, device) after one of ours was continued
        self.registration_id = None
        self.name_id = None

    def on_continue(self, type, function, *, title="", required_keys=(), payload_type=None):
        self.functions[type] = function
        self.registrations.append(dict(type=type, title=title, required_keys=required_keys, payload_type=payload_type))

    def start(self):
        interface = Gio.DBusNodeInfo.new_for_xml(_HANDLER_XML).interfaces[0]
        self.registration_id = self.client.connection.register_object(self.path, interface, self._method_call, None, None)
        (reply,) = self.client.connection.call_sync(
            "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "RequestName",
            GLib.Variant("(su)", (self.bus_name, 4)), GLib.VariantType.new("(u)"), Gio.DBusCallFlags.NONE, -1, None).unpack()
        if reply not in (1, 4):  # primary owner, or already the owner
            raise BatonError("org.freedesktop.DBus.Error.Failed", "%s is owned by another program" % self.bus_name)
        for registration in self.registrations:
            self.client.register_type(registration["type"], self.app_id, title=registration["title"],
                                      required_keys=registration["required_keys"], handler=self.bus_name,
                                      handler_path=self.path, payload_type=registration["payload_type"])

    def stop(self):
        if self.registration_id is not None:
            self.client.connection.unregister_object(self.registration_id)
            self.registration_id = None

    def _method_call(self, connection, sender, path, interface, method, parameters, invocation):
        try:
            if method == "ActivityContinued":
                id, scene, device = _plain(parameters)
                if self.on_continued:
                    self.on_continued(id, scene, device)
                invocation.return_value(None)
                return
            scene_path = parameters.get_child_value(0).get_string()
            activity = _activity(_plain(parameters.get_child_value(1)))
            function = self.functions.get(activity.get("type"))
            if function is None:
                invocation.return_dbus_error(PREFIX + "Error.HandlerFailed", "%s does not continue %s" % (self.app_id, activity.get("type")))
                return
            storage = function(activity, Scene(self.client, scene_path)) or {}
            invocation.return_value(GLib.Variant("(a{sv})", (_storage(storage),)))
        except Exception as error:  # the app refused: batond gets the reason, the caller HandlerFailed
            invocation.return_dbus_error(PREFIX + "Error.HandlerFailed", str(error) or type(error).__name__)
