# Shared by make-v20 and mixed-versions: machines, each with its own home, session bus and batond,
# and a PostgreSQL cluster of the script's own. Source it after setting `here` (the repository) and
# `me` (the script's name, for its messages); it removes everything it made when the script exits.
T="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    [ -n "${PGDATA:-}" ] && runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$PGDATA" -m immediate stop >/dev/null 2>&1 || true
    [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT

# A machine: its own home, XDG directories, session bus and the batond of BIN-DIR (the programs
# built together: batond, baton, hawk-notes). `on NAME CMD…` runs there.
machine() {
    local name=$1 dir=$T/$1
    mkdir -p "$dir"
    (cd "$2" && pwd) >"$dir/bin"
    mkdir -p "$dir/home" "$dir/data" "$dir/config" "$dir/state" "$dir/rt"
    chmod 700 "$dir/rt" "$dir/state"
    cat >"$dir/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:path=$dir/bus</listen>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>
EOF
    local pid
    pid=$(dbus-daemon --config-file="$dir/bus.conf" --print-pid=1 --fork)
    pids+=("$pid")
    on "$name" "$(bin_of "$name")/batond" --database "$dir/state/baton/baton.sqlite" 2>>"$dir/batond.log" &
    pids+=($!)
    echo $! >"$dir/batond.pid"
    until on "$name" "$(bin_of "$name")/baton" status >/dev/null 2>&1; do sleep 0.1; done
}
# In the background (`on NAME CMD &`), `$!` is then CMD's own pid: the shell forked for it execs env, env execs CMD.
exec_() { if [ "$BASH_SUBSHELL" -gt 0 ]; then exec "$@"; else "$@"; fi; }
on() {
    local dir=$T/$1; shift
    exec_ env HOME="$dir/home" XDG_DATA_HOME="$dir/data" XDG_CONFIG_HOME="$dir/config" XDG_STATE_HOME="$dir/state" \
        XDG_RUNTIME_DIR="$dir/rt" DBUS_SESSION_BUS_ADDRESS="unix:path=$dir/bus" "$@"
}
bin_of() { cat "$T/$1/bin"; }
baton() { local name=$1; shift; on "$name" "$(bin_of "$name")/baton" "$@"; }
call() { local name=$1; shift; on "$name" gdbus call --session --dest org.baton.Handoff1 "$@"; }
# Stops batond on machine $1 with signal $2 (TERM: a clean stop, which empties the WAL into the file).
stop_batond() { kill "-${2:-TERM}" "$(cat "$T/$1/batond.pid")"; while kill -0 "$(cat "$T/$1/batond.pid")" 2>/dev/null; do sleep 0.1; done; }
# Waits (at most 20 s) until `baton NAME ARGS…` prints something matching PATTERN.
wait_for() {
    local name=$1 pattern=$2; shift 2
    for _ in $(seq 200); do baton "$name" "$@" 2>/dev/null | grep -q -- "$pattern" && return; sleep 0.1; done
    echo "$me: on $name, 'baton $*' never showed '$pattern'" >&2
    baton "$name" "$@" >&2 || true
    exit 1
}

# A PostgreSQL cluster of the script's own, as its superuser through PG* variables, with Baton's schema.
start_postgres() {
    export PGDATA=$T/pg
    mkdir -p "$PGDATA" && chown postgres "$T" "$PGDATA"
    chmod 755 "$T"
    runuser -u postgres -- /usr/lib/postgresql/15/bin/initdb -D "$PGDATA" -A trust >/dev/null
    local port=$((20000 + RANDOM % 20000))
    runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$PGDATA" -o "-k $T -c listen_addresses=127.0.0.1 -p $port" -w start >/dev/null
    export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=postgres
    "$here/scripts/sync-server-setup" init >/dev/null
}
