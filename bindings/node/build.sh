#!/bin/sh
# Builds build/inbox.node: the addon compiled with the system's C compiler
# against the Node-API headers of the Node.js that runs npm (its
# include/node, e.g. /usr/include/node) and the installed libinbox
# (pkg-config inbox). Nothing is downloaded. `npm install` runs it.
#
#   INBOX_NODE_INCLUDE   the folder holding node_api.h (default: found
#                        beside the node binary, then /usr/include/node)
#   PKG_CONFIG_PATH      where inbox.pc is, for a libinbox installed in
#                        another prefix
#   CC, CFLAGS           the compiler and extra flags
#   INBOX_NODE_WERROR=1  warnings are errors (the project's tests)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
node=${npm_node_execpath:-$(command -v node || true)}
inc=${INBOX_NODE_INCLUDE:-}
if [ -z "$inc" ]; then
	for d in ${node:+"$(dirname "$(dirname "$(readlink -f "$node")")")/include/node"} \
		/usr/include/node /usr/local/include/node; do
		if [ -f "$d/node_api.h" ]; then inc=$d; break; fi
	done
fi
if [ -z "$inc" ] || [ ! -f "$inc/node_api.h" ]; then
	echo "libinbox: node_api.h not found (install the Node.js headers, e.g." >&2
	echo "  /usr/include/node, or set INBOX_NODE_INCLUDE)" >&2
	exit 1
fi
if ! pkg-config --exists inbox 2>/dev/null; then
	echo "libinbox: pkg-config cannot find inbox.pc: install libinbox" >&2
	echo "  (cmake --install) or set PKG_CONFIG_PATH" >&2
	exit 1
fi
libdir=$(pkg-config --variable=libdir inbox)
werror=
[ "${INBOX_NODE_WERROR:-0}" = 1 ] && werror=-Werror
mkdir -p build
# shellcheck disable=SC2046,SC2086
${CC:-cc} -std=c11 -O2 -g -fPIC -shared -fvisibility=hidden \
	-Wall -Wextra $werror -Wno-unused-parameter \
	-D_POSIX_C_SOURCE=200809L -I"$inc" $(pkg-config --cflags inbox) \
	${CFLAGS:-} src/addon.c -o build/inbox.node.tmp \
	$(pkg-config --libs inbox) -lpthread -Wl,-rpath,"$libdir"
mv build/inbox.node.tmp build/inbox.node
echo "libinbox: built build/inbox.node (Node-API headers $inc, libinbox $(pkg-config --modversion inbox) in $libdir)"
