#!/usr/bin/python3
"""An app that continues an activity and takes its handler's name right after.

As an app that starts itself and continues, or a launcher does: it calls
Continue(ID, wait=false) for an activity whose type names NAME as its handler,
sleeps DELAY_MS, then takes NAME and serves org.baton.Handoff1.Handler. It prints
`scene PATH` (Continue's reply) and `delivered PATH` for every ContinueActivity it
gets, and exits 0 once a delivery has come and a second one has had a moment to
come too; 1 if none came within DEADLINE_S.

Usage: late-handler-app.py ID NAME DELAY_MS DEADLINE_S   (on DBUS_SESSION_BUS_ADDRESS)
"""
import sys
import time

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

activity_id, name, delay_ms, deadline_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.SessionBus()
loop = GLib.MainLoop()
delivered = []
# A second delivery of the same scene would come within this after the first.
LINGER_MS = 300


class Handler(dbus.service.Object):
    @dbus.service.method("org.baton.Handoff1.Handler", in_signature="oa{sv}", out_signature="a{sv}")
    def ContinueActivity(self, scene, activity):
        print("delivered", scene, flush=True)
        if not delivered:
            GLib.timeout_add(LINGER_MS, loop.quit)
        delivered.append(str(scene))
        return dbus.Dictionary({"delivered": dbus.String(activity["title"])}, signature="sv")


# The object first, then the name: a call that comes with the name finds the handler.
Handler(bus, "/")
activities = dbus.Interface(bus.get_object("org.baton.Handoff1", "/org/baton/Handoff1"), "org.baton.Handoff1.Activities")
scene = activities.Continue(activity_id, {"wait": "false"})
print("scene", scene, flush=True)
time.sleep(delay_ms / 1000)
if bus.request_name(name, dbus.bus.NAME_FLAG_DO_NOT_QUEUE) != dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER:
    print("could not take", name, file=sys.stderr)
    sys.exit(2)
GLib.timeout_add(int(deadline_s * 1000), loop.quit)
loop.run()
sys.exit(0 if delivered else 1)
