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

# start_xvfb DIR: starts an Xvfb on a display number it picks itself (-displayfd: a fixed number
# can collide with a stale socket in /tmp/.X11-unix), adds it to pids and sets x_display (":N").
start_xvfb() {
    local dir=$1
    Xvfb -displayfd 3 -screen 0 800x600x24 -nolisten tcp 3>"$dir/xvfb.display" 2>/dev/null & pids+=($!)
    for _ in $(seq 200); do grep -q . "$dir/xvfb.display" 2>/dev/null && break; sleep 0.05; done
    x_display=":$(head -1 "$dir/xvfb.display")"
    [ "$x_display" != ":" ] || { echo "${0##*/}: Xvfb named no display" >&2; exit 1; }
}

# start_headless_sway DIR: starts sway on wlroots' headless backend with DIR as its runtime
# directory (its display: DIR/wayland-1), as user 65534 when root (sway refuses root; DIR's
# parents must let that user through), and adds it to pids.
start_headless_sway() {
    local dir=$1
    mkdir -m 700 "$dir"
    printf 'output HEADLESS-1 resolution 800x600\nxwayland disable\n' > "$dir/config"
    local as_sway=()
    if [ "$(id -u)" -eq 0 ]; then chown -R 65534:65534 "$dir"; as_sway=(setpriv --reuid=65534 --regid=65534 --clear-groups); fi
    XDG_RUNTIME_DIR=$dir WLR_BACKENDS=headless WLR_LIBINPUT_NO_DEVICES=1 WLR_RENDERER=pixman \
        "${as_sway[@]}" sway -c "$dir/config" >"$dir.log" 2>&1 & pids+=($!)
    for _ in $(seq 200); do [ -S "$dir/wayland-1" ] && break; sleep 0.05; done
    [ -S "$dir/wayland-1" ] || { echo "${0##*/}: sway did not start:" >&2; cat "$dir.log" >&2; exit 1; }
}
