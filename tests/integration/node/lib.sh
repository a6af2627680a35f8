# Shared by the Node.js tests (POSIX sh): install_binding BUILD SRC TMP
# [CFLAGS] installs libinbox from BUILD into TMP/prefix, packs SRC/bindings/node and
# installs the tarball into TMP/app with npm --offline (its install script
# compiles the addon against the system's Node-API headers: nothing is
# downloaded), with CFLAGS added to the addon's compile and link (the
# sanitizer build's flags: see node-test.sh); sets $mod to the installed
# package. On failure it prints why and the closing line, and exits 1.
bail() {
	echo "node: $*"
	echo "0 passed, 1 failed"
	exit 1
}

install_binding() {
	_build=$1 _src=$2 _tmp=$3 _cflags=${4:-}
	for _t in node npm pkg-config cc; do
		command -v "$_t" >/dev/null 2>&1 || bail "$_t not found (run scripts/install-deps.sh)"
	done
	cmake --install "$_build" --prefix "$_tmp/prefix" >"$_tmp/install.log" || bail "cmake --install failed"
	_libdir=$(ls -d "$_tmp/prefix"/lib* | head -1)
	export PKG_CONFIG_PATH="$_libdir/pkgconfig"
	_tgz=$(cd "$_src/bindings/node" && npm_config_cache="$_tmp/npm-cache" npm pack --silent \
		--pack-destination "$_tmp" | tail -1) || bail "npm pack failed"
	mkdir -p "$_tmp/app"
	echo '{ "name": "app", "version": "1.0.0", "private": true }' >"$_tmp/app/package.json"
	if ! (cd "$_tmp/app" && CFLAGS="${CFLAGS:-} $_cflags" INBOX_NODE_WERROR=1 npm_config_cache="$_tmp/npm-cache" \
		npm install --offline --no-audit --no-fund --foreground-scripts \
		"$_tmp/$_tgz" >"$_tmp/npm.log" 2>&1); then
		cat "$_tmp/npm.log"
		bail "npm install of the packed tarball failed"
	fi
	grep '^libinbox: built' "$_tmp/npm.log" || true
	mod="$_tmp/app/node_modules/libinbox"
	[ -f "$mod/build/inbox.node" ] || bail "no addon built"
}
