#!/usr/bin/python3
"""A GTK 4 window with a text field, copied from or pasted into as a person would.

    gtk-clipboard.py copy TEXT [SCREENSHOT.png]
    gtk-clipboard.py paste [SCREENSHOT.png]

On the display $DISPLAY (GDK's X11 backend), through the entry's own actions (what Ctrl+C and
Ctrl+V run). copy: shows TEXT selected and copies it; prints "copied" once GTK owns the
clipboard. paste: shows an empty entry and pastes; prints "pasted " and the text as JSON once
it arrives. Then photographs the screen to SCREENSHOT if given and prints "photographed".
Runs until killed: GTK serves a copy from its main loop, as any app does.
"""
import json
import os
import subprocess
import sys

os.environ["GDK_BACKEND"] = "x11"
import gi
gi.require_version("Gtk", "4.0")
from gi.repository import Gio, GLib, Gtk

mode = sys.argv[1]
text = sys.argv[2] if mode == "copy" else ""
rest = sys.argv[3:] if mode == "copy" else sys.argv[2:]
screenshot = rest[0] if rest else None
# Not unique: a copying and a pasting window may run at once on one bus.
app = Gtk.Application(application_id="org.baton.test.GtkClipboard", flags=Gio.ApplicationFlags.NON_UNIQUE)


def photograph():
    """Once GTK has drawn what it was given."""
    def take():
        here = os.path.dirname(os.path.realpath(__file__))
        subprocess.run([sys.executable, os.path.join(here, "photograph-screen.py"), os.environ["DISPLAY"], screenshot])
        print("photographed", flush=True)
        return False
    if screenshot:
        GLib.timeout_add(300, take)


def activate(application):
    window = Gtk.ApplicationWindow(application=application, title="Copy from here" if mode == "copy" else "Paste here")
    window.set_default_size(480, 120)
    entry = Gtk.Entry(text=text, placeholder_text="Ctrl+V")
    window.set_child(entry)
    window.present()

    def pasted(_entry):
        print("pasted " + json.dumps(entry.get_text()), flush=True)
        photograph()

    def act():
        entry.grab_focus()
        if mode == "copy":
            entry.select_region(0, -1)
        action = "clipboard.copy" if mode == "copy" else "clipboard.paste"
        if not entry.get_delegate().activate_action(action, None):
            sys.exit(f"GTK has no {action} action here")
        if mode == "copy":
            if not entry.get_clipboard().is_local():
                sys.exit("GTK could not take the clipboard")
            print("copied", flush=True)
            photograph()
        return False

    if mode == "paste":
        entry.connect("changed", pasted)
    GLib.timeout_add(300, act)


app.connect("activate", activate)
app.run([])
