"""The soak test's clients and supervisor; scripts/soak starts the bus and runs this.

Clients use python3-dbus (a client we did not write), one bus connection per thread:
three writers (Advertise, Update, Invalidate with request_id; each keeps 200 live), a
scene client (OpenScene, Set, GetAll, CloseScene; 200 open), a reader (List, Search) and
a client that connects afresh for every call. A write whose reply is lost while batond is down is sent again with the same
request_id until it is answered; only then does it count as acknowledged.

With --sync-url, batond syncs through a PostgreSQL server to a partner batond on a bus of its
own (--partner-*), killed too, half a period after each kill of the first; with
--server-stop and --server-start (shell commands), the server is also stopped for 10 s a
quarter of a period after each kill. At the end the partner must hold exactly the first's
activities, and its memory and files are sampled too.
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
    def __init__(self, address=None):
        self.bus, self.address = None, address or os.environ["DBUS_SESSION_BUS_ADDRESS"]

    def connect(self):
        while not stop.is_set():
            try:
                self.bus = dbus.bus.BusConnection(self.address)
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
    def __init__(self, batond, database, log, address):
        self.batond, self.database, self.log, self.address = batond, database, log, address
        self.process, self.instance = None, 0

    def start(self):
        self.instance += 1
        log = open(self.log, "a")
        self.process = subprocess.Popen([self.batond, "--database", self.database], stderr=log,
                                        env=dict(os.environ, DBUS_SESSION_BUS_ADDRESS=self.address))
        bus = dbus.bus.BusConnection(self.address)
        started = time.monotonic()
        while not bus.name_has_owner(NAME):
            if self.process.poll() is not None:
                sys.exit(f"batond exited with {self.process.returncode} at start; see {self.log}")
            time.sleep(0.01)
        bus.close()
        return time.monotonic() - started

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        return self.start()

    def sample(self):
        pid = self.process.pid
        rss = next((line.split()[1] for line in open(f"/proc/{pid}/status") if line.startswith("VmRSS")), "?")
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        wal = os.path.getsize(self.database + "-wal") if os.path.exists(self.database + "-wal") else 0
        return int(rss), fds, wal


def outbox(client):
    """The Sync interface's Outbox: changes not on the server yet (None while batond is away)."""
    reply = client.call("org.freedesktop.DBus.Properties", "Get", "ss", (NAME + ".Sync", "Outbox"))
    return None if reply is None else int(reply)


def remote_ids(database):
    """The other devices' activities a database holds."""
    connection = sqlite3.connect(database)
    try:
        return {row[0] for row in connection.execute("SELECT id FROM activity WHERE device_id <> ''")}
    finally:
        connection.close()


def main():
    parser = argparse.ArgumentParser()
    for option in ("--batond", "--database", "--log"):
        parser.add_argument(option, required=True)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--kill-every", type=float, default=2)
    for option in ("--sync-url", "--partner-url", "--partner-bus", "--partner-database", "--partner-log",
                   "--server-stop", "--server-start"):
        parser.add_argument(option)
    args = parser.parse_args()

    daemon = Daemon(args.batond, args.database, args.log, os.environ["DBUS_SESSION_BUS_ADDRESS"])
    daemon.start()
    setup = Client()
    partner = None
    if args.sync_url:
        words = setup.call(NAME + ".Sync", "Init", "sa{ss}", (args.sync_url, {"device_name": "soak"}), retry=True)
        partner = Daemon(args.batond, args.partner_database, args.partner_log, args.partner_bus)
        partner.start()
        joined = Client(args.partner_bus).call(NAME + ".Sync", "Join", "ssa{ss}",
                                               (args.partner_url, str(words), {"device_name": "partner"}), retry=True)
        if joined is None:
            sys.exit(f"the partner could not join; see {args.partner_log}")
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
    next_partner_kill = start + args.kill_every * 30
    next_server_stop = start + args.kill_every * 15 if args.server_stop else end
    server_back = None
    samples, partner_samples = collections.defaultdict(list), collections.defaultdict(list)
    print(f"{'time':>6} {'instance':>8} {'calls':>8} {'RSS KiB':>8} {'fds':>4} {'WAL KiB':>8}  errors"
          + ("  | partner: instance, RSS KiB, fds" if partner else ""))
    while time.monotonic() < end:
        time.sleep(min(10, max(0, end - time.monotonic())))
        rss, fds, wal = daemon.sample()
        samples[daemon.instance].append((rss, fds))
        with lock:
            total, named = sum(answered.values()), dict(errors)
        line = f"{time.monotonic() - start:6.0f} {daemon.instance:8} {total:8} {rss:8} {fds:4} {wal // 1024:8}  {named}"
        if partner:
            partner_rss, partner_fds, _ = partner.sample()
            partner_samples[partner.instance].append((partner_rss, partner_fds))
            line += f"  | {partner.instance} {partner_rss} {partner_fds}"
        print(line, flush=True)
        if time.monotonic() >= next_kill and time.monotonic() < end - 20:
            print(f"       killed instance {daemon.instance} (SIGKILL); back in {daemon.kill():.2f} s", flush=True)
            next_kill += args.kill_every * 60
        if partner and time.monotonic() >= next_partner_kill and time.monotonic() < end - 20:
            print(f"       killed the partner's instance {partner.instance} (SIGKILL); back in {partner.kill():.2f} s", flush=True)
            next_partner_kill += args.kill_every * 60
        if server_back is not None and time.monotonic() >= server_back:
            subprocess.run(args.server_start, shell=True, check=True)
            print("       the sync server is back", flush=True)
            server_back = None
        elif server_back is None and time.monotonic() >= next_server_stop and time.monotonic() < end - 40:
            subprocess.run(args.server_stop, shell=True, check=True)
            print("       stopped the sync server for 10 s", flush=True)
            server_back = time.monotonic() + 10
            next_server_stop += args.kill_every * 60

    stop.set()
    for thread in threads:
        thread.join()
    if server_back is not None:
        subprocess.run(args.server_start, shell=True, check=True)
    if partner:
        # Everything sent, then everything applied on the partner (or the difference reported below).
        stop.clear()
        deadline = time.monotonic() + 60
        while outbox(setup) != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        waiting = outbox(setup)
        if waiting != 0:
            problems.append(f"{waiting} changes still waiting to be sent a minute after the clients stopped")
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
    if partner:
        deadline = time.monotonic() + 60
        while remote_ids(args.partner_database) != stored_ids and time.monotonic() < deadline:
            time.sleep(0.2)
        held = remote_ids(args.partner_database)
        partner.process.send_signal(signal.SIGTERM)
        partner_status = partner.process.wait()
        for instance, points in sorted(partner_samples.items()):
            print(f"partner instance {instance}: RSS {points[0][0]} -> {points[-1][0]} KiB, open files {points[0][1]} -> {points[-1][1]}"
                  f" ({len(points)} samples)")
        missing, extra = stored_ids - held, held - stored_ids
        print(f"the partner holds {len(held)} of its {len(stored_ids)} activities; missing {len(missing)},"
              f" extra {len(extra)} ({len(extra & invalidated)} of them invalidated); its exit status at SIGTERM: {partner_status}")
        if missing or extra or partner_status != 0:
            problems.append(f"the partner differs: missing {len(missing)}, extra {len(extra)}, exit status {partner_status}")
    print(f"integrity_check: {integrity}; batond's exit status at SIGTERM: {status}")
    failed = errors["org.freedesktop.DBus.Error.Failed"]
    print(f"Failed answers: {failed}; problems: {problems[:5]}")
    ok = not problems and not lost and not resurrected and not lost_values and integrity == "ok" and status == 0
    print("soak: " + ("passed" if ok else "FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
