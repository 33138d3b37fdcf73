#!/bin/bash
# Run by BatonServiceTests/SystemdUnitTests inside a private mount namespace (unshare -m): a real systemd --user
# with its D-Bus session bus, batond's unit and activation file installed into a temporary
# runtime directory, and the checks the test asserts on, printed as key=value lines.
# Usage: systemd-user-test.sh WORK_DIR BATOND UNIT_FILE BUS
# BUS is the user bus the manager starts: dbus-daemon (Debian's default) or dbus-broker.
set -u
T=$1; BATOND=$2; UNIT=$3; BUS=${4:-dbus-daemon}
export XDG_RUNTIME_DIR=$T/rt HOME=$T/home
mkdir -m 700 -p "$XDG_RUNTIME_DIR/systemd/user" "$XDG_RUNTIME_DIR/dbus-1/services" "$T/state" "$HOME/.config/systemd/user"
say() { echo "$1=$2"; }
# The manager's own start limit (5 starts in 10 s by default) shortened to 1 s, so that step 5
# proves the unit's limit with restarts 300 ms apart rather than 3 s (12 s more for each bus).
printf '[Manager]\nDefaultStartLimitIntervalSec=1s\n' > "$HOME/.config/systemd/user.conf"
. "$(dirname "$0")/user-manager.sh"
start_user_manager "$BUS" || exit 0
say manager "$(systemctl --user is-system-running 2>&1)"
say default_start_limit "$(systemctl --user show -p DefaultStartLimitIntervalUSec --value)"
busctl --user call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus GetId >/dev/null 2>&1
say bus "$(cat /proc/"$(systemctl --user show -p MainPID --value dbus.service)"/comm 2>/dev/null)"

# The shipped unit, run from the built batond on a database of the test's.
sed -e "s|^ExecStart=.*|ExecStart=$BATOND --database $T/state/baton.sqlite|" "$UNIT" > "$XDG_RUNTIME_DIR/systemd/user/batond.service"
printf '[D-BUS Service]\nName=org.baton.Handoff1\nExec=%s --database %s\nSystemdService=batond.service\n' \
    "$BATOND" "$T/state/baton.sqlite" > "$XDG_RUNTIME_DIR/dbus-1/services/org.baton.Handoff1.service"
# Its log in a file the test can read (there is no journal in this namespace).
mkdir -p "$XDG_RUNTIME_DIR/systemd/user/batond.service.d"
printf '[Service]\nStandardError=append:%s\n' "$T/batond.log" > "$XDG_RUNTIME_DIR/systemd/user/batond.service.d/log.conf"
systemctl --user daemon-reload
busctl --user call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus ReloadConfig >/dev/null 2>&1
say score "$(systemd-analyze security --user --offline=yes "$XDG_RUNTIME_DIR/systemd/user/batond.service" 2>/dev/null | awk '/Overall exposure level/ {print $(NF-2)}')"

# 1. systemctl --user start, under the unit's sandbox.
systemctl --user start batond
say started "$(systemctl --user is-active batond)"
pid=$(systemctl --user show -p MainPID --value batond)
say nonewprivs "$(awk '/^NoNewPrivs/ {print $2}' /proc/$pid/status)"
say seccomp "$(awk '/^Seccomp:/ {print $2}' /proc/$pid/status)"
# Type=dbus: the unit is active once batond owns its name; its status follows a moment later.
for _ in $(seq 100); do
    status=$(systemctl --user show -p StatusText --value batond)
    [ -n "$status" ] && break
    sleep 0.1
done
say status "$status"
# A unit that did not start has MainPID 0: every later step would act on nothing, or on
# process 0 (`kill -STOP 0` stops this whole process group). Stop here; the test fails on `started`.
case "$pid" in ''|0) say log_tail "$(tail -3 "$T/batond.log" 2>/dev/null | tr '\n' '|')"; kill $manager ${journal:-}; exit 0 ;; esac
busctl --user call org.baton.Handoff1 /org/baton/Handoff1 org.baton.Handoff1.Registry RegisterActivityType 'ssa{ss}' \
    com.example.notes.document com.example.notes 0 >/dev/null 2>&1 && say register ok || say register failed
id=$(busctl --user call org.baton.Handoff1 /org/baton/Handoff1 org.baton.Handoff1.Activities Advertise 'sssa{ss}' \
    com.example.notes.document "Chapter 3" '{"id":"c3"}' 0 2>&1 | cut -d'"' -f2)
say advertised "$id"
say get "$(busctl --user call org.baton.Handoff1 /org/baton/Handoff1 org.baton.Handoff1.Activities Get s "$id" 2>&1 | grep -c 'Chapter 3')"
# The whole contract through python3-dbus against this sandboxed instance, its handler calls included.
REPOSITORY=$(dirname "$(dirname "$UNIT")")
/usr/bin/python3 "$REPOSITORY/Tests/Scripts/contract-check.py" "$REPOSITORY/dbus/org.baton.Handoff1.xml" > "$T/contract-check.out" 2>&1
say contract_check "$(grep -c '^ok ' "$T/contract-check.out") ok, $(grep -c '^FAIL' "$T/contract-check.out") failed"
say contract_failures "$(grep -v '^ok ' "$T/contract-check.out" | tr '\n' '|')"

# 2. D-Bus activation through SystemdService=: stopped, then started by a call.
systemctl --user stop batond
say stopped "$(systemctl --user is-active batond)"
say activated_call "$(busctl --user call org.baton.Handoff1 /org/baton/Handoff1 org.baton.Handoff1.Activities Get s "$id" 2>&1 | grep -c 'Chapter 3')"
say activated "$(systemctl --user is-active batond)"

# 3. The watchdog: a batond that stops answering is killed and restarted (WatchdogSec shortened).
mkdir -p "$XDG_RUNTIME_DIR/systemd/user/batond.service.d"
# A stopped process ignores the watchdog's SIGABRT until systemd follows up with SIGKILL.
printf '[Service]\nWatchdogSec=2s\nRestartSec=100ms\nTimeoutAbortSec=1s\n' > "$XDG_RUNTIME_DIR/systemd/user/batond.service.d/watchdog.conf"
systemctl --user daemon-reload
systemctl --user restart batond
before=$(systemctl --user show -p MainPID --value batond)
case "$before" in ''|0) say watchdog_unit "not running after restart"; kill $manager ${journal:-}; exit 0 ;; esac
kill -STOP "$before"
result=
for _ in $(seq 400); do
    seen=$(systemctl --user show -p Result --value batond)
    [ "$seen" != success ] && result=$seen
    after=$(systemctl --user show -p MainPID --value batond)
    [ "$after" != "$before" ] && [ "$after" != 0 ] && [ "$(systemctl --user is-active batond)" = active ] && break
    sleep 0.05
done
say watchdog_restarted "$([ "$after" != "$before" ] && [ "$after" != 0 ] && echo yes || echo no)"
say watchdog_result "$result"
say restarts "$(systemctl --user show -p NRestarts --value batond)"
rm "$XDG_RUNTIME_DIR/systemd/user/batond.service.d/watchdog.conf"
systemctl --user daemon-reload
systemctl --user restart batond

# 4. systemctl --user stop during a burst of writes from several clients.
/usr/bin/python3 - "$T" <<'PY' &
import dbus, sys, threading
acked, lock, stop = [], threading.Lock(), threading.Event()
def burst(n):
    bus = dbus.bus.BusConnection(__import__("os").environ["DBUS_SESSION_BUS_ADDRESS"])
    for call in range(100000):
        # Once the stop has begun, no new calls: a call now would start batond again (activation).
        if __import__("os").path.exists(sys.argv[1] + "/stopping"):
            return
        title = f"burst {n} {call}"
        try:
            bus.call_blocking("org.baton.Handoff1", "/org/baton/Handoff1", "org.baton.Handoff1.Activities", "Advertise",
                              "sssa{ss}", ("com.example.notes.document", title, "{}", {}), timeout=20)
        except dbus.exceptions.DBusException as error:
            with lock: acked.append("ERROR " + error.get_dbus_name())
            return
        with lock: acked.append(title)
threads = [threading.Thread(target=burst, args=(n,)) for n in range(4)]
for t in threads: t.start()
for t in threads: t.join()
open(sys.argv[1] + "/acked", "w").write("\n".join(acked) + "\n")
PY
client=$!
SECONDS=0
for _ in $(seq 400); do
    [ "$(sqlite3 "$T/state/baton.sqlite" "SELECT COUNT(*) FROM activity WHERE title LIKE 'burst %'" 2>/dev/null)" -ge 100 ] 2>/dev/null && break
    sleep 0.05
done
say burst_seconds "$SECONDS"
say burst_before_stop "$(sqlite3 "$T/state/baton.sqlite" "SELECT COUNT(*) FROM activity WHERE title LIKE 'burst %'")"
touch "$T/stopping"
systemctl --user stop batond
say stop_status "$(systemctl --user show -p ExecMainStatus --value batond)"
wait $client
# A call sent just before "stopping" appeared can reach the bus after batond let go of its name:
# the bus then starts batond again (activation). Every call has its answer now: stopped for good.
systemctl --user stop batond
sqlite3 "$T/state/baton.sqlite" "SELECT title FROM activity WHERE title LIKE 'burst %'" | sort > "$T/stored"
grep '^burst ' "$T/acked" | sort > "$T/answered"
say burst_stored "$(wc -l < "$T/stored")"
say acked_not_stored "$(comm -13 "$T/stored" "$T/answered" | wc -l)"
say stored_not_acked "$(comm -23 "$T/stored" "$T/answered" | wc -l)"
say burst_errors "$(grep '^ERROR' "$T/acked" | sort | uniq -c | tr '\n' ';')"
say drain_timeouts "$(grep -c 'still in flight' "$T/batond.log")"
say log_tail "$(tail -3 "$T/batond.log" | tr '\n' '|')"
# 5. A batond that cannot start (its database in a directory others can write) stops being
#    retried after StartLimitBurst=5 failed starts within StartLimitIntervalSec=60. Restarts
#    300 ms apart never make 5 within the manager's 1 s window (set above): only the unit's own
#    limit stops them.
mkdir -m 1777 "$T/shared"
printf '[Service]\nExecStart=\nExecStart=%s --database %s\nRestartSec=300ms\n' "$BATOND" "$T/shared/baton.sqlite" \
    > "$XDG_RUNTIME_DIR/systemd/user/batond.service.d/broken.conf"
systemctl --user daemon-reload
systemctl --user reset-failed batond 2>/dev/null
systemctl --user start batond 2>/dev/null
# Settled once it is failed and no restart is pending (5 starts, 300 ms apart).
for _ in $(seq 500); do
    [ "$(systemctl --user is-active batond)" = failed ] && [ "$(grep -c 'other users can write to it' "$T/batond.log")" -ge 5 ] && break
    sleep 0.05
done
sleep 1   # a sixth start would come within RestartSec (300 ms)
say start_limit_state "$(systemctl --user is-active batond)"
say start_attempts "$(grep -c 'other users can write to it' "$T/batond.log")"
say start_limit_result "$(systemctl --user show -p Result --value batond)"
kill $manager ${journal:-}
