#!/bin/bash
# Run by BatonServiceTests/PackageTests inside a private mount namespace (unshare -m): installs
# the Debian package on this machine with apt-get, starts batond from the installed user unit
# under a real systemd --user (shared/FIELD-NOTES.md), runs the contract check against it and
# D-Bus activation, then purges the package and looks for anything of it left. Prints what it
# saw as key=value lines for the test to hold to the contract.
# Usage: package-test.sh WORK_DIR DEB REPOSITORY
set -u
T=$1; DEB=$2; REPOSITORY=$3
export XDG_RUNTIME_DIR=$T/rt HOME=$T/home
unset XDG_STATE_HOME XDG_DATA_HOME XDG_CONFIG_HOME XDG_DATA_DIRS DBUS_SESSION_BUS_ADDRESS
mkdir -m 700 -p "$XDG_RUNTIME_DIR" "$HOME"
say() { echo "$1=$2"; }

# The package's own directories, and of them those something else made before it (another
# package, such as Plasma's browser integration in /etc/chromium, or the admin): those stay.
own_dirs="/usr/share/baton /usr/share/doc/baton /etc/chromium/native-messaging-hosts /etc/opt/chrome"
existing_dirs=""
for directory in $own_dirs; do [ -e "$directory" ] && existing_dirs="$existing_dirs $directory"; done
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$DEB" > "$T/install.log" 2>&1
say installed "$(dpkg-query -W -f='${Status}' baton 2>/dev/null)"
dpkg -L baton > "$T/files" 2>/dev/null
say files "$(wc -l < "$T/files")"
say on_path "$(command -v batond baton baton-browser-host | tr '\n' ' ')"
say size_baton "$(stat -c %s /usr/bin/baton)"
# One program under four names (scripts/package).
say names "$(readlink /usr/bin/batond /usr/bin/baton-browser-host /usr/bin/hawk-notes | tr '\n' ' ')"
say hawk_notes "$(hawk-notes books 2>&1 | head -1)"
say installed_kib "$(dpkg-query -W -f='${Installed-Size}' baton)"

# The user manager, in this namespace only; dbus-daemon as its bus.
. "$REPOSITORY/Tests/Scripts/user-manager.sh"
start_user_manager dbus-daemon || exit 0
say manager "$(systemctl --user is-system-running 2>&1)"

# 1. The installed unit, as the guide says to start it.
say unit "$(systemctl --user show -p FragmentPath --value batond)"
systemctl --user start batond
say started "$(systemctl --user is-active batond)"
# What systemd started, by the name it ran (the program is /usr/bin/baton under the name batond).
main_pid=$(systemctl --user show -p ExecMainPID --value batond)
say exec "$(tr '\0' '\n' < "/proc/$main_pid/cmdline" | head -1) $(readlink "/proc/$main_pid/exe")"
/usr/bin/python3 "$REPOSITORY/Tests/Scripts/contract-check.py" /usr/share/dbus-1/interfaces/org.baton.Handoff1.xml > "$T/contract-check.out" 2>&1
say contract_check "$(grep -c '^ok ' "$T/contract-check.out") ok, $(grep -c '^FAIL' "$T/contract-check.out") failed"

# 2. Started by D-Bus activation through the installed activation file.
systemctl --user stop batond
say stopped "$(systemctl --user is-active batond)"
baton status > /dev/null 2>&1 && say activated_call ok || say activated_call failed
say activated "$(systemctl --user is-active batond)"
say data "$(ls "$HOME/.local/state/baton" 2>/dev/null | grep -c '^baton.sqlite$')"
systemctl --user stop batond
kill $manager
wait $manager 2>/dev/null

# 3. Purged: nothing of it left but the user's data.
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq baton > "$T/purge.log" 2>&1
say purged "$(dpkg-query -W -f='${Status}' baton 2>/dev/null || echo gone)"
left=""
while read -r path; do
    [ -d "$path" ] && continue   # directories shared with other packages (/usr/bin) stay
    { [ -e "$path" ] || [ -L "$path" ]; } && left="$left $path"
done < "$T/files"
say left "${left:-none}"
left_dirs=""
for directory in $own_dirs; do
    case " $existing_dirs " in *" $directory "*) continue ;; esac
    [ -e "$directory" ] && left_dirs="$left_dirs $directory"
done
say left_dirs "${left_dirs:-none}"
say data_kept "$(ls "$HOME/.local/state/baton" 2>/dev/null | grep -c '^baton.sqlite$')"
