"""The Baton window under Xvfb, driven through its Window interface and batond, against the real
batond on the bus DBUS_SESSION_BUS_ADDRESS names (BatonWindowTests starts it):
/usr/bin/python3 -m unittest -v test_baton_gtk

With BATON_GTK_SCREENSHOTS=DIR it keeps its screenshot there (docs/ holds one)."""

import os
import shutil
import subprocess
import tempfile
import unittest

from gi.repository import Gio, GLib

import baton
from test_hawk_notes_gtk import differing_share, eventually, photograph

HERE = os.path.dirname(os.path.realpath(__file__))
APP = "org.example.notes"
TYPE = APP + ".page"


class BatonWindowTests(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="baton-gtk-")
        self.addCleanup(shutil.rmtree, self.directory, True)
        read_end, write_end = os.pipe()
        xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(write_end), "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
                                pass_fds=[write_end], stderr=subprocess.DEVNULL)
        os.close(write_end)
        self.addCleanup(self.stop, xvfb)
        with os.fdopen(read_end) as pipe:
            self.display = ":" + pipe.readline().strip()
        self.client = baton.Client()

    def stop(self, process):
        if process.poll() is None:
            process.kill()
            process.wait(10)

    def window_call(self, method, signature=None, arguments=None, reply=""):
        parameters = GLib.Variant("(%s)" % signature, arguments) if signature else None
        try:
            result = self.client.connection.call_sync("org.baton.Baton", "/org/baton/Baton", "org.baton.Baton.Window", method,
                                                      parameters, GLib.VariantType.new("(%s)" % reply), Gio.DBusCallFlags.NONE,
                                                      10000, None)
        except GLib.Error as error:
            raise baton._error(error) from None  # not there yet, say: eventually() waits on it
        return result.unpack()

    def describe(self):
        return self.window_call("Describe", reply="a{ss}aa{ss}")

    def titles(self):
        return [row["title"] for row in self.describe()[1]]

    def act(self, action, argument):
        self.window_call("Act", "ss", (action, argument))

    def test_the_window_lists_searches_continues_and_forgets(self):
        # Hawk Notes' desktop entry and icons, as installed: the window shows its icon and name.
        data = os.environ["XDG_DATA_HOME"]
        os.makedirs(os.path.join(data, "applications"), exist_ok=True)
        repository = os.path.join(HERE, "..", "..")
        with open(os.path.join(repository, "share/applications/com.raywenderlich.hawknotes.desktop")) as entry, \
                open(os.path.join(data, "applications/com.raywenderlich.hawknotes.desktop"), "w") as installed:
            installed.write(entry.read().replace("@BINDIR@", os.path.join(repository, "apps/hawk-notes-gtk")))
        shutil.copytree(os.path.join(repository, "share/icons"), os.path.join(data, "icons"), dirs_exist_ok=True)
        environment = dict(os.environ, DISPLAY=self.display, GDK_BACKEND="x11", GSK_RENDERER="cairo", NO_AT_BRIDGE="1",
                           GTK_A11Y="none")
        # As GNOME on Wayland names itself (the window runs on Xvfb all the same): the clipboard's notice.
        app = subprocess.Popen([os.path.join(HERE, "baton-gtk")],
                               env=dict(environment, XDG_SESSION_TYPE="wayland", XDG_CURRENT_DESKTOP="GNOME"))
        self.addCleanup(self.stop, app)

        # Nothing yet: the empty state says how to start.
        eventually("the empty state", lambda: self.describe()[0]["empty"] == "No Activities")
        self.client.register_type(TYPE, APP, title="Page")
        walk = self.client.advertise(TYPE, "Field walk", {"page": 7}, keywords=["outdoors"], searchable=True)
        self.client.advertise(TYPE, "Reading list", {"page": 1}, searchable=True)

        # Every activity, newest first, grouped by day and machine, each with its app's name
        # (in words: this app has no desktop entry); sync's state under the title.
        eventually("the window lists both", lambda: self.titles() == ["Reading list", "Field walk"])
        window, rows = self.describe()
        self.assertEqual(window["groups"], "Today · This machine")
        self.assertEqual(window["empty"], "")
        self.assertTrue(rows[0]["detail"].startswith("Notes · this machine · "), rows[0]["detail"])
        self.assertEqual(rows[0]["actions"], "continue,forget", "no other machine to continue on")
        self.assertIn("sync: off", window["status"])
        self.assertEqual(window["subtitle"], "Sync off")

        # With the clipboard source on, the window says plainly that GNOME on Wayland keeps it out.
        self.assertEqual(window["notice"], "")
        self.client.connection.call_sync(baton.BUS_NAME, baton.ROOT, baton.PREFIX + "Status", "EnableSource",
                                         GLib.Variant("(s)", ("clipboard",)), None, Gio.DBusCallFlags.NONE, 5000, None)
        eventually("the clipboard's notice", lambda: "GNOME on Wayland lets no background program" in self.describe()[0]["notice"])
        self.client.connection.call_sync(baton.BUS_NAME, baton.ROOT, baton.PREFIX + "Status", "DisableSource",
                                         GLib.Variant("(s)", ("clipboard",)), None, Gio.DBusCallFlags.NONE, 5000, None)
        eventually("the notice gone with the source", lambda: self.describe()[0]["notice"] == "")

        # Typing into the window searches (a person's keys, through xdotool): title and keyword
        # prefixes, as the desktop's search finds them.
        xid = window["xid"]
        subprocess.run(["xdotool", "windowfocus", "--sync", xid], env=environment, check=True, timeout=10)
        subprocess.run(["xdotool", "type", "--window", xid, "--delay", "50", "out"], env=environment, check=True, timeout=10)
        eventually("the search finds Field walk by its keyword", lambda: self.titles() == ["Field walk"])
        self.assertEqual(self.describe()[0]["search"], "out")

        # Live: what is advertised now appears, within the search.
        notes = self.client.advertise(TYPE, "Outdoor notes", {"page": 2}, searchable=True)
        eventually("Outdoor notes appears", lambda: self.titles() == ["Outdoor notes", "Field walk"])

        # Continue: a scene of the app shows it. Forget: it is gone, here and from batond.
        self.act("continue", walk)
        # A scene is listed a moment before it is on the bus: eventually() waits out the error too.
        eventually("a scene showing Field walk", lambda: [s.property("ActivityId") for s in self.client.scenes(APP)] == [walk])
        self.act("forget", notes)
        eventually("Outdoor notes is gone", lambda: self.titles() == ["Field walk"])
        with self.assertRaises(baton.BatonError):
            self.client.get(notes)

        # GNOME Shell's "search in the app": LaunchSearch opens the window on the terms.
        self.client.connection.call_sync(baton.BUS_NAME, baton.ROOT + "/SearchProvider", "org.gnome.Shell.SearchProvider2",
                                         "LaunchSearch", GLib.Variant("(asu)", (["reading"], 0)), None,
                                         Gio.DBusCallFlags.NONE, 10000, None)
        eventually("the window searches for reading", lambda: self.describe()[0]["search"] == "reading"
                   and self.titles() == ["Reading list"])

        # A search that finds nothing says so.
        self.act("search", "zzz")
        eventually("no results", lambda: self.describe()[0]["empty"] == "No Results")
        self.act("search", "reading")
        eventually("the list again", lambda: self.titles() == ["Reading list"])

        # An app with a desktop entry and an icon shows them (Hawk Notes', installed before the window started).
        self.client.register_type("com.raywenderlich.hawknotes.staterestore.characterDetail", "com.raywenderlich.hawknotes",
                                  title="Character")
        self.client.advertise("com.raywenderlich.hawknotes.staterestore.characterDetail", "Agatha",
                              {"id": "0edb89dd-1bdb-4aad-b0b3-c2e9b397f2d5", "name": "Agatha"}, searchable=True)
        self.act("search", "")
        eventually("every activity", lambda: self.titles() == ["Agatha", "Reading list", "Field walk"])
        self.assertTrue(self.describe()[1][0]["detail"].startswith("Hawk Notes · this machine"), self.describe()[1][0])

        # A track the media source recorded: the player that played it, where it stopped, a bar for how far.
        self.client.register_type("org.baton.media.track", "org.baton.Media", title="Track", required_keys=["url"])
        self.client.advertise("org.baton.media.track", "A tone — Sox",
                              {"url": "file:///music/a%20tone.wav", "position_us": 42000000, "length_us": 120000000, "player": "mpv"},
                              searchable=True)
        eventually("the track", lambda: self.titles()[0] == "A tone — Sox")
        try:
            player = Gio.DesktopAppInfo.new("mpv.desktop").get_name()
        except TypeError:  # no mpv here: the app's id in words
            player = "Media"
        self.assertTrue(self.describe()[1][0]["detail"].startswith("%s · this machine · at 0:42 of 2:00 · " % player),
                        self.describe()[1][0])

        # With the terminals source on, its button reopens what was open at the last stop (here: nothing).
        self.client.connection.call_sync(baton.BUS_NAME, baton.ROOT, baton.PREFIX + "Status", "EnableSource",
                                         GLib.Variant("(s)", ("terminals",)), None, Gio.DBusCallFlags.NONE, 5000, None)
        eventually("the reopen button", lambda: self.describe()[0]["reopen"] == "shown")
        self.act("reopen-terminals", "")
        eventually("what reopening did", lambda: self.describe()[0]["reopened"] == "No terminals to reopen")
        self.client.connection.call_sync(baton.BUS_NAME, baton.ROOT, baton.PREFIX + "Status", "DisableSource",
                                         GLib.Variant("(s)", ("terminals",)), None, Gio.DBusCallFlags.NONE, 5000, None)
        eventually("the reopen button gone with the source", lambda: self.describe()[0]["reopen"] == "")

        # Drawn: photographed until two photographs agree.
        shot = os.path.join(self.directory, "baton-gtk.png")
        xid = self.describe()[0]["xid"]
        self.assertTrue(xid)

        def settled():
            photograph(self.display, xid, shot + ".previous")
            photograph(self.display, xid, shot)
            return differing_share(shot + ".previous", shot) == 0
        eventually("the window drawn", settled)
        keep = os.environ.get("BATON_GTK_SCREENSHOTS")
        if keep:
            shutil.copy(shot, os.path.join(keep, "baton-gtk.png"))
