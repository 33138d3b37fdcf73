# Sourced by systemd-user-test.sh and package-test.sh, inside a private mount namespace
# (unshare -m) with T, XDG_RUNTIME_DIR and HOME set and `say` defined: a real systemd --user
# (shared/FIELD-NOTES.md) whose session bus is $1, dbus-daemon (Debian's default) or dbus-broker.

# Moves this shell into a cgroup of its own in every hierarchy, so that the manager it starts
# manages only its own processes (FIELD-NOTES: one started in the root cgroup takes in every
# process of the machine; two started in the same cgroup stop each other's units, their buses
# included). On exit, what is left in it is killed and the cgroups removed.
own_cgroup() {
    own_cgroups=()
    local hierarchy here
    for hierarchy in /sys/fs/cgroup/*/ /sys/fs/cgroup; do
        [ -f "$hierarchy/cgroup.procs" ] || continue
        here=$hierarchy/baton-test-$$
        mkdir -p "$here" 2>/dev/null || continue
        # (cpuset's takes no process before its cpus are set: left out.)
        if echo $$ > "$here/cgroup.procs" 2>/dev/null; then own_cgroups+=("$here"); else rmdir "$here"; fi
    done
    trap leave_own_cgroup EXIT
}

leave_own_cgroup() {
    local here pid
    for here in "${own_cgroups[@]}"; do
        echo $$ > "$(dirname "$here")/cgroup.procs" 2>/dev/null
    done
    for here in "${own_cgroups[@]}"; do
        for pid in $(cat $(find "$here" -name cgroup.procs) 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    done
    for here in "${own_cgroups[@]}"; do
        for _ in $(seq 50); do
            find "$here" -depth -type d -exec rmdir {} + 2>/dev/null
            [ -d "$here" ] || break
            sleep 0.02
        done
    done
}

# Starts the manager and its bus and points DBUS_SESSION_BUS_ADDRESS at the bus. Sets `manager`
# (its pid) and, for dbus-broker, `journal` (the journal sink's). Says error=… and returns 1
# where the manager cannot run.
start_user_manager() {
    own_cgroup
    # The user manager runs where /run/systemd/system exists: only in this namespace.
    mount -t tmpfs tmpfs /run/systemd && mkdir /run/systemd/system || { say error "cannot mount /run/systemd"; return 1; }
    mkdir -p "$HOME/.config/systemd/user"
    # The bus: the unit dbus.socket starts, dbus.service, as a file of the user's own (a link
    # there would not do: installing dbus-broker aliases dbus.service to it in /etc, and an alias wins).
    case "$1" in
        dbus-daemon) cp /usr/lib/systemd/user/dbus.service "$HOME/.config/systemd/user/dbus.service" ;;
        dbus-broker)
            cp /usr/lib/systemd/user/dbus-broker.service "$HOME/.config/systemd/user/dbus.service"
            # dbus-broker's launcher logs to the journal and exits without its socket: a sink that keeps what it says.
            mkdir -p /run/systemd/journal
            /usr/bin/python3 -c '
import socket, sys
sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sink.bind("/run/systemd/journal/socket")
with open(sys.argv[1], "ab", buffering=0) as log:
    while True:
        log.write(sink.recv(65536).replace(b"\n", b" ") + b"\n")
' "$T/journal.log" &
            journal=$!
            for _ in $(seq 100); do [ -S /run/systemd/journal/socket ] && break; sleep 0.02; done ;;
        *) say error "no bus '$1'"; return 1 ;;
    esac
    /lib/systemd/systemd --user > "$T/manager.log" 2>&1 &
    manager=$!
    local state
    for _ in $(seq 200); do
        state=$(systemctl --user is-system-running 2>/dev/null)
        [ "$state" = running ] || [ "$state" = degraded ] && break
        sleep 0.05
    done
    systemctl --user start dbus.socket
    export DBUS_SESSION_BUS_ADDRESS=unix:path=$XDG_RUNTIME_DIR/bus
}
