#!/usr/bin/python3
"""A handler app of its own process, for the promises about apps that come, go and restart.

    handler-app.py NAME [--continue ID] [--delay-ms N] [--die-on-call] [--deadline S]

Serves org.baton.Handoff1.Handler at / on the session bus ($DBUS_SESSION_BUS_ADDRESS) under
the bus name NAME, as an app does:
- --continue ID: first calls Continue(ID, wait=false) itself and prints `scene PATH` (an app
  that starts itself and continues, or a launcher);
- --delay-ms N: takes NAME N ms after that (after starting, without --continue);
- --die-on-call: exits at once, without answering, when ContinueActivity comes (a crash
  mid-call);
otherwise answers each ContinueActivity with {"delivered": <title>} and prints
`delivered PATH`. Exits 0 once a delivery has come and a second one has had a moment to come
too; 1 if none came within --deadline seconds (default 10); 2 if NAME was taken.
"""
import argparse
import os
import sys
import time

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

parser = argparse.ArgumentParser()
parser.add_argument("name")
parser.add_argument("--continue", dest="activity")
parser.add_argument("--delay-ms", type=int, default=0)
parser.add_argument("--die-on-call", action="store_true")
parser.add_argument("--deadline", type=float, default=10)
options = parser.parse_args()

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.SessionBus()
loop = GLib.MainLoop()
delivered = []
# A second delivery of the same scene would come within this after the first.
LINGER_MS = 300


class Handler(dbus.service.Object):
    @dbus.service.method("org.baton.Handoff1.Handler", in_signature="oa{sv}", out_signature="a{sv}")
    def ContinueActivity(self, scene, activity):
        if options.die_on_call:
            print("died", scene, flush=True)
            os._exit(3)
        print("delivered", scene, flush=True)
        if not delivered:
            GLib.timeout_add(LINGER_MS, loop.quit)
        delivered.append(str(scene))
        return dbus.Dictionary({"delivered": dbus.String(activity["title"])}, signature="sv")


# The object first, then the name: a call that comes with the name finds the handler.
Handler(bus, "/")
if options.activity:
    activities = dbus.Interface(bus.get_object("org.baton.Handoff1", "/org/baton/Handoff1"), "org.baton.Handoff1.Activities")
    print("scene", activities.Continue(options.activity, {"wait": "false"}), flush=True)
time.sleep(options.delay_ms / 1000)
if bus.request_name(options.name, dbus.bus.NAME_FLAG_DO_NOT_QUEUE) != dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER:
    print("could not take", options.name, file=sys.stderr)
    sys.exit(2)
GLib.timeout_add(int(options.deadline * 1000), loop.quit)
loop.run()
sys.exit(0 if delivered else 1)
