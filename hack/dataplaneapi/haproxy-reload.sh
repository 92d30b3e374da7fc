#!/bin/sh
# dataplaneapi's reload_cmd for HAProxy older than 2.7 (2.6 is Debian's).
#
# dataplaneapi reloads through the master socket only for HAProxy 2.7 or newer, because only
# those answer `reload` with `Success=1|0`. 2.6 re-executes its master and closes the
# connection without an answer, so this script asks `show proc` instead: it waits until the
# reload counter moved, then exits 1 when the master counts a failed reload and 0 once a
# worker of the new generation runs. A signal (`kill -USR2`) would report success for a
# reload that HAProxy refused a moment later.
#
# Usage (dataplaneapi.yaml):  reload_cmd: /path/haproxy-reload.sh /path/master.sock
# Needs socat. Bounded: gives up after $HTC_RELOAD_TIMEOUT seconds (30).
set -u
sock=${1:?usage: haproxy-reload.sh MASTER_SOCKET}
limit=${HTC_RELOAD_TIMEOUT:-30}

proc() { echo "show proc" | socat -t 2 stdio "unix-connect:$sock" 2>/dev/null; }
# master line: "<pid> master <reloads> [failed: <n>] <uptime> <version>"
reloads() { awk '$2 == "master" { print $3; exit }'; }
failed() { sed -n 's/.*master.*\[failed: \([0-9]*\)\].*/\1/p' | head -n 1; }
workers() { awk '/^#/ { w = ($0 ~ /worker/) } w && $2 == "worker" { print $1 " " $3 }'; }

before=$(proc) || { echo "master socket $sock unreachable" >&2; exit 2; }
r0=$(echo "$before" | reloads)
old=$(echo "$before" | workers | awk '{ print $1 }')
echo reload | socat -t 2 stdio "unix-connect:$sock" >/dev/null 2>&1

end=$(( $(date +%s) + limit ))
while [ "$(date +%s)" -le "$end" ]; do
  now=$(proc)
  if [ -n "$now" ]; then
    r1=$(echo "$now" | reloads)
    if [ -n "$r1" ] && [ "$r1" -gt "$r0" ]; then
      f=$(echo "$now" | failed)
      if [ -n "$f" ] && [ "$f" -gt 0 ]; then
        echo "HAProxy refused the reload (show proc: failed $f); the previous workers keep serving" >&2
        exit 1
      fi
      for w in $(echo "$now" | workers | awk '$2 == 0 { print $1 }'); do
        case " $(echo $old) " in *" $w "*) ;; *) echo "reloaded: new worker $w"; exit 0 ;; esac
      done
    fi
  fi
  sleep 0.05
done
echo "reload not confirmed within ${limit}s" >&2
exit 1
