#!/usr/bin/python3
"""Times a service from exec to owning its bus name, then stops it with SIGTERM.

Usage: startup.py RUNS BUS_NAME -- COMMAND...
Prints one JSON object: {"ms": [...], "rss_kib": [...]} where rss_kib is the
process's resident memory right after it took the name. Needs python3-dbus and
python3-gi (the GLib main loop delivers NameOwnerChanged as it happens).
"""
import json
import subprocess
import sys
import time

import dbus
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

runs, name = int(sys.argv[1]), sys.argv[2]
command = sys.argv[sys.argv.index("--") + 1:]
DBusGMainLoop(set_as_default=True)
bus = dbus.SessionBus()
loop = GLib.MainLoop()
owned = {}


def on_owner_changed(changed, old, new):
    if changed == name and new:
        owned["at"] = time.perf_counter()
        loop.quit()


bus.add_signal_receiver(on_owner_changed, signal_name="NameOwnerChanged", dbus_interface="org.freedesktop.DBus",
                        bus_name="org.freedesktop.DBus", arg0=name)
timings, memory = [], []
for _ in range(runs):
    owned.clear()
    start = time.perf_counter()
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    GLib.timeout_add_seconds(20, loop.quit)
    loop.run()
    if "at" not in owned:
        process.kill()
        sys.exit(f"{command[0]} did not take {name} within 20 s")
    timings.append((owned["at"] - start) * 1000)
    with open(f"/proc/{process.pid}/status") as status:
        memory.append(next(int(line.split()[1]) for line in status if line.startswith("VmRSS")))
    process.terminate()
    process.wait(timeout=20)
    # Wait until the name is gone before the next run, so the next owner is the new process.
    while bus.name_has_owner(name):
        GLib.MainContext.default().iteration(True)
print(json.dumps({"ms": timings, "rss_kib": memory}))
