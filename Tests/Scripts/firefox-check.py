#!/usr/bin/python3
"""Baton's browser extension in a real headless Firefox, against the batond on the session bus.

    firefox-check.py EXTENSION_DIR HOST_PROGRAM WORK_DIR

Firefox (Debian's firefox-esr, --headless) is driven over WebDriver BiDi, which installs the
extension unpacked as a temporary add-on (as about:debugging does). The native messaging host's
manifest, naming HOST_PROGRAM, is where Firefox looks for it: ~/.mozilla/native-messaging-hosts
under WORK_DIR, the HOME Firefox is given. Pages come from a local HTTP server. Each check waits
for its condition, at most 30 s; the script exits 1 at the first that does not come.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import websocket

from browser_check_support import Check, serve

extension_dir, host_program, work = sys.argv[1:4]

PAGES = {
    "/one.html": "<title>Page One</title><body>one</body>",
    "/two.html": "<title>Page Two</title><body>two</body>",
}

site = serve(PAGES)
check = Check("firefox-check", os.path.join(work, "firefox.log"))
step, fail, pages, wait_for = check.step, check.fail, check.pages, check.wait_for

home = os.path.join(work, "home")
os.makedirs(os.path.join(home, ".mozilla", "native-messaging-hosts"))
with open(os.path.join(home, ".mozilla", "native-messaging-hosts", "org.baton.browser.json"), "w") as manifest:
    json.dump({"name": "org.baton.browser", "description": "Baton", "path": host_program, "type": "stdio",
               "allowed_extensions": ["org.baton.browser@baton"]}, manifest)
profile = os.path.join(work, "profile")
os.makedirs(profile)
log = open(os.path.join(work, "firefox.log"), "w+")
firefox = subprocess.Popen(
    [shutil.which("firefox-esr") or shutil.which("firefox"), "--headless", "--no-remote", "--profile", profile,
     "--remote-debugging-port=0"],
    env={**os.environ, "HOME": home, "MOZ_CRASHREPORTER_DISABLE": "1"}, stdout=log, stderr=subprocess.STDOUT,
    start_new_session=True)


def listening():
    log.seek(0)
    match = re.search(r"WebDriver BiDi listening on (ws://\S+)", log.read())
    return match.group(1) if match else None


try:
    address = wait_for("Firefox listening for WebDriver BiDi", listening, 60)
    # No Origin header: Firefox refuses a WebDriver connection that has one (a web page could).
    socket = websocket.create_connection(address + "/session", timeout=30, suppress_origin=True)
    next_id = 0

    def send(method, params):
        global next_id
        next_id += 1
        socket.send(json.dumps({"id": next_id, "method": method, "params": params}))
        while True:
            reply = json.loads(socket.recv())
            if reply.get("id") == next_id:
                if reply.get("type") == "error":
                    fail(f"{method}: {reply.get('error')}: {reply.get('message')}")
                return reply["result"]

    send("session.new", {"capabilities": {}})
    installed = send("webExtension.install", {"extensionData": {"type": "path", "path": extension_dir}})
    if installed.get("extension") != "org.baton.browser@baton":
        fail(f"the extension installed as {installed}")

    step("a tab becomes an activity")
    tab = send("browsingContext.create", {"type": "tab"})["context"]
    send("browsingContext.activate", {"context": tab})
    send("browsingContext.navigate", {"context": tab, "url": f"{site}/one.html", "wait": "complete"})
    first = wait_for("the tab's page recorded with its title",
                     lambda: next((page for page in pages() if page["webpage_url"] == f"{site}/one.html" and page["title"] == "Page One"), None))

    step("navigating updates the same activity")
    send("browsingContext.navigate", {"context": tab, "url": f"{site}/two.html", "wait": "complete"})
    second = wait_for("the new page recorded", lambda: next((page for page in pages() if page["title"] == "Page Two"), None))
    if second["id"] != first["id"]:
        fail(f"navigating made another activity: {pages()}")

    step("closing the tab ends its activity")
    send("browsingContext.close", {"context": tab})
    wait_for("no page of the closed tab", lambda: not any(page["webpage_url"].startswith(site) for page in pages()))
    step("passed")
finally:
    firefox.terminate()
    try:
        firefox.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(firefox.pid, 9)
