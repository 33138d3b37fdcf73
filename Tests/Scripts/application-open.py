#!/usr/bin/python3
"""A D-Bus-activatable app, as the freedesktop Desktop Entry Specification describes one: it owns
its id on the session bus and implements org.freedesktop.Application.Open, writing each URI it
is given to LOG, one per line, then quits.

    application-open.py APP_ID LOG
"""
import sys

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

app_id, log = sys.argv[1], sys.argv[2]
DBusGMainLoop(set_as_default=True)
loop = GLib.MainLoop()


class Application(dbus.service.Object):
    @dbus.service.method("org.freedesktop.Application", in_signature="asa{sv}")
    def Open(self, uris, platform_data):
        with open(log, "a") as out:
            out.writelines(f"{uri}\n" for uri in uris)
        GLib.timeout_add(100, loop.quit)

    @dbus.service.method("org.freedesktop.Application", in_signature="a{sv}")
    def Activate(self, platform_data):
        pass


bus = dbus.SessionBus()
name = dbus.service.BusName(app_id, bus)
Application(bus, "/" + app_id.replace(".", "/").replace("-", "_"))
GLib.timeout_add_seconds(30, loop.quit)
loop.run()
