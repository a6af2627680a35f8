#!/bin/sh
# `make demo`: the billing story on the embedded default (SQLite store,
# JSONL source, no server). Usage: sh scripts/demo.sh BUILD_DIR [DEMO_DIR]
# The demo's files are kept (the path is printed) so you can look inside.
set -eu
build=${1:-build}
bin="$build/src/cli/inbox"
if [ ! -x "$bin" ]; then
	echo "demo: $bin not found; build first (make build)" >&2
	exit 1
fi
if [ $# -ge 2 ]; then
	exec "$bin" demo --dir "$2"
fi
exec "$bin" demo
