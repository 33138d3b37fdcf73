#!/usr/bin/python3
"""A sandboxed app's calls to batond, run inside bubblewrap by SandboxTests.

Usage: sandboxed-client.py checks OWN_APP GIVEN_JSON
       sandboxed-client.py listen OWN_APP READY_FILE
       sandboxed-client.py advertise OWN_APP TITLE
       sandboxed-client.py handle OWN_APP LOG_FILE
       sandboxed-client.py look OWN_APP ACTIVITY_ID

OWN_APP is the app id the sandbox's /.flatpak-info names. Either way the app reaches the bus
through xdg-dbus-proxy, started here as Flatpak starts it for an app whose manifest has
--talk-name=org.baton.Handoff1 (in the sandbox, so batond finds the proxy's /.flatpak-info).

checks: GIVEN_JSON holds what another app has in batond (its app id, type, an activity id, a
persistent id, a scene path) and this app's own (own_activity, own_scene). Prints one JSON
object: each check's name with "ok" (the call succeeded) or the D-Bus error name it got, and
what the calls that succeed returned where the test needs it. Never stops at a failed call.

listen: adds a match rule for every signal of batond, creates READY_FILE, and prints as JSON
every signal it hears (member, path, arguments) until batond announces an activity of its own
app titled "end of test", or 20 seconds pass ("timed_out": true).

advertise: registers OWN_APP.handled with OWN_APP as its handler and advertises one activity
of it titled TITLE, eligible for search; prints {"id": ...}.

handle: the app as the bus starts it to continue an activity: owns OWN_APP, answers
Handler.ContinueActivity with storage {"continued_in": "sandbox of OWN_APP"}, appends the
activity's id to LOG_FILE, and ends a second after its last call (at most 20 seconds).

look: registers OWN_APP.handled as advertise does (as the app does wherever it runs), then
prints what the app can learn of and do with ACTIVITY_ID: {"listed": the ids List gives,
"searched": the ids Search("Chapter") gives, "get"/"continue": "ok" or the error name,
"explained": the state Explain gives}.
"""
import json
import os
import subprocess
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

NAME = "org.baton.Handoff1"
mode, own = sys.argv[1], sys.argv[2]


def connect_through_proxy():
    ready, told = os.pipe()
    # Started by the bus (handle), the app is told the bus's address as DBUS_STARTER_ADDRESS.
    address = os.environ.get("DBUS_STARTER_ADDRESS") or os.environ["DBUS_SESSION_BUS_ADDRESS"]
    subprocess.Popen(["xdg-dbus-proxy", address, "/tmp/bus", "--filter",
                      "--talk=" + NAME, "--own=" + own, "--fd=%d" % told], pass_fds=[told])
    os.close(told)
    # It writes one byte once it listens, and stops when this process (holding `ready`) ends.
    if os.read(ready, 1) != b"x":
        sys.exit("xdg-dbus-proxy did not start")
    return dbus.bus.BusConnection("unix:path=/tmp/bus")


def listen():
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = connect_through_proxy()
    batond = bus.get_name_owner(NAME)
    heard, loop = [], GLib.MainLoop()

    def on_message(connection, message):
        if message.get_type() == 4 and message.get_sender() == batond:  # a signal of batond's, broadcast or to us
            arguments = [str(argument) for argument in message.get_args_list()]
            heard.append({"member": message.get_member(), "path": message.get_path() or "", "arguments": arguments})
            if message.get_member() == "Advertised" and "end of test" in arguments:
                loop.quit()
    bus.add_message_filter(on_message)
    bus.add_match_string("type='signal',sender='%s'" % NAME)
    with open(sys.argv[3], "w"):
        pass
    timed_out = []
    GLib.timeout_add_seconds(20, lambda: timed_out.append(True) or loop.quit())
    loop.run()
    print(json.dumps({"heard": heard, "timed_out": bool(timed_out)}))


def handle():
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = connect_through_proxy()

    class Handler(dbus.service.Object):
        @dbus.service.method(NAME + ".Handler", in_signature="oa{sv}", out_signature="a{sv}")
        def ContinueActivity(self, scene, activity):
            with open(sys.argv[3], "a") as log:
                log.write(str(activity["id"]) + "\n")
            GLib.timeout_add_seconds(1, loop.quit)
            return dbus.Dictionary({"continued_in": dbus.String("sandbox of " + own, variant_level=1)}, signature="sv")

    loop = GLib.MainLoop()
    keep = (Handler(bus, "/"), dbus.service.BusName(own, bus))
    GLib.timeout_add_seconds(20, loop.quit)
    loop.run()
    return keep


def register(root):
    dbus.Interface(root, NAME + ".Registry").RegisterActivityType(own + ".handled", own, {"title": "Handled", "handler": own})


def advertise():
    bus = connect_through_proxy()
    root = bus.get_object(NAME, "/org/baton/Handoff1")
    register(root)
    id = dbus.Interface(root, NAME + ".Activities").Advertise(own + ".handled", sys.argv[3], '{"id":"h"}', {"eligible_for_search": "true"})
    print(json.dumps({"id": str(id)}))


def look():
    bus = connect_through_proxy()
    root = bus.get_object(NAME, "/org/baton/Handoff1")
    register(root)
    activities = dbus.Interface(root, NAME + ".Activities")
    id = sys.argv[3]

    def outcome(call):
        try:
            call()
            return "ok"
        except dbus.exceptions.DBusException as error:
            return error.get_dbus_name()
    print(json.dumps({
        "listed": sorted(str(a["id"]) for a in activities.List({})),
        "searched": sorted(str(a["id"]) for a in activities.Search("Chapter", 50)),
        "get": outcome(lambda: activities.Get(id)),
        "continue": outcome(lambda: activities.Continue(id, {"wait": "false"})),
        "explained": str(activities.Explain(id).get("state", "")),
    }))


if mode != "checks":
    {"listen": listen, "handle": handle, "advertise": advertise, "look": look}[mode]()
    sys.exit(0)

given = json.loads(sys.argv[3])
other_app, other_type = given["app"], given["type"]
bus = connect_through_proxy()
root = bus.get_object(NAME, "/org/baton/Handoff1")


def interface(name):
    return dbus.Interface(root, "org.baton.Handoff1." + name)


registry, activities, scenes, archive = (interface(n) for n in ("Registry", "Activities", "Scenes", "Archive"))
privacy, sync = interface("Privacy"), interface("Sync")
results = {"messages": {}}


def check(name, call):
    try:
        value = call()
        results[name] = "ok"
        return value
    except dbus.exceptions.DBusException as error:
        results[name] = error.get_dbus_name()
        results["messages"][name] = error.get_dbus_message()
        return None


# What it may do: its own type, activity, search, list, scene.
check("register own type", lambda: registry.RegisterActivityType(own + ".note", own, {"title": "Note"}))
mine = check("advertise own", lambda: activities.Advertise(own + ".note", "Mine", '{"id":"m"}', {"eligible_for_search": "true"}))
results["own_id"] = str(mine or "")
check("get own", lambda: activities.Get(given["own_activity"]))
results["listed"] = sorted(str(a["id"]) for a in (check("list", lambda: activities.List({})) or []))
results["searched"] = sorted(str(a["id"]) for a in (check("search", lambda: activities.Search("shared", 50)) or []))
results["types"] = sorted(str(t["type"]) for t in (check("list types", lambda: registry.ListActivityTypes()) or []))
results["scenes of all"] = sorted(str(p) for p in (check("list scenes", lambda: scenes.ListScenes("")) or []))
check("open own scene", lambda: scenes.OpenScene(own, {}))
check("own scene storage", lambda: dbus.Interface(bus.get_object("org.baton.Handoff1", given["own_scene"]),
                                                   "org.baton.Handoff1.Scene").GetAll())

# What it may not: everything of the other app, and the whole store.
check("register for another app", lambda: registry.RegisterActivityType(own + ".stolen", other_app, {}))
check("register outside its namespace", lambda: registry.RegisterActivityType("com.example.elsewhere.note", own, {}))
check("take another app's type", lambda: registry.RegisterActivityType(other_type, own, {"replace": "true"}))
check("take a type of its namespace that is another app's",
      lambda: registry.RegisterActivityType(given["borrowed_type"], own, {"replace": "true"}))
check("name another app as handler", lambda: registry.RegisterActivityType(own + ".relay", own, {"handler": other_app}))
check("unregister another app's type", lambda: registry.UnregisterActivityType(other_type))
check("advertise under another app's type", lambda: activities.Advertise(other_type, "Forged", '{"id":"f"}', {}))
check("get another app's", lambda: activities.Get(given["activity"]))
check("update another app's", lambda: activities.Update(given["activity"], '{"id":"x"}', {}))
check("continue another app's", lambda: activities.Continue(given["activity"], {"wait": "false"}))
check("invalidate another app's", lambda: activities.Invalidate(given["activity"]))
results["explained"] = str((check("explain another app's", lambda: activities.Explain(given["activity"])) or {}).get("state", ""))
check("delete another app's saved", lambda: activities.DeleteSaved([given["persistent_id"]]))
check("delete all of another app", lambda: activities.DeleteAllSaved(other_app))
results["listed other"] = len(check("list another app", lambda: activities.List({"app_id": other_app})) or [])
results["history other"] = len(check("history of another app", lambda: archive.History({"app_id": other_app})) or [])
other_scene = dbus.Interface(bus.get_object("org.baton.Handoff1", given["scene"]), "org.baton.Handoff1.Scene")
check("read another app's scene", lambda: other_scene.GetAll())
check("write another app's scene", lambda: other_scene.Set("key", dbus.String("forged", variant_level=1)))
check("scene properties of another app", lambda: dbus.Interface(bus.get_object("org.baton.Handoff1", given["scene"]),
                                                                 "org.freedesktop.DBus.Properties").GetAll("org.baton.Handoff1.Scene"))
check("close another app's scene", lambda: scenes.CloseScene(dbus.ObjectPath(given["scene"])))
check("open a scene for another app", lambda: scenes.OpenScene(other_app, {}))
check("restore another app's scenes", lambda: scenes.RestoreScenes(other_app))
results["managed"] = sorted(str(p) for p in (check("managed objects", lambda: dbus.Interface(
    root, "org.freedesktop.DBus.ObjectManager").GetManagedObjects()) or {}).keys())
check("export", lambda: archive.Export({}))
check("pause", lambda: privacy.Pause(dbus.UInt64(0)))
check("forget another app", lambda: privacy.ForgetApp(other_app))
check("sync devices", lambda: sync.Devices())
properties = dbus.Interface(root, "org.freedesktop.DBus.Properties")
check("privacy properties", lambda: properties.GetAll("org.baton.Handoff1.Privacy"))
check("sync properties", lambda: properties.Get("org.baton.Handoff1.Sync", "DeviceName"))
check("status properties", lambda: properties.GetAll("org.baton.Handoff1.Status"))
check("the desktop's search", lambda: dbus.Interface(bus.get_object(NAME, "/org/baton/Handoff1/SearchProvider"),
                                                     "org.gnome.Shell.SearchProvider2").GetInitialResultSet(["shared"]))
check("KRunner", lambda: dbus.Interface(bus.get_object(NAME, "/org/baton/Handoff1/KRunner"), "org.kde.krunner1").Match("shared"))

print(json.dumps(results))
