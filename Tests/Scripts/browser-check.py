#!/usr/bin/python3
"""Baton's browser extension in a real headless Chromium, against the batond on the session bus.

    browser-check.py EXTENSION_DIR HOST_PROGRAM WORK_DIR

Chromium (Debian's, --headless=new) loads the extension unpacked; the native messaging host's
manifest, naming HOST_PROGRAM, is in the profile's NativeMessagingHosts, as Chromium reads it
with --user-data-dir. The extension is allowed in private windows, as a user may allow it, so
that "a private window records nothing" is the extension's doing. Pages come from a local HTTP
server. Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: fds
3 and 4, messages ending in NUL). Each check waits for its condition, at most 30 s, and the
script exits 1 at the first that does not come, saying which.
"""
import functools
import json
import os
import shutil
import subprocess
import sys
import time

import dbus

from browser_check_support import Check, serve

EXTENSION_ID = "dadpnfjbaklggmnklkpggjdnfejcegin"  # from the manifest's key
extension_dir, host_program, work = sys.argv[1:4]

PAGES = {
    "/one.html": "<title>Page One</title><body style='height:20000px'>one</body>",
    "/two.html": "<title>Page Two</title><body>two</body>",
    "/secret.html": "<title>Private page</title><body>secret</body>",
}

site = serve(PAGES)
port = int(site.rsplit(":", 1)[1])
check = Check("browser-check", os.path.join(work, "chromium.log"))
step, fail, pages, wait_for = check.step, check.fail, check.pages, check.wait_for

# The profile: the host's manifest, and the extension allowed in private windows.
profile = os.path.join(work, "profile")
os.makedirs(os.path.join(profile, "NativeMessagingHosts"))
os.makedirs(os.path.join(profile, "Default"))
with open(os.path.join(profile, "NativeMessagingHosts", "org.baton.browser.json"), "w") as manifest:
    json.dump({"name": "org.baton.browser", "description": "Baton", "path": host_program, "type": "stdio",
               "allowed_origins": [f"chrome-extension://{EXTENSION_ID}/"]}, manifest)
with open(os.path.join(profile, "Default", "Preferences"), "w") as preferences:
    json.dump({"extensions": {"settings": {EXTENSION_ID: {"incognito": True}}}}, preferences)

to_chromium, from_test = os.pipe()
from_chromium, to_test = os.pipe()


def pipes_at_3_and_4():
    os.dup2(to_chromium, 3)
    os.dup2(to_test, 4)


chromium = subprocess.Popen(
    [shutil.which("chromium") or "/usr/bin/chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
     "--no-first-run", "--no-default-browser-check", "--remote-debugging-pipe",
     f"--user-data-dir={profile}", f"--load-extension={extension_dir}", "about:blank"],
    preexec_fn=pipes_at_3_and_4, pass_fds=(3, 4), stdout=subprocess.DEVNULL,
    stderr=open(os.path.join(work, "chromium.log"), "w"), start_new_session=True)
os.close(to_chromium)
os.close(to_test)

unread = b""
next_id = 0


def send(method, params=None, session=None):
    """One DevTools command; its result, or fail."""
    global unread, next_id
    next_id += 1
    message = {"id": next_id, "method": method, "params": params or {}}
    if session:
        message["sessionId"] = session
    os.write(from_test, json.dumps(message).encode() + b"\0")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        while b"\0" in unread:
            text, unread = unread.split(b"\0", 1)
            reply = json.loads(text)
            if reply.get("id") == next_id:
                if "error" in reply:
                    fail(f"{method}: {reply['error']}")
                return reply["result"]
        chunk = os.read(from_chromium, 1 << 16)
        if not chunk:
            fail(f"Chromium closed the pipe during {method}; see {work}/chromium.log")
        unread += chunk
    fail(f"no answer to {method} in 30 s")


def the_page(url):
    return lambda: next((page for page in pages() if page["webpage_url"] == url), None)


def evaluate(session, expression):
    return send("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True}, session)


def open_tab(url, **options):
    target = send("Target.createTarget", {"url": url, **options})["targetId"]
    session = send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    return target, session


def navigate(session, url):
    send("Page.navigate", {"url": url}, session)


try:
    step("a tab in a new window becomes an activity")
    tab, session = open_tab(f"{site}/one.html", newWindow=True)
    first = wait_for("the tab's page recorded", the_page(f"{site}/one.html"))
    wait_for("its title", lambda: the_page(f"{site}/one.html")().get("title") == "Page One")
    first = the_page(f"{site}/one.html")()
    if first["type"] != "org.baton.web.page" or first["target_content_id"] != f"{site}/one.html":
        fail(f"the activity is not a web page's: {first}")

    step("scrolling is carried in the payload")
    evaluate(session, "window.scrollTo(0, 1500)")
    wait_for("the scroll position", lambda: json.loads(the_page(f"{site}/one.html")()["payload"]).get("scroll") == 1500)

    step("navigating updates the same activity")
    navigate(session, f"{site}/two.html")
    second = wait_for("the new page recorded", the_page(f"{site}/two.html"))
    wait_for("its title", lambda: the_page(f"{site}/two.html")()["title"] == "Page Two")
    if second["id"] != first["id"] or len(pages()) != 1:
        fail(f"navigating made another activity: {pages()}")

    # The options page, in a window of its own: it sets the sites never recorded, and opens a
    # private window as a user does (the extension's windows.create, as Ctrl+Shift+N would).
    options_tab, options_session = open_tab(f"chrome-extension://{EXTENSION_ID}/options.html", newWindow=True)
    wait_for("the options page", lambda: evaluate(options_session, "document.getElementById('save') !== null")["result"].get("value"))
    send("Target.activateTarget", {"targetId": tab})

    step("a private window records nothing")
    evaluate(options_session, f"chrome.windows.create({{incognito: true, url: '{site}/secret.html'}}).then(() => true)")
    wait_for("the private window's page loaded", lambda: any(
        target["url"].endswith("/secret.html") and target["title"] == "Private page" for target in send("Target.getTargets")["targetInfos"]))
    # A barrier: the normal tab's next page is recorded after anything the private one caused.
    navigate(session, f"{site}/one.html?after-private")
    wait_for("the page after the private one", the_page(f"{site}/one.html?after-private"))
    if any("secret" in page["webpage_url"] for page in pages()):
        fail(f"the private window's page was recorded: {pages()}")

    step("a site the user lists in the options is not recorded")
    evaluate(options_session, "document.getElementById('sites').value = 'localhost'; document.getElementById('save').click()")
    wait_for("the sites saved", lambda: evaluate(options_session, "document.getElementById('saved').textContent")["result"].get("value") == "Saved.")
    navigate(session, f"http://localhost:{port}/one.html")
    wait_for("the listed site's page not recorded (the tab's activity ended)", lambda: pages() == [])
    navigate(session, f"{site}/two.html?again")
    wait_for("a page of another site recorded again", the_page(f"{site}/two.html?again"))

    step("another tab chosen in the window: the first one's activity ends")
    other = evaluate(options_session, f"""chrome.tabs.query({{}})
        .then((tabs) => tabs.find((tab) => tab.url === '{site}/two.html?again'))
        .then((tab) => chrome.tabs.create({{windowId: tab.windowId, url: '{site}/one.html?other', active: true}}))
        .then((tab) => tab.id)""")["result"]["value"]
    wait_for("only the chosen tab's page", lambda: [page["webpage_url"] for page in pages()] == [f"{site}/one.html?other"])

    step("closing the tab ends its activity")
    evaluate(options_session, f"chrome.tabs.remove({other}).then(() => true)")
    wait_for("the first tab's page again, its tab active again", lambda: [page["webpage_url"] for page in pages()] == [f"{site}/two.html?again"])
    send("Target.closeTarget", {"targetId": tab})
    send("Target.closeTarget", {"targetId": options_tab})
    wait_for("no page left once the tabs are closed", lambda: pages() == [])

    history = [dict(entry) for entry in check.archive.History(dbus.Dictionary({}, signature="ss"))]
    if any("secret" in entry.get("webpage_url", "") or "localhost" in entry.get("webpage_url", "") for entry in history):
        fail(f"the history holds a page that was never to be recorded: {history}")
    step("passed")
finally:
    chromium.terminate()
    try:
        chromium.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(chromium.pid, 9)
