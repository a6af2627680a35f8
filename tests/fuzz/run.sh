#!/bin/sh
# tests/fuzz/run.sh BUILD_DIR [SECONDS]: run every libFuzzer binary of
# BUILD_DIR (a Clang build: `make fuzz` configures it) for SECONDS each
# (default $FUZZ_SECONDS, else 60), one after the other, from a copy of its
# seed corpus (tests/fuzz/corpus/TARGET; the copy grows, the tree does
# not), with its dictionary where there is one. Prints one line per
# target: executions, executions per second, corpus size, and the crash
# file if it found one. Exit 1 if any target crashed, leaked, hit a
# timeout or failed to run.
#
# Knobs: FUZZ_SECONDS, FUZZ_TARGETS (names, default all), FUZZ_KEEP=1
# (keep the work directory: corpora, logs, crash files).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]}" && pwd) || exit 1
secs=${2:-${FUZZ_SECONDS:-60}}
targets=${FUZZ_TARGETS:-"fuzz_canon fuzz_keytmpl fuzz_url fuzz_schema fuzz_source_url fuzz_config"}
work=$(mktemp -d "${TMPDIR:-/tmp}/inbox-fuzz.XXXXXX")
failed=0
echo "fuzz: ${secs}s per target, work in $work"
printf '%-16s %12s %10s %8s  %s\n' target execs exec/s corpus result
for t in $targets; do
	bin="$build/tests/fuzz/$t"
	if [ ! -x "$bin" ]; then
		printf '%-16s %12s %10s %8s  %s\n' "$t" - - - "MISSING ($bin)"
		failed=1
		continue
	fi
	mkdir -p "$work/$t/corpus" "$work/$t/run"
	cp "$here/corpus/$t"/* "$work/$t/corpus/" 2>/dev/null
	dict=
	case $t in
	fuzz_canon | fuzz_schema | fuzz_keytmpl) dict="-dict=$here/json.dict" ;;
	fuzz_source_url) dict="-dict=$here/source_url.dict" ;;
	fuzz_config) dict="-dict=$here/yaml.dict" ;;
	esac
	# From an empty directory (fuzz_config reads the files a config
	# names), stdin from /dev/null (nothing may wait on a terminal);
	# -timeout: an input taking 10 s is a finding.
	(cd "$work/$t/run" && "$bin" -max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=2560 -print_final_stats=1 \
		-artifact_prefix="$work/$t/" $dict "$work/$t/corpus" \
		</dev/null >"$work/$t/log" 2>&1)
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t/log")
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/$t/log")
	files=$(ls "$work/$t/corpus" | wc -l | tr -d ' ')
	crash=$(ls "$work/$t"/crash-* "$work/$t"/leak-* "$work/$t"/timeout-* \
		"$work/$t"/oom-* 2>/dev/null | head -1)
	if [ $rc -eq 0 ] && [ -z "$crash" ]; then
		result=ok
	else
		result="FAILED (exit $rc) ${crash:-see $work/$t/log}"
		failed=1
		FUZZ_KEEP=1
	fi
	printf '%-16s %12s %10s %8s  %s\n' "$t" "${execs:--}" "${rate:--}" \
		"$files" "$result"
done
if [ "${FUZZ_KEEP:-}" = 1 ]; then
	echo "fuzz: work kept in $work"
else
	rm -rf "$work"
fi
exit $failed
