#!/usr/bin/python3
"""Opens a file in Debian's GNOME Text Editor through its Open dialog, as a person does.

    text-editor-open.py PATH

On $DISPLAY (an Xvfb of the test's), with the test's session bus and $XDG_DATA_HOME: starts
`gnome-text-editor --standalone`, presses Ctrl+O, types PATH into GTK 4's file chooser and
presses Enter; the chooser records the file in $XDG_DATA_HOME/recently-used.xbel as GLib
does for that app. Exits 0 once the file names PATH and the editor shows it, 1 after 60 s;
the editor is stopped either way.
"""
import os
import subprocess
import sys
import time
import urllib.parse

path = sys.argv[1]
uri = "file://" + urllib.parse.quote(path)
recent = os.path.join(os.environ["XDG_DATA_HOME"], "recently-used.xbel")
deadline = time.monotonic() + 60


def windows(name):
    found = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", name], capture_output=True, text=True)
    return found.stdout.split()


def wait_for(what, condition):
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    sys.exit(f"timed out waiting for {what}")


def recorded():
    try:
        with open(recent) as written:
            return f'href="{uri}"' in written.read()
    except FileNotFoundError:
        return False


def xdotool(*arguments):
    subprocess.run(["xdotool", *arguments], check=True, capture_output=True, timeout=10)


editor = subprocess.Popen(["gnome-text-editor", "--standalone"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    window = wait_for("the editor's window", lambda: windows("Text Editor"))[0]
    # Under load the dialog can take its keys late or lose them to the editor: open it, focus it
    # and type again until the chooser has recorded the file (there is no readiness to await).
    for attempt in range(3):
        xdotool("windowfocus", "--sync", window)
        before = set(windows("."))
        xdotool("key", "--window", window, "ctrl+o")
        dialog = wait_for("the Open dialog", lambda: sorted(set(windows(".")) - before))[0]
        xdotool("windowfocus", "--sync", dialog)
        time.sleep(0.5)
        # A leading / opens the chooser's location entry.
        xdotool("type", "--delay", "30", path)
        time.sleep(0.5)
        xdotool("key", "Return")
        end = time.monotonic() + 10
        while time.monotonic() < min(end, deadline) and not recorded():
            time.sleep(0.1)
        if recorded():
            break
        xdotool("key", "Escape")
    wait_for(f"{recent} to name {uri}", recorded)
    wait_for("the editor to show the file", lambda: windows(os.path.basename(path)))
finally:
    editor.terminate()
    try:
        editor.wait(10)
    except subprocess.TimeoutExpired:
        editor.kill()
