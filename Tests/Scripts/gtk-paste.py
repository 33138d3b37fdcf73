#!/usr/bin/python3
"""A GTK 4 window whose text field the user pastes into, as a person would (Ctrl+V).

    gtk-paste.py [SCREENSHOT.png]

On the display $DISPLAY (GDK's X11 backend): shows an empty entry, focuses it and pastes
through the entry's own paste action (what Ctrl+V does). Prints one line, "pasted " and the
entry's text as JSON, once the text arrives; photographs the screen to SCREENSHOT if given,
then prints "photographed". Runs until killed.
"""
import json
import os
import subprocess
import sys

os.environ["GDK_BACKEND"] = "x11"
import gi
gi.require_version("Gtk", "4.0")
from gi.repository import GLib, Gtk

screenshot = sys.argv[1] if len(sys.argv) > 1 else None
app = Gtk.Application(application_id="org.baton.test.GtkPaste")


def activate(application):
    window = Gtk.ApplicationWindow(application=application, title="Paste here")
    window.set_default_size(480, 120)
    entry = Gtk.Entry(placeholder_text="Ctrl+V")
    window.set_child(entry)
    window.present()

    def pasted(_entry):
        print("pasted " + json.dumps(entry.get_text()), flush=True)
        if screenshot:
            here = os.path.dirname(os.path.realpath(__file__))
            # Once GTK has drawn the text.
            def photograph():
                subprocess.run([sys.executable, os.path.join(here, "photograph-screen.py"), os.environ["DISPLAY"], screenshot])
                print("photographed", flush=True)
                return False
            GLib.timeout_add(300, photograph)

    entry.connect("changed", pasted)

    def paste():
        entry.grab_focus()
        # What Ctrl+V runs: the paste action of the entry's text widget.
        if not entry.get_delegate().activate_action("clipboard.paste", None):
            sys.exit("GTK has no clipboard.paste action here")
        return False

    GLib.timeout_add(300, paste)


app.connect("activate", activate)
app.run([])
