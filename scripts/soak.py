"""The soak test's clients and supervisor; scripts/soak starts the bus and runs this.

Clients use python3-dbus (a client we did not write), one bus connection per thread:
three writers (Advertise, Update, Invalidate with request_id; each keeps 200 live), a
scene client (OpenScene, Set, GetAll, CloseScene; 200 open), a reader (List, Search) and
a client that connects afresh for every call. A write whose reply is lost while batond is down is sent again with the same
request_id until it is answered; only then does it count as acknowledged.
"""
import argparse
import collections
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid

import dbus

NAME, ROOT = "org.baton.Handoff1", "/org/baton/Handoff1"
ACTIVITIES, SCENES, SCENE = NAME + ".Activities", NAME + ".Scenes", NAME + ".Scene"
TYPE, APP = "org.baton.soak.note", "org.baton.soak"
# Answers while batond is down or restarting: the call is sent again.
DOWN = {"org.freedesktop.DBus.Error." + n for n in ("NoReply", "ServiceUnknown", "NameHasNoOwner", "Disconnected", "Timeout")}

lock = threading.Lock()
answered = collections.Counter()  # calls answered, by method
errors = collections.Counter()    # error replies, by name
problems = []                     # what must not happen: Failed, mismatches
stop = threading.Event()


def note(counter, key):
    with lock:
        counter[key] += 1


class Client:
    def __init__(self):
        self.bus = None

    def connect(self):
        while not stop.is_set():
            try:
                self.bus = dbus.bus.BusConnection(os.environ["DBUS_SESSION_BUS_ADDRESS"])
                return
            except dbus.exceptions.DBusException:
                time.sleep(0.05)

    def call(self, interface, member, signature, args, path=ROOT, retry=False, gone_ok=False):
        """One call; with `retry`, sent again while batond is down. Returns the reply (True when it
        is empty), "gone" for NotFound when `gone_ok`, or None for an error."""
        while not stop.is_set():
            if self.bus is None:
                self.connect()
            try:
                reply = self.bus.call_blocking(NAME, path, interface, member, signature, args, timeout=30)
                note(answered, member)
                # An empty reply is a success too.
                return True if reply is None else reply
            except dbus.exceptions.DBusException as error:
                name = error.get_dbus_name()
                note(errors, name)
                if name == "org.freedesktop.DBus.Error.Failed":
                    with lock:
                        problems.append(f"{member}: {error}")
                if name in DOWN:
                    if name == "org.freedesktop.DBus.Error.Disconnected":
                        self.bus = None
                    if retry:
                        time.sleep(0.05)
                        continue
                    return None
                if gone_ok and name.endswith(".NotFound"):
                    return "gone"
                return None
        return None


def writer(number, acknowledged, invalidated):
    client, live = Client(), []
    while not stop.is_set():
        request = str(uuid.uuid4())
        options = {"request_id": request, "keywords": f"soak,w{number}", "eligible_for_search": "true"}
        reply = client.call(ACTIVITIES, "Advertise", "sssa{ss}",
                            (TYPE, f"note {number} {request[:8]}", '{"n": 1}', options), retry=True)
        if reply is None:
            continue
        activity = str(reply)
        with lock:
            acknowledged.add(activity)
        live.append(activity)
        target = random.choice(live)
        client.call(ACTIVITIES, "Update", "ssa{ss}", (target, '{"n": 2}', {"request_id": str(uuid.uuid4())}), retry=True)
        if len(live) > 200:
            oldest = live.pop(0)
            # A retry after a lost reply finds it gone: that is the first call's success.
            if client.call(ACTIVITIES, "Invalidate", "s", (oldest,), retry=True, gone_ok=True) is not None:
                with lock:
                    acknowledged.discard(oldest)
                    invalidated.add(oldest)


def scenes(stored):
    # At most 200 scenes stay open (the oldest is closed), so that memory reaches a steady state.
    client, round_, open_ = Client(), 0, collections.deque()
    while not stop.is_set():
        round_ += 1
        path = client.call(SCENES, "OpenScene", "sa{ss}", (APP, {"request_id": str(uuid.uuid4())}), retry=True)
        if path is None:
            continue
        value = f"tab {round_}"
        if client.call(SCENE, "Set", "sv", ("ContentView.CurrentTab", value), path=path, retry=True) is None:
            continue
        with lock:
            stored[str(path)] = value
        values = client.call(SCENE, "GetAll", "", (), path=path, retry=True)
        if values is not None and values.get("ContentView.CurrentTab") != value:
            with lock:
                problems.append(f"GetAll of {path} gave {values.get('ContentView.CurrentTab')!r}, not {value!r}")
        open_.append(path)
        if len(open_) > 200:
            oldest = open_.popleft()
            if client.call(SCENES, "CloseScene", "o", (oldest,), retry=True, gone_ok=True) is not None:
                with lock:
                    stored.pop(str(oldest), None)


def reader():
    client = Client()
    while not stop.is_set():
        client.call(ACTIVITIES, "List", "a{ss}", ({"limit": "20"},))
        client.call(ACTIVITIES, "Search", "su", ("soak", 10))
        time.sleep(0.005)


def connect_per_call():
    while not stop.is_set():
        client = Client()
        client.call(ACTIVITIES, "List", "a{ss}", ({"limit": "5"},))
        if client.bus is not None:
            client.bus.close()
        time.sleep(0.02)


class Daemon:
    def __init__(self, args):
        self.args, self.process, self.instance = args, None, 0

    def start(self):
        self.instance += 1
        log = open(self.args.log, "a")
        self.process = subprocess.Popen([self.args.batond, "--database", self.args.database], stderr=log)
        bus = dbus.bus.BusConnection(os.environ["DBUS_SESSION_BUS_ADDRESS"])
        started = time.monotonic()
        while not bus.name_has_owner(NAME):
            if self.process.poll() is not None:
                sys.exit(f"batond exited with {self.process.returncode} at start; see {self.args.log}")
            time.sleep(0.01)
        bus.close()
        return time.monotonic() - started

    def sample(self):
        pid = self.process.pid
        rss = next((line.split()[1] for line in open(f"/proc/{pid}/status") if line.startswith("VmRSS")), "?")
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        wal = os.path.getsize(self.args.database + "-wal") if os.path.exists(self.args.database + "-wal") else 0
        return int(rss), fds, wal


def main():
    parser = argparse.ArgumentParser()
    for option in ("--batond", "--database", "--log"):
        parser.add_argument(option, required=True)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--kill-every", type=float, default=2)
    args = parser.parse_args()

    daemon = Daemon(args)
    daemon.start()
    setup = Client()
    setup.call(NAME + ".Registry", "RegisterActivityType", "ssa{ss}", (TYPE, APP, {"title": "Soak note"}), retry=True)

    acknowledged, invalidated, stored = set(), set(), {}
    threads = [threading.Thread(target=writer, args=(n, acknowledged, invalidated)) for n in range(3)]
    threads += [threading.Thread(target=scenes, args=(stored,)), threading.Thread(target=reader),
                threading.Thread(target=connect_per_call)]
    for thread in threads:
        thread.start()

    start = time.monotonic()
    end = start + args.minutes * 60
    next_kill = start + args.kill_every * 60
    samples = collections.defaultdict(list)
    print(f"{'time':>6} {'instance':>8} {'calls':>8} {'RSS KiB':>8} {'fds':>4} {'WAL KiB':>8}  errors")
    while time.monotonic() < end:
        time.sleep(min(10, max(0, end - time.monotonic())))
        rss, fds, wal = daemon.sample()
        samples[daemon.instance].append((rss, fds))
        with lock:
            total, named = sum(answered.values()), dict(errors)
        print(f"{time.monotonic() - start:6.0f} {daemon.instance:8} {total:8} {rss:8} {fds:4} {wal // 1024:8}  {named}", flush=True)
        if time.monotonic() >= next_kill and time.monotonic() < end - 20:
            daemon.process.send_signal(signal.SIGKILL)
            daemon.process.wait()
            print(f"       killed instance {daemon.instance} (SIGKILL); back in {daemon.start():.2f} s", flush=True)
            next_kill += args.kill_every * 60

    stop.set()
    for thread in threads:
        thread.join()
    daemon.process.send_signal(signal.SIGTERM)
    status = daemon.process.wait()

    database = sqlite3.connect(args.database)
    integrity = database.execute("PRAGMA integrity_check").fetchone()[0]
    stored_ids = {row[0] for row in database.execute("SELECT id FROM activity")}
    values = dict(database.execute("SELECT scene_id, value FROM scene_storage WHERE key = 'ContentView.CurrentTab'"))
    lost = acknowledged - stored_ids
    resurrected = invalidated & stored_ids
    lost_values = [path for path, value in stored.items()
                   if values.get(path.rsplit("/", 1)[1].replace("_", "-")) != value]

    print()
    print(f"calls answered: {sum(answered.values())} {dict(answered)}")
    print(f"errors by name: {dict(errors)}")
    for instance, points in sorted(samples.items()):
        print(f"instance {instance}: RSS {points[0][0]} -> {points[-1][0]} KiB, open files {points[0][1]} -> {points[-1][1]}"
              f" ({len(points)} samples)")
    print(f"acknowledged activities: {len(acknowledged)} live, {len(invalidated)} invalidated; lost: {len(lost)};"
          f" invalidated but stored: {len(resurrected)}")
    print(f"scene values acknowledged: {len(stored)}; lost: {len(lost_values)}")
    print(f"integrity_check: {integrity}; batond's exit status at SIGTERM: {status}")
    failed = errors["org.freedesktop.DBus.Error.Failed"]
    print(f"Failed answers: {failed}; problems: {problems[:5]}")
    ok = not problems and not lost and not resurrected and not lost_values and integrity == "ok" and status == 0
    print("soak: " + ("passed" if ok else "FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
