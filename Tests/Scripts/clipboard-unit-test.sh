#!/bin/bash
# Run by BatonSyncTests/ClipboardUnitTests inside a private mount namespace (unshare -m): a real
# systemd --user with its D-Bus session bus, batond's unit and the clipboard agent's unit
# (systemd/baton-clipboard.service) installed and enabled as scripts/install does, and a
# graphical session as sway's and GNOME's start theirs: a session target bound to
# graphical-session.target, after the display's variables are imported into the manager.
# Prints what it saw as key=value lines.
# Usage: clipboard-unit-test.sh WORK_DIR BATON BATOND BATOND_UNIT CLIPBOARD_UNIT
set -u
T=$1; BATON=$2; BATOND=$3; BATOND_UNIT=$4; CLIPBOARD_UNIT=$5
export XDG_RUNTIME_DIR=$T/rt HOME=$T/home
mkdir -m 700 -p "$XDG_RUNTIME_DIR/systemd/user" "$XDG_RUNTIME_DIR/dbus-1/services" "$T/state" "$HOME/.config/systemd/user"
say() { echo "$1=$2"; }
. "$(dirname "$0")/user-manager.sh"
start_user_manager dbus-daemon || exit 0
say manager "$(systemctl --user is-system-running 2>&1)"
units=$HOME/.config/systemd/user

# batond, started by the bus on first use, as installed.
sed -e "s|^ExecStart=.*|ExecStart=$BATOND --database $T/state/baton.sqlite|" "$BATOND_UNIT" > "$units/batond.service"
printf '[D-BUS Service]\nName=org.baton.Handoff1\nExec=%s --database %s\nSystemdService=batond.service\n' \
    "$BATOND" "$T/state/baton.sqlite" > "$XDG_RUNTIME_DIR/dbus-1/services/org.baton.Handoff1.service"
# The agent's unit as shipped, its program where this test has it, its messages in a file.
sed -e "s|^ExecStart=.*|ExecStart=$BATON clipboard-agent|" "$CLIPBOARD_UNIT" > "$units/baton-clipboard.service"
mkdir -p "$units/baton-clipboard.service.d"
printf '[Service]\nStandardError=append:%s\n' "$T/agent.log" > "$units/baton-clipboard.service.d/log.conf"
# A session's own target, as sway's documentation and GNOME's gnome-session-x11.target bind it.
printf '[Unit]\nDescription=A graphical session\nBindsTo=graphical-session.target\nWants=graphical-session-pre.target\nAfter=graphical-session-pre.target\n' \
    > "$units/test-session.target"
systemctl --user daemon-reload
busctl --user call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus ReloadConfig >/dev/null 2>&1
systemctl --user enable baton-clipboard >/dev/null 2>&1
say enabled "$(systemctl --user is-enabled baton-clipboard 2>&1)"
say score "$(systemd-analyze security --user --offline=yes "$units/baton-clipboard.service" 2>/dev/null | awk '/Overall exposure level/ {print $(NF-2)}')"
"$BATON" sources enable clipboard >/dev/null 2>&1 && say source on || say source "$("$BATON" sources enable clipboard 2>&1 | head -1)"

# No graphical session yet: no agent.
say before_session "$(systemctl --user is-active baton-clipboard)"

# A session that did not tell the manager its display: the agent's unit is skipped (its condition).
systemctl --user start test-session.target
say no_display "$(systemctl --user is-active baton-clipboard) $(systemctl --user show -p ConditionResult --value baton-clipboard)"
systemctl --user stop test-session.target

# The session: its display, its variables in the manager, its target.
# -noreset: a session's X server lives while the session does; Xvfb would reset when its last client left.
Xvfb -displayfd 3 -screen 0 640x480x24 -nolisten tcp -noreset 3>"$T/display" 2>"$T/xvfb.log" &
xvfb=$!
for _ in $(seq 200); do grep -q . "$T/display" 2>/dev/null && break; sleep 0.05; done
export DISPLAY=":$(head -1 "$T/display")"
systemctl --user import-environment DISPLAY
systemctl --user start test-session.target
for _ in $(seq 100); do
    busctl --user list --no-legend 2>/dev/null | grep -q "^org.baton.ClipboardAgent.X" && break
    sleep 0.1
done
say in_session "$(systemctl --user is-active baton-clipboard)"
say agent_name "$(busctl --user list --no-legend 2>/dev/null | awk '/^org.baton.ClipboardAgent./ {print $1}')"
pid=$(systemctl --user show -p MainPID --value baton-clipboard)
say nonewprivs "$(awk '/^NoNewPrivs/ {print $2}' /proc/$pid/status 2>/dev/null)"
# A copy made in the session is heard (no sync set up: batond answers no-sync).
printf 'copied in the session' | xclip -selection clipboard -i
for _ in $(seq 100); do grep -q "a copy of 21 bytes" "$T/agent.log" 2>/dev/null && break; sleep 0.1; done
say copy "$(grep -o 'a copy of 21 bytes.*' "$T/agent.log" 2>/dev/null | head -1)"

# The session ends: the agent stops with it.
systemctl --user stop test-session.target
for _ in $(seq 100); do [ "$(systemctl --user is-active baton-clipboard)" = inactive ] && break; sleep 0.1; done
say after_session "$(systemctl --user is-active baton-clipboard)"

# A new session whose display then goes away: the agent ends by itself, status 0, not restarted.
systemctl --user start test-session.target
# Active once started (Type=simple): the display is taken away only once the agent watches it.
for _ in $(seq 100); do [ "$(grep -c 'watching the clipboard' "$T/agent.log" 2>/dev/null)" = 2 ] && break; sleep 0.1; done
say second_session "$(systemctl --user is-active baton-clipboard)"
kill "$xvfb"
for _ in $(seq 100); do [ "$(systemctl --user is-active baton-clipboard)" = inactive ] && break; sleep 0.1; done
sleep 0.5
say display_gone "$(systemctl --user is-active baton-clipboard)"
say display_gone_result "$(systemctl --user show -p Result --value baton-clipboard)"
say restarts "$(systemctl --user show -p NRestarts --value baton-clipboard)"
say agent_said "$(tr '\n' '|' < "$T/agent.log" 2>/dev/null | tail -c 600)"

# GNOME on Wayland: its compositor (Mutter, headless here) offers no data-control protocol. The
# agent says so and exits with status 3, which the unit does not restart: failed at once, not
# waiting to restart (auto-restart).
mutter --wayland --headless --no-x11 --virtual-monitor 640x480 --wayland-display wayland-gnome >"$T/mutter.log" 2>&1 &
mutter=$!
for _ in $(seq 200); do [ -S "$XDG_RUNTIME_DIR/wayland-gnome" ] && break; sleep 0.05; done
systemctl --user stop test-session.target
systemctl --user unset-environment DISPLAY
systemctl --user set-environment WAYLAND_DISPLAY=wayland-gnome
systemctl --user start test-session.target
for _ in $(seq 100); do
    [ "$(systemctl --user show -p ActiveState --value baton-clipboard)" = failed ] && break
    sleep 0.1
done
unit() { systemctl --user show -p "$1" --value baton-clipboard; }
say gnome "$(unit ActiveState) $(unit SubState) $(unit ExecMainStatus) $(unit NRestarts)"
say gnome_said "$(grep -c 'offers no data-control protocol' "$T/agent.log" 2>/dev/null)"
kill "$mutter"
systemctl --user stop test-session.target batond >/dev/null 2>&1
kill $manager ${journal:-}
