"""What browser-check.py (Chromium) and firefox-check.py (Firefox) share: the local site their
pages come from, the pages batond has recorded, and waiting for a condition with a deadline."""
import http.server
import sys
import threading
import time

import dbus


def serve(pages):
    """Serves `pages` ({path: html}) on 127.0.0.1 from a thread; returns the site's address."""

    class Pages(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = pages.get(self.path.split("?")[0])
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write((body or "not here").encode())

        def log_message(self, *arguments):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


class Check:
    """One check's reporting, named `name` in what it prints; `log` is the browser's log file,
    named when a condition does not come."""

    def __init__(self, name, log):
        self.name, self.log = name, log
        bus = dbus.SessionBus()
        root = bus.get_object("org.baton.Handoff1", "/org/baton/Handoff1")
        self.activities = dbus.Interface(root, "org.baton.Handoff1.Activities")
        self.archive = dbus.Interface(root, "org.baton.Handoff1.Archive")

    def step(self, message):
        print(f"{self.name}: {message}", flush=True)

    def fail(self, message):
        print(f"FAILED: {message}", flush=True)
        sys.exit(1)

    def pages(self):
        """The web pages batond holds now."""
        return [dict(page) for page in self.activities.List(dbus.Dictionary({"app_id": "org.baton.Web"}, signature="ss"))]

    def wait_for(self, what, condition, seconds=30):
        """`condition()`'s first true result within `seconds`; else fails, saying what was recorded."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            result = condition()
            if result:
                return result
            time.sleep(0.1)
        self.fail(f"{what} within {seconds} s; the pages recorded: {self.pages()}; the browser's log: {self.log}")
