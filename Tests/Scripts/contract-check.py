#!/usr/bin/python3
"""The org.baton.Handoff1 contract, exercised by python3-dbus (a client we did not write)
against whatever batond answers on $DBUS_SESSION_BUS_ADDRESS, with a handler app of its
own (this script again, with --handler).

Run by ContractCheckTests on a private bus and by systemd-user-test.sh against the
unit's sandboxed instance. Prints one line per check, "ok NAME" or "FAIL NAME: why",
and exits 1 if any check failed. Usage: contract-check.py DBUS_XML
"""
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ElementTree

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

NAME, ROOT = "org.baton.Handoff1", "/org/baton/Handoff1"
REGISTRY, ACTIVITIES, SCENES, SCENE = (NAME + "." + i for i in ("Registry", "Activities", "Scenes", "Scene"))
APP, TYPE, HANDLER_NAME = "org.example.contractcheck", "org.example.contractcheck.note", "org.example.ContractCheck"
failures = []


def check(name, condition, detail=""):
    print(("ok " if condition else "FAIL ") + name + ("" if condition else ": " + str(detail)), flush=True)
    if not condition:
        failures.append(name)


def error_name(call):
    try:
        call()
    except dbus.exceptions.DBusException as error:
        return error.get_dbus_name()
    return None


class Handler(dbus.service.Object):
    """The app's side of Continue: answers with storage that names the activity."""

    @dbus.service.method(NAME + ".Handler", in_signature="oa{sv}", out_signature="a{sv}")
    def ContinueActivity(self, scene, activity):
        return dbus.Dictionary({"note": dbus.String(activity["payload"]), "tab": dbus.Int64(3)}, signature="sv")


def serve_handler():
    """The app: serves the handler in a GLib loop, in a process of its own (libdbus and
    dbus-python are not made for a blocking client and a main loop on two threads)."""
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SessionBus()

    # It also listens, and prints every signal of batond it hears, for the checker to read.
    def heard(*args, **keywords):
        member, path = keywords["member"], keywords["path"]
        if member == "PropertiesChanged":
            args = [sorted(str(key) for key in args[1].keys())]
        print("signal %s %s %s" % (member, path, " ".join(str(arg) for arg in args)), flush=True)
    bus.add_signal_receiver(heard, bus_name=NAME, member_keyword="member", path_keyword="path")
    keep = (dbus.service.BusName(HANDLER_NAME, bus), Handler(bus, "/"))
    loop = GLib.MainLoop()
    GLib.timeout_add_seconds(60, loop.quit)
    loop.run()
    return keep


def main():
    app = subprocess.Popen([sys.executable, __file__, "--handler"], stdout=subprocess.PIPE, text=True)
    signals = []
    threading.Thread(target=lambda: signals.extend(iter(app.stdout.readline, "")), daemon=True).start()
    try:
        activity_id = run_checks()
        check_signals(signals, activity_id)
    finally:
        app.terminate()
        app.wait()
    print("checks failed: %d" % len(failures))
    sys.exit(1 if failures else 0)


def check_signals(signals, activity_id):
    """What the app heard, as a python3-dbus listener: every announcement of the run."""
    deadline = time.time() + 10
    while not any(line.startswith("signal Invalidated") and activity_id in line for line in signals) and time.time() < deadline:
        time.sleep(0.01)
    def heard(member, *parts):
        return any(line.startswith("signal " + member) and all(part in line for part in parts) for line in signals)
    check("a listener heard Advertised", heard("Advertised", activity_id, "Chapter 3"))
    check("a listener heard Updated", heard("Updated", activity_id))
    check("a listener heard Continued with created true, then false", heard("Continued", activity_id, " 1")
          and heard("Continued", activity_id, " 0"), [line for line in signals if "Continued" in line])
    check("a listener heard a scene's ActivityId and State change", heard("PropertiesChanged", "ActivityId", "State"))
    check("a listener heard StorageChanged", heard("StorageChanged"))
    check("a listener heard Invalidated", heard("Invalidated", activity_id))


def run_checks():
    bus = dbus.bus.BusConnection(dbus.bus.BusConnection.TYPE_SESSION)
    driver = dbus.Interface(bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus"), "org.freedesktop.DBus")
    for _ in range(1000):
        if driver.NameHasOwner(HANDLER_NAME):
            break
        time.sleep(0.01)
    root = bus.get_object(NAME, ROOT)
    registry, activities, scenes = (dbus.Interface(root, i) for i in (REGISTRY, ACTIVITIES, SCENES))

    # The running daemon declares what the contract's XML declares.
    def members(xml):
        tree = ElementTree.fromstring(xml)
        return {(i.get("name"), m.tag, m.get("name"), tuple(a.get("type") for a in m.findall("arg") if a.get("direction") != "out"))
                for i in tree.iter("interface") if i.get("name").startswith(NAME) for m in i}
    declared = members(open(sys.argv[1]).read())
    running = members(dbus.Interface(root, "org.freedesktop.DBus.Introspectable").Introspect())
    root_interfaces = {REGISTRY, ACTIVITIES, SCENES, NAME + ".Status"}
    expected = {m for m in declared if m[0] in root_interfaces}
    check("introspection matches the XML", expected <= running and len(expected) > 10, expected - running)

    registry.RegisterActivityType(TYPE, APP, {"title": "Note", "handler": HANDLER_NAME, "required_keys": "id"})
    types = [t for t in registry.ListActivityTypes() if t["type"] == TYPE]
    check("a type registers", len(types) == 1 and types[0]["app_id"] == APP and list(types[0]["required_keys"]) == ["id"], types)

    activity_id = activities.Advertise(TYPE, "Chapter 3", '{"id": "c3", "words": 1200}',
                                       {"keywords": "draft,novel", "eligible_for_search": "true", "target_content_id": "c3"})
    record = activities.Get(activity_id)
    check("an activity is advertised and read back", record["title"] == "Chapter 3" and record["app_id"] == APP
          and sorted(record["keywords"]) == ["draft", "novel"] and record["target_content_id"] == "c3", dict(record))
    activities.Update(activity_id, '{"words": 1300}', {})
    check("an update merges the payload", '"words":1300' in activities.Get(activity_id)["payload"].replace(" ", ""),
          activities.Get(activity_id)["payload"])
    check("search finds it", [r["id"] for r in activities.Search("novel", 10)] == [activity_id])
    check("list filters by app", [r["id"] for r in activities.List({"app_id": APP})] == [activity_id])

    scene_path = activities.Continue(activity_id, {})
    scene = dbus.Interface(bus.get_object(NAME, scene_path), SCENE)
    storage = scene.GetAll()
    check("continue asks the app's handler and stores its answer", storage.get("tab") == 3 and '"c3"' in storage.get("note", ""),
          dict(storage))
    properties = dbus.Interface(bus.get_object(NAME, scene_path), "org.freedesktop.DBus.Properties")
    check("the continued scene shows the activity", properties.Get(SCENE, "ActivityId") == activity_id)
    managed = dbus.Interface(root, "org.freedesktop.DBus.ObjectManager").GetManagedObjects()
    check("the object manager lists the scene", scene_path in managed and SCENE in managed[scene_path])

    check("the scene is ready and says why it came", properties.Get(SCENE, "State") == "ready"
          and properties.Get(SCENE, "RestoreReason") == "launch")
    # Continuing the same content again goes to the scene that shows it; new_scene opens another.
    check("the same content goes to the same scene", activities.Continue(activity_id, {}) == scene_path)
    other = activities.Continue(activity_id, {"new_scene": "true"})
    check("new_scene opens another scene", other != scene_path)
    scenes.CloseScene(other)
    explanation = activities.Explain(activity_id)
    check("Explain says it is live and continuable, and how it was continued last",
          explanation["state"] == "live" and bool(explanation["continuable"])
          and explanation["last_continuation"]["state"] == "ready", dict(explanation))

    scene.Set("draft", dbus.String("007"))
    scene.SetMany(dbus.Dictionary({"flag": dbus.Boolean(True), "bytes": dbus.ByteArray(b"\x00\xff")}, signature="sv"))
    check("scene values keep their types", scene.Get("draft") == "007" and scene.Get("flag") is not None
          and bytes(scene.Get("bytes")) == b"\x00\xff", dict(scene.GetAll()))
    scene.Remove("draft")
    check("a removed value is gone", error_name(lambda: scene.Get("draft")) == NAME + ".Error.NotFound")

    check("a payload without a required key is refused by name",
          error_name(lambda: activities.Advertise(TYPE, "x", '{"words": 1}', {})) == NAME + ".Error.InvalidPayload")
    check("bad JSON is refused by name",
          error_name(lambda: activities.Advertise(TYPE, "x", '{"id": 1,}', {})) == NAME + ".Error.InvalidPayload")
    check("an unknown id is NotFound",
          error_name(lambda: activities.Get("3c9ad3b5-2f1f-4b0e-9a51-3f1d2a6b8c01")) == NAME + ".Error.NotFound")
    # The message names the biggest keys; a second argument, a(st), gives them as data (read
    # from the reply message itself: dbus-python's exceptions keep the first argument only).
    call = dbus.lowlevel.MethodCallMessage(NAME, ROOT, ACTIVITIES, "Advertise")
    call.append(TYPE, "x", '{"id": "big", "blob": "%s", "notes": "%s"}' % ("x" * 70000, "n" * 2000), dbus.Dictionary({}, signature="ss"),
                signature="sssa{ss}")
    replies = []
    bus.send_message_with_reply(call, replies.append, require_main_loop=False).block()
    reply = replies[0] if replies else None
    args = reply.get_args_list() if reply is not None else []
    check("an oversize payload is QuotaExceeded naming its biggest keys, also as data",
          isinstance(reply, dbus.lowlevel.ErrorMessage) and reply.get_error_name() == NAME + ".Error.QuotaExceeded"
          and "biggest keys: blob 68.4 KiB, notes 2 KiB, id 10 bytes" in args[0]
          and [(str(key), int(size)) for key, size in args[1]] == [("blob", 70009), ("notes", 2010), ("id", 10)], args)
    check("an unknown type is refused by name",
          error_name(lambda: activities.Advertise("org.example.none", "x", "{}", {})) == NAME + ".Error.UnknownActivityType")

    scenes.CloseScene(scene_path)
    check("a closed scene is gone", scene_path not in scenes.ListScenes(APP))
    activities.Invalidate(activity_id)
    check("an invalidated activity is gone", error_name(lambda: activities.Get(activity_id)) == NAME + ".Error.NotFound")
    check("Explain remembers how it ended", activities.Explain(activity_id)["state"] == "invalidated")
    registry.UnregisterActivityType(TYPE)
    check("the type is unregistered", not [t for t in registry.ListActivityTypes() if t["type"] == TYPE])
    return activity_id


if sys.argv[1:] == ["--handler"]:
    serve_handler()
else:
    main()
