#!/bin/sh
# The http:// source's webhook receivers against the daemon: Standard
# Webhooks, GitHub and Stripe signatures computed here by openssl —
# valid, invalid, expired, rotated secrets (two configured at once) —
# the delivery id as the key (a provider's retry is a duplicate), a bad
# signature refused with 401, counted, nothing recorded, and no secret in
# the logs.
#   webhooks.sh INBOX_BIN sqlite|pg
set -u
BIN=$1
MODE=$2
. "$(dirname "$0")/lib.sh"
dir=$(mktmp)
store_for "$MODE"
T="${tag}events"

# Standard Webhooks: whsec_ + base64 of the key, in a secret_file (one
# a line: the old one and the new one during a rotation).
std_old_b64=$(openssl rand -base64 24)
std_new_b64=$(openssl rand -base64 32)
std_bad_b64=$(openssl rand -base64 24)
printf 'whsec_%s\nwhsec_%s\n' "$std_old_b64" "$std_new_b64" >"$dir/std.secrets"
b64hex() { echo "$1" | base64 -d | od -An -tx1 | tr -d ' \n'; }
gh_old=ghold$$secret
gh_new=ghnew$$secret
st_old=whsec_stold$$
st_new=whsec_stnew$$

route() { # NAME MODE PARAMS
	cat <<ROUTE
  - name: hooks.$1
    source: "http://127.0.0.1:0/hooks/$1?mode=$2$3"
    setup: |
      CREATE TABLE IF NOT EXISTS $T (provider TEXT NOT NULL, body TEXT NOT NULL);
    effect:
      - sql: INSERT INTO $T (provider, body) VALUES ('$1', \$1)
        params: [/route]
ROUTE
}
{
	echo "store: $store"
	echo "table_prefix: \"$tag\""
	echo "consumers:"
	route standard standard "&secret_file=$dir/std.secrets"
	route github github "&secret=$gh_old&secret=$gh_new"
	route stripe stripe "&secret=$st_old&secret=$st_new"
} >"$dir/inbox.yaml"
start_http "$dir/inbox.yaml" "$dir/daemon.log" --metrics 127.0.0.1:0
port_of() {
	sed -n "s/.*\"consumer\":\"hooks.$1\",\"event\":\"http_listening\",\"address\":\"[0-9.]*:\([0-9]*\)\".*/\1/p" "$dir/daemon.log"
}
rows() { count "SELECT COUNT(*) FROM $T WHERE provider = '$1'"; }
now=$(date +%s)

# --- Standard Webhooks --------------------------------------------------
SU="http://127.0.0.1:$(port_of standard)/hooks/standard"
std() { # NAME ID TS BODY SIGNATURE-HEADER
	req "$1" -X POST -H "webhook-id: $2" -H "webhook-timestamp: $3" \
		-H "webhook-signature: $5" -d "$4" "$SU"
}
std_sig() { # B64KEY ID TS BODY
	echo "v1,$(hmac_b64_hexkey "$(b64hex "$1")" "$2.$3.$4")"
}
body='{"type":"invoice.paid","data":{"id":"in_1"}}'
std s_ok msg_1 "$now" "$body" "$(std_sig "$std_new_b64" msg_1 "$now" "$body")"
expect_eq "standard: valid (the new secret): 200" "$code" 200
expect_eq "standard: one event" "$(rows standard)" 1
std s_dup msg_1 "$now" "$body" "$(std_sig "$std_new_b64" msg_1 "$now" "$body")"
expect_eq "standard: the provider's retry: 200" "$code" 200
expect_eq "standard: the retry is a duplicate" "$(rows standard)" 1
std s_old msg_2 "$now" "$body" "$(std_sig "$std_old_b64" msg_2 "$now" "$body")"
expect_eq "standard: signed with the old secret (rotation): 200" "$code" 200
two="$(std_sig "$std_bad_b64" msg_3 "$now" "$body") $(std_sig "$std_new_b64" msg_3 "$now" "$body")"
std s_two msg_3 "$now" "$body" "$two"
expect_eq "standard: two signatures, the second valid: 200" "$code" 200
expect_eq "standard: three events" "$(rows standard)" 3
std s_bad msg_4 "$now" "$body" "$(std_sig "$std_bad_b64" msg_4 "$now" "$body")"
expect_eq "standard: an unknown secret: 401" "$code" 401
std s_tamper msg_5 "$now" '{"type":"invoice.paid","data":{"id":"in_2"}}' "$(std_sig "$std_new_b64" msg_5 "$now" "$body")"
expect_eq "standard: another body than the signed one: 401" "$code" 401
old=$((now - 600))
std s_exp msg_6 "$old" "$body" "$(std_sig "$std_new_b64" msg_6 "$old" "$body")"
expect_eq "standard: a valid signature 10 minutes old: 401" "$code" 401
fut=$((now + 600))
std s_fut msg_7 "$fut" "$body" "$(std_sig "$std_new_b64" msg_7 "$fut" "$body")"
expect_eq "standard: 10 minutes in the future: 401" "$code" 401
req s_none -X POST -H "webhook-id: msg_8" -d "$body" "$SU"
expect_eq "standard: no signature: 401" "$code" 401
expect_eq "standard: nothing refused was recorded" "$(rows standard)" 3

# --- GitHub ------------------------------------------------------------
GU="http://127.0.0.1:$(port_of github)/hooks/github"
gh() { # NAME DELIVERY BODY SIGNATURE
	req "$1" -X POST -H "X-GitHub-Delivery: $2" -H "X-GitHub-Event: push" \
		-H "X-Hub-Signature-256: $4" -H 'Content-Type: application/json' \
		-d "$3" "$GU"
}
body='{"ref":"refs/heads/main","after":"abc"}'
gh g_ok d-1 "$body" "sha256=$(hmac_hex "$gh_new" "$body")"
expect_eq "github: valid (the new secret): 200" "$code" 200
gh g_dup d-1 "$body" "sha256=$(hmac_hex "$gh_new" "$body")"
expect_eq "github: the redelivery: 200" "$code" 200
gh g_old d-2 "$body" "sha256=$(hmac_hex "$gh_old" "$body")"
expect_eq "github: signed with the old secret (rotation): 200" "$code" 200
expect_eq "github: two events (the redelivery a duplicate)" "$(rows github)" 2
gh g_bad d-3 "$body" "sha256=$(hmac_hex wrong "$body")"
expect_eq "github: an unknown secret: 401" "$code" 401
gh g_sha1 d-4 "$body" "sha1=$(hmac_hex "$gh_new" "$body")"
expect_eq "github: not sha256=: 401" "$code" 401
expect_eq "github: nothing refused was recorded" "$(rows github)" 2

# --- Stripe ------------------------------------------------------------
TU="http://127.0.0.1:$(port_of stripe)/hooks/stripe"
st() { # NAME BODY HEADER
	req "$1" -X POST -H "Stripe-Signature: $3" -d "$2" "$TU"
}
st_sig() { # SECRET TS BODY
	echo "t=$2,v1=$(hmac_hex "$1" "$2.$3")"
}
ev() { echo "{\"id\":\"$1\",\"type\":\"charge.succeeded\"}"; }
st t_ok "$(ev evt_1)" "$(st_sig "$st_new" "$now" "$(ev evt_1)")"
expect_eq "stripe: valid (the new secret): 200" "$code" 200
st t_dup "$(ev evt_1)" "$(st_sig "$st_new" "$now" "$(ev evt_1)")"
expect_eq "stripe: the retry: 200" "$code" 200
st t_old "$(ev evt_2)" "$(st_sig "$st_old" "$now" "$(ev evt_2)"),v0=00"
expect_eq "stripe: signed with the old secret (rotation): 200" "$code" 200
h="t=$now,v1=$(hmac_hex wrong "$now.$(ev evt_3)"),v1=$(hmac_hex "$st_new" "$now.$(ev evt_3)")"
st t_two "$(ev evt_3)" "$h"
expect_eq "stripe: two v1 signatures, the second valid: 200" "$code" 200
expect_eq "stripe: three events (the retry a duplicate)" "$(rows stripe)" 3
st t_bad "$(ev evt_4)" "$(st_sig wrong "$now" "$(ev evt_4)")"
expect_eq "stripe: an unknown secret: 401" "$code" 401
st t_exp "$(ev evt_5)" "$(st_sig "$st_new" "$old" "$(ev evt_5)")"
expect_eq "stripe: a valid signature 10 minutes old: 401" "$code" 401
st t_ts "$(ev evt_6)" "t=$((now + 1)),v1=$(hmac_hex "$st_new" "$now.$(ev evt_6)")"
expect_eq "stripe: the header's timestamp is not the one signed: 401" "$code" 401
expect_eq "stripe: nothing refused was recorded" "$(rows stripe)" 3

mport=$(sed -n 's/.*"event":"metrics_listening","listen":"127\.0\.0\.1:\([0-9]*\)".*/\1/p' "$dir/daemon.log" | head -1)
curl -s "http://127.0.0.1:$mport/metrics" >"$dir/metrics.txt"
bad_of() { grep "^inbox_http_bad_signatures_total{consumer=\"hooks.$1\"" "$dir/metrics.txt" | awk '{print $2}'; }
expect_eq "/metrics: standard's bad signatures" "$(bad_of standard)" 5
expect_eq "/metrics: github's bad signatures" "$(bad_of github)" 2
expect_eq "/metrics: stripe's bad signatures" "$(bad_of stripe)" 3
stop_daemon "$pid"
leaked=""
for s in "$std_old_b64" "$std_new_b64" "$gh_old" "$gh_new" "$st_old" "$st_new"; do
	grep -qF "$s" "$dir/daemon.log" "$dir/metrics.txt" && leaked="$leaked $s"
done
expect_eq "no secret in the log or the metrics" "$leaked" ""
check "the bad signatures are logged (warn)" grep -q '"event":"http_bad_signature"' "$dir/daemon.log"
clean_logs "no error logged" "$dir/daemon.log"
summary
