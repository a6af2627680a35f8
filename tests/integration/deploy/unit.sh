#!/bin/sh
# packaging/inbox@.service: systemd-analyze verify says nothing about it
# (a misspelt key or value is a warning there, and a warning fails here),
# and it says what the daemon needs: Type=notify with a watchdog, the
# binary where the package installs it, the instance's config, a check
# before the start, SIGHUP as the reload, Restart=always (SIGHUP ends in
# exit 0), a stop timeout above the drain timeout, the hardening.
#   unit.sh INBOX_BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$(dirname "$0")/lib.sh"
command -v systemd-analyze >/dev/null || { echo "FAIL systemd-analyze is missing (package systemd, scripts/install-deps.sh)"; echo "0 passed, 1 failed"; exit 1; }

dir=$(mktmp)
unit="$SRC/packaging/inbox@.service"
key() { sed -n "s/^$1=//p" "$unit"; }

# verify resolves ExecStart: point it at the built binary.
sed "s|/usr/bin/inbox|$BIN|g" "$unit" >"$dir/inbox@t.service"
(cd "$dir" && systemd-analyze verify --man=no ./inbox@t.service) >"$dir/verify.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ ! -s "$dir/verify.out" ]; then
	ok "systemd-analyze verify: no warning"
else
	fail "systemd-analyze verify: no warning" "$(head -5 "$dir/verify.out")"
fi
# ... and a misspelt value is caught (the check can fail)
sed 's/^Type=notify/Type=notfy/' "$dir/inbox@t.service" >"$dir/inbox@u.service"
(cd "$dir" && systemd-analyze verify --man=no ./inbox@u.service) >"$dir/verify2.out" 2>&1
check "... a misspelt value is reported" test -s "$dir/verify2.out"

expect_eq "Type=notify" "$(key Type)" notify
expect_eq "ExecStart: the installed binary on the instance's config" \
	"$(key ExecStart | cut -d' ' -f1-3)" "/usr/bin/inbox run /etc/inbox/%i.yaml"
expect_eq "ExecStartPre: inbox check of it" "$(key ExecStartPre)" "/usr/bin/inbox check /etc/inbox/%i.yaml"
expect_eq "ExecReload: SIGHUP" "$(key ExecReload)" '/bin/kill -HUP $MAINPID'
expect_eq "Restart=always (a reload ends in exit 0)" "$(key Restart)" always
check "WatchdogSec set" test -n "$(key WatchdogSec)"
drain=$(key ExecStart | sed -n 's/.*--drain-timeout \([0-9]*\)s.*/\1/p')
stop=$(key TimeoutStopSec | tr -d s)
if [ -n "$drain" ] && [ -n "$stop" ] && [ "$stop" -gt "$drain" ]; then
	ok "TimeoutStopSec ($stop s) above --drain-timeout ($drain s)"
else
	fail "TimeoutStopSec above --drain-timeout" "stop '$stop', drain '$drain'"
fi
for k in NoNewPrivileges ProtectSystem DynamicUser PrivateTmp RestrictAddressFamilies SystemCallFilter; do
	check "hardening: $k" test -n "$(key $k)"
done
# the binary takes what the unit gives it
check "inbox check exists (the unit's ExecStartPre)" sh -c "'$BIN' check --help | grep -q 'usage: inbox check'"
summary
