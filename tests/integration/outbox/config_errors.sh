#!/bin/sh
# Mistakes in outbox:/dispatch: are config errors (exit 3) naming the
# place, before anything is consumed or sent.
#   config_errors.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"

dir=$(mktmp)
: >"$dir/orders.jsonl"
# cfg NAME STEP_LINES [CONSUMER_LINES]
cfg() {
	cat >"$dir/$1.yaml" <<EOF
store: sqlite:$dir/t.db
consumers:
  - name: c1
    source: jsonl:$dir/orders.jsonl
    outbox:
      - step: charge
$2
${3:-}
EOF
}
# expect NAME MESSAGE: exit 3 and MESSAGE on stderr.
expect() {
	out=$("$BIN" dispatch "$dir/$1.yaml" --once 2>&1)
	st=$?
	case "$out" in
	*"$2"*) if [ "$st" -eq 3 ]; then ok "$1: $2"; else fail "$1: exit $st" "$out"; fi ;;
	*) fail "$1: $2" "$out" ;;
	esac
}
U="        url: http://127.0.0.1:9/pay"
cfg ptr "$U
        body: {orderId: data/orderId}
        idempotent: true"
expect ptr 'outbox body: "data/orderId" is neither a JSON pointer'
cfg noidem "$U
        body: /data"
expect noidem "idempotent: is required"
cfg recon "$U
        idempotent: true
        reconcile: {url: 'http://127.0.0.1:9/q?r={key}'}"
expect recon "reconcile is for providers without idempotency"
cfg nokey "$U
        idempotent: false
        reconcile: {url: 'http://127.0.0.1:9/q'}"
expect nokey "reconcile_url must be an http(s) URL containing {key}"
cfg scheme "        url: file:///etc/passwd
        idempotent: true"
expect scheme "url must be an http:// or https:// URL"
cfg lease "$U
        idempotent: true" "    dispatch: {timeout: 5s, lease: 2s}"
expect lease "lease must cover a reconcile and a call"
cfg typo "$U
        idempotnet: true"
expect typo 'unknown key "idempotnet" in outbox step (did you mean "idempotent"?)'
cfg header "$U
        idempotent: true
        headers: {'Bad Name': x}"
expect header "names are HTTP tokens"
cfg twice "$U
        idempotent: true
      - step: charge
$U
        idempotent: true"
expect twice 'step "charge" is declared twice'
check "nothing was created" [ ! -e "$dir/t.db" ]
summary
