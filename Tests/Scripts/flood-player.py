#!/usr/bin/python3
"""A player that floods its signals: an MPRIS 2 player (org.mpris.MediaPlayer2.NAME) that plays
one track (file:///music/NAME.ogg), answers each read (GetAll) after 1 ms as a busy player does,
and on its Flood(n) method sends n PropertiesChanged (its volume, as a player with a volume
slider being dragged would) and n Seeked as fast as it can, then pauses. Stats() says how often
it was read.

    flood-player.py NAME
"""
import sys
import time

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

NAME = sys.argv[1]
DBusGMainLoop(set_as_default=True)
PLAYER = "org.mpris.MediaPlayer2.Player"
PATH = "/org/mpris/MediaPlayer2"


class Player(dbus.service.Object):
    def __init__(self, bus):
        super().__init__(bus, PATH)
        self.reads = 0
        self.properties = {
            "PlaybackStatus": "Playing", "Volume": dbus.Double(1.0), "Position": dbus.Int64(5_000_000), "CanSeek": True,
            "Metadata": dbus.Dictionary({"xesam:url": "file:///music/%s.ogg" % NAME, "xesam:title": NAME,
                                         "mpris:trackid": dbus.ObjectPath("/flood/1"), "mpris:length": dbus.Int64(60_000_000)},
                                        signature="sv"),
        }

    @dbus.service.method("org.freedesktop.DBus.Properties", in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        if interface == "org.mpris.MediaPlayer2":
            return {"DesktopEntry": "flood", "Identity": "Flood"}
        self.reads += 1
        time.sleep(0.001)
        return self.properties

    @dbus.service.method("org.freedesktop.DBus.Properties", in_signature="ss", out_signature="v")
    def Get(self, interface, name):
        return {"DesktopEntry": "flood", "Identity": "Flood"}.get(name, "") if interface == "org.mpris.MediaPlayer2" \
            else self.properties[name]

    @dbus.service.signal("org.freedesktop.DBus.Properties", signature="sa{sv}as")
    def PropertiesChanged(self, interface, changed, invalidated):
        pass

    @dbus.service.signal(PLAYER, signature="x")
    def Seeked(self, position):
        pass

    @dbus.service.method("org.baton.Test.Flood", in_signature="u")
    def Flood(self, count):
        for step in range(count):
            self.properties["Volume"] = dbus.Double((step % 100) / 100)
            self.PropertiesChanged(PLAYER, {"Volume": self.properties["Volume"]}, [])
            self.Seeked(dbus.Int64(5_000_000))
        self.properties["PlaybackStatus"] = "Paused"
        self.PropertiesChanged(PLAYER, {"PlaybackStatus": "Paused"}, [])

    @dbus.service.method("org.baton.Test.Flood", out_signature="u")
    def Stats(self):
        return self.reads


bus = dbus.SessionBus()
player = Player(bus)
name = dbus.service.BusName("org.mpris.MediaPlayer2." + NAME, bus)
GLib.MainLoop().run()
