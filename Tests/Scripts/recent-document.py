#!/usr/bin/python3
"""Records documents as recently used through GTK 4's real RecentManager, as an app does.

    recent-document.py [--name NAME] APP_ID URI...

The app's name in recently-used.xbel is APP_ID (GLib's program name, as a GApplication's id
is), or NAME where given (`g_set_application_name`, as most GTK apps set a readable name);
its exec is 'APP_ID %u'. GTK records only with a display: Xvfb gives one. Exits once the file (in $XDG_DATA_HOME)
names every URI, or with 1 after 20 s.
"""
import os
import subprocess
import sys
import time

arguments = sys.argv[1:]
name = None
if arguments[:1] == ["--name"]:
    name, arguments = arguments[1], arguments[2:]
app_id, uris = arguments[0], arguments[1:]
read_end, write_end = os.pipe()
xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(write_end), "-screen", "0", "640x480x24", "-nolisten", "tcp"],
                        pass_fds=[write_end], stderr=subprocess.DEVNULL)
os.close(write_end)
try:
    with os.fdopen(read_end) as pipe:
        os.environ["DISPLAY"] = ":" + pipe.readline().strip()
    import gi
    gi.require_version("Gtk", "4.0")
    from gi.repository import GLib, Gtk

    GLib.set_prgname(app_id)
    if name:
        GLib.set_application_name(name)
    Gtk.init()
    manager = Gtk.RecentManager.get_default()
    for uri in uris:
        if not manager.add_item(uri):
            sys.exit(f"RecentManager refused {uri}")
    path = os.path.join(GLib.get_user_data_dir(), "recently-used.xbel")
    context = GLib.MainContext.default()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        context.iteration(False)
        try:
            with open(path) as written:
                text = written.read()
            if all(f'href="{uri}"' in text for uri in uris):
                sys.exit(0)
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    sys.exit(f"{path} does not name {uris} after 20 s")
finally:
    xvfb.kill()
    xvfb.wait(10)
