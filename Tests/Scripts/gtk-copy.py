#!/usr/bin/python3
"""A GTK 4 window whose text field's text the user copies, as a person would (select all, Ctrl+C).

    gtk-copy.py TEXT [SCREENSHOT.png]

On the display $DISPLAY (GDK's X11 backend): shows an entry holding TEXT, selects it, and
copies it through the entry's own copy action (what Ctrl+C does). Prints "copied" once GTK
owns the clipboard, photographs the screen to SCREENSHOT if given, and runs until killed:
GTK serves the copy from its main loop, as any app does.
"""
import os
import subprocess
import sys

os.environ["GDK_BACKEND"] = "x11"
import gi
gi.require_version("Gtk", "4.0")
from gi.repository import GLib, Gtk

text = sys.argv[1]
screenshot = sys.argv[2] if len(sys.argv) > 2 else None
app = Gtk.Application(application_id="org.baton.test.GtkCopy")


def activate(application):
    window = Gtk.ApplicationWindow(application=application, title="Copy from here")
    window.set_default_size(420, 120)
    entry = Gtk.Entry(text=text)
    window.set_child(entry)
    window.present()

    def copy():
        entry.grab_focus()
        entry.select_region(0, -1)
        # What Ctrl+C runs: the copy action of the entry's text widget.
        if not entry.get_delegate().activate_action("clipboard.copy", None):
            sys.exit("GTK has no clipboard.copy action here")
        if not entry.get_clipboard().is_local():
            sys.exit("GTK could not take the clipboard")
        print("copied", flush=True)
        if screenshot:
            here = os.path.dirname(os.path.realpath(__file__))
            GLib.timeout_add(300, lambda: subprocess.run([sys.executable, os.path.join(here, "photograph-screen.py"),
                                                          os.environ["DISPLAY"], screenshot]) and False)
        return False

    GLib.timeout_add(300, copy)


app.connect("activate", activate)
app.run([])
