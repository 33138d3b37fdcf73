#!/usr/bin/env python3
"""Two real Syncthing instances keeping one folder the same between two paths, on loopback
only: run inside a network namespace of the test's own (`unshare -n`), where only `lo` is up.

    syncthing-pair.py WORKDIR FOLDER_A FOLDER_B

Prints `ready` once the two are connected and share the folder (watching it, with a 1 s
delay), then keeps them running until it is killed (they die with it). Syncthing's own output goes to WORKDIR/a.log and WORKDIR/b.log.
"""
import ctypes
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

workdir, folder_a, folder_b = sys.argv[1:4]
libc = ctypes.CDLL("libc.so.6", use_errno=True)
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)

instances = []
for name, folder, port, gui in (("a", folder_a, 22001, 8384), ("b", folder_b, 22002, 8385)):
    home = os.path.join(workdir, name)
    generated = subprocess.run(["syncthing", "generate", "--home=" + home, "--no-default-folder", "--skip-port-probing"],
                               check=True, capture_output=True, text=True)
    device = re.search(r"[A-Z0-9]{7}(?:-[A-Z0-9]{7}){7}", generated.stdout + generated.stderr).group(0)
    path = os.path.join(home, "config.xml")
    config = open(path).read()
    # Everything on loopback, nothing announced, relayed, reported or upgraded.
    for pattern, value in ((r"<listenAddress>[^<]*</listenAddress>", f"<listenAddress>tcp://127.0.0.1:{port}</listenAddress>"),
                           (r"<globalAnnounceEnabled>true", "<globalAnnounceEnabled>false"),
                           (r"<localAnnounceEnabled>true", "<localAnnounceEnabled>false"),
                           (r"<relaysEnabled>true", "<relaysEnabled>false"),
                           (r"<natEnabled>true", "<natEnabled>false"),
                           (r"<crashReportingEnabled>true", "<crashReportingEnabled>false"),
                           (r"<startBrowser>true", "<startBrowser>false"),
                           (r"<urAccepted>[-0-9]*</urAccepted>", "<urAccepted>-1</urAccepted>"),
                           (r"<autoUpgradeIntervalH>[0-9]*</autoUpgradeIntervalH>", "<autoUpgradeIntervalH>0</autoUpgradeIntervalH>"),
                           # A dial that fails (the other not listening yet) is retried in 1 s, not 60.
                           (r"<reconnectionIntervalS>[0-9]*</reconnectionIntervalS>", "<reconnectionIntervalS>1</reconnectionIntervalS>")):
        config = re.sub(pattern, value, config)
    open(path, "w").write(config)
    key = re.search(r"<apikey>([^<]+)</apikey>", config).group(1)
    log = open(os.path.join(workdir, name + ".log"), "w")
    process = subprocess.Popen(["syncthing", "serve", "--home=" + home, "--no-browser", "--no-restart", "--no-upgrade",
                                f"--gui-address=http://127.0.0.1:{gui}"], stdout=log, stderr=subprocess.STDOUT,
                               # Without its monitor process; and as Syncthing leads a process group of its
                               # own, it is killed when this script dies (PR_SET_PDEATHSIG), however it dies.
                               env=dict(os.environ, STMONITORED="1"), preexec_fn=lambda: libc.prctl(1, 9))
    instances.append({"device": device, "folder": folder, "port": port, "gui": gui, "key": key, "process": process, "name": name})


def rest(instance, method, path, body=None):
    request = urllib.request.Request(f"http://127.0.0.1:{instance['gui']}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"X-API-Key": instance["key"], "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as reply:
        text = reply.read()
        return json.loads(text) if text else None


def until(what, condition, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"syncthing-pair: timed out waiting for {what}")


for instance in instances:
    until(f"{instance['name']}'s REST API", lambda: rest(instance, "GET", "/rest/system/ping") is not None)
a, b = instances
# Only b dials (a knows no address of b's, with discovery off): when both dialled at once, both
# connections sometimes stalled in the Hello exchange until its 20 s timeout, and again (1.19;
# 2 of 18 runs took 25 and 59 s instead of 4.6).
for this, other, addresses in ((a, b, ["dynamic"]), (b, a, [f"tcp://127.0.0.1:{a['port']}"])):
    rest(this, "POST", "/rest/config/devices", {"deviceID": other["device"], "name": other["name"], "addresses": addresses})
for instance in instances:
    rest(instance, "POST", "/rest/config/folders",
         {"id": "baton", "label": "baton", "path": instance["folder"], "type": "sendreceive",
          "devices": [{"deviceID": a["device"]}, {"deviceID": b["device"]}],
          "fsWatcherEnabled": True, "fsWatcherDelayS": 1, "rescanIntervalS": 3600})
until("the two to connect", lambda: rest(a, "GET", "/rest/system/connections")["connections"][b["device"]]["connected"])
for instance in instances:
    until(f"{instance['name']}'s folder to be idle", lambda: rest(instance, "GET", "/rest/db/status?folder=baton")["state"] == "idle")
print("ready", flush=True)
for instance in instances:
    instance["process"].wait()
sys.exit("syncthing-pair: an instance ended")
