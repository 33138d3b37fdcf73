#!/usr/bin/python3
"""Searches in the real GNOME Shell, as a person does, and reports what it shows.

    gnome-shell-search.py DATA_DIR QUERY [--screenshot PATH] [--activate]

Starts Debian's GNOME Shell headless (Wayland, a 1280x800 virtual monitor, unsafe mode for
org.gnome.Shell.Eval) on the session bus in $DBUS_SESSION_BUS_ADDRESS, with a private system
bus of its own and DATA_DIR first in its XDG_DATA_DIRS (the Shell reads search providers
from the system data directories only). Then opens the overview, types QUERY on a virtual
keyboard, and waits until the search has settled. It prints one JSON object:

    {"sections": [provider ids shown], "results": {provider id: [{"id", "name", "description"}]},
     "clipboard": text after activation (with --activate), "overview": shown after activation}

--screenshot saves the screen (org.gnome.Shell.Screenshot) once results show; --activate puts
a known text on the clipboard, presses Enter (the Shell activates the first result), and
reads the clipboard back. Exits 1 when the Shell does not start or show results in time; the
Shell and its buses are stopped either way.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import dbus

data_dir, query = sys.argv[1], sys.argv[2]
screenshot = sys.argv[sys.argv.index("--screenshot") + 1] if "--screenshot" in sys.argv else None
activate = "--activate" in sys.argv
KNOWN_TEXT = "what the user had copied"
deadline = time.monotonic() + 100
work = tempfile.mkdtemp(prefix="baton-shell-")
children = []


def until(what, condition, seconds=None):
    end = min(deadline, time.monotonic() + seconds) if seconds else deadline
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise TimeoutError(f"timed out waiting for {what}")


def start(arguments, environment, **kwargs):
    child = subprocess.Popen(arguments, env=environment, start_new_session=True, **kwargs)
    children.append(child)
    return child


try:
    # A system bus of the Shell's own: with /run/systemd/seats present it wants logind's.
    system_conf = os.path.join(work, "system.conf")
    with open(system_conf, "w") as conf:
        conf.write(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>system</type><listen>unix:path={work}/system_bus</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*"/><allow receive_sender="*"/><allow own="*"/><allow user="*"/></policy>
</busconfig>
""")
    start(["dbus-daemon", "--nofork", "--config-file", system_conf], os.environ)
    until("the system bus", lambda: os.path.exists(f"{work}/system_bus"), 10)

    for directory in ["home", "runtime", "config", "cache", "data"]:
        os.makedirs(os.path.join(work, directory), mode=0o700)
    environment = dict(os.environ)
    environment.update({
        "HOME": f"{work}/home", "XDG_RUNTIME_DIR": f"{work}/runtime", "XDG_CONFIG_HOME": f"{work}/config",
        "XDG_CACHE_HOME": f"{work}/cache", "XDG_DATA_HOME": f"{work}/data",
        "XDG_DATA_DIRS": f"{data_dir}:/usr/local/share:/usr/share", "GSETTINGS_BACKEND": "memory",
        "DBUS_SYSTEM_BUS_ADDRESS": f"unix:path={work}/system_bus", "NO_AT_BRIDGE": "1",
    })
    for variable in ["DISPLAY", "WAYLAND_DISPLAY"]:
        environment.pop(variable, None)
    log = open(os.path.join(work, "shell.log"), "w")
    start(["gnome-shell", "--wayland", "--headless", "--virtual-monitor", "1280x800", "--no-x11", "--unsafe-mode",
           "--sm-disable"], environment, stdout=log, stderr=subprocess.STDOUT)

    bus = dbus.SessionBus()

    def shell(code):
        """Runs JavaScript in the Shell; its result, which the Shell sends as JSON, decoded."""
        proxy = bus.get_object("org.gnome.Shell", "/org/gnome/Shell")
        ok, result = proxy.Eval(code, dbus_interface="org.gnome.Shell", timeout=10)
        if not ok:
            raise RuntimeError(f"Eval failed: {result}")
        return json.loads(result) if result else None

    def started():
        try:
            return shell("Main.layoutManager._startingUp") is False
        except dbus.DBusException:
            return False

    until("GNOME Shell to start", started)
    # As gnome-session does: what the Shell starts (the Baton window, say) finds the display.
    bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus").UpdateActivationEnvironment(
        {"WAYLAND_DISPLAY": shell("GLib.getenv('WAYLAND_DISPLAY') || ''") or "wayland-0"},
        dbus_interface="org.freedesktop.DBus")

    # No banners over the search (the Shell says at start that it cannot lock the screen).
    shell("Main.messageTray.bannerBlocked = true; null")
    shell("Main.overview.show(); null")
    until("the overview", lambda: shell("Main.overview.visible && !Main.overview.animationInProgress"), 10)

    def press(keys):
        shell(f"""
            const {{Clutter}} = imports.gi;
            global._batonKeyboard ??= Clutter.get_default_backend().get_default_seat()
                .create_virtual_device(Clutter.InputDeviceType.KEYBOARD_DEVICE);
            let time = GLib.get_monotonic_time();
            for (const key of {json.dumps(keys)}) {{
                const keyval = Clutter['KEY_' + key];
                global._batonKeyboard.notify_keyval(time, keyval, Clutter.KeyState.PRESSED);
                global._batonKeyboard.notify_keyval(time + 1000, keyval, Clutter.KeyState.RELEASED);
                time += 2000;
            }}
            null""")

    press([character if character != " " else "space" for character in query])
    until("the query typed", lambda: shell("Main.overview.searchEntry.get_text()") == query, 10)

    read_results = """
        const results = Main.overview._overview._controls._searchController._searchResults;
        ({
            sections: results._providers.filter(p => p.display.visible).map(p => p.id),
            results: Object.fromEntries(results._providers.map(p => [p.id,
                (p.display._content ?? p.display._grid).get_children().filter(c => c.visible && c.metaInfo)
                    .map(c => ({id: c.metaInfo.id, name: c.metaInfo.name, description: c.metaInfo.description || ''}))])),
            searching: results._searchTimeoutId > 0 || results._startingSearch === true
                || results._providers.some(p => p.searchInProgress),
        })"""

    def settled():
        shown = shell(read_results)
        return shown if shown["sections"] and not shown["searching"] else None

    until("search results", settled)
    time.sleep(0.5)  # metas arrive after ids: read once they are drawn
    shown = shell(read_results)
    if screenshot:
        bus.get_object("org.gnome.Shell", "/org/gnome/Shell/Screenshot").Screenshot(
            False, False, os.path.abspath(screenshot), dbus_interface="org.gnome.Shell.Screenshot")
    report = {"sections": shown["sections"], "results": shown["results"]}

    if activate:
        shell(f"imports.gi.St.Clipboard.get_default().set_text(imports.gi.St.ClipboardType.CLIPBOARD, {json.dumps(KNOWN_TEXT)}); null")
        press(["Return"])
        until("the overview to close", lambda: shell("!Main.overview.visible"), 10)
        shell("global._batonClipboard = null; imports.gi.St.Clipboard.get_default().get_text("
              "imports.gi.St.ClipboardType.CLIPBOARD, (c, text) => { global._batonClipboard = text ?? ''; }); null")
        report["clipboard"] = until("the clipboard", lambda: shell("global._batonClipboard"), 5)
        report["overview"] = shell("Main.overview.visible")
    print(json.dumps(report))
except Exception as error:  # noqa: BLE001 - said, with the Shell's log, for the test to show
    print(f"{type(error).__name__}: {error}", file=sys.stderr)
    try:
        with open(os.path.join(work, "shell.log")) as log_text:
            sys.stderr.write(log_text.read()[-3000:])
    except OSError:
        pass
    sys.exit(1)
finally:
    for child in reversed(children):
        try:
            os.killpg(child.pid, signal.SIGTERM)
            child.wait(5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(child.pid, signal.SIGKILL)
    shutil.rmtree(work, ignore_errors=True)
