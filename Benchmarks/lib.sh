# Shared by the benchmark scripts (sourced, not run).

# need COMMAND PACKAGE: stops with the package to install when COMMAND is missing.
need() { command -v "$1" >/dev/null || { echo "${0##*/}: $1 is missing; run: apt-get install $2" >&2; exit 1; }; }

# as_postgres COMMAND…: runs COMMAND as the postgres user when root (PostgreSQL refuses to run as root).
as_postgres() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# start_private_bus DIR: starts a private session dbus-daemon listening in DIR, exports
# DBUS_SESSION_BUS_ADDRESS for it and sets bus_pid.
start_private_bus() {
    local dir=$1
    cat > "$dir/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$dir/bus</listen>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
CONF
    # The pid goes through a file: inside $(…) the forked daemon stalls on the pipe.
    dbus-daemon --config-file="$dir/bus.conf" --fork --print-pid=3 3>"$dir/bus.pid"
    bus_pid=$(cat "$dir/bus.pid")
    export DBUS_SESSION_BUS_ADDRESS="unix:path=$dir/bus"
}

# stop_all: kills the processes in the array pids, waits for those this shell started
# (callgrind writes its last dump as it exits), then removes $work. For `trap stop_all EXIT`.
stop_all() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}

# settle PID: waits (up to 10 s) until the process has used no CPU for 200 ms, so that work
# left over from one server's run (Zeitgeist indexes inserted events after replying, batond
# checkpoints) does not slow the next server's measurement on these two cores.
settle() {
    local pid=$1 before after
    for _ in $(seq 50); do
        before=$(cpu_ticks "$pid")
        sleep 0.2
        after=$(cpu_ticks "$pid")
        [ "$before" = "$after" ] && return 0
    done
    echo "${0##*/}: process $pid kept using CPU for 10 s" >&2
}

# cpu_ticks PID: the process's user + kernel CPU time so far, threads that ended included, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
