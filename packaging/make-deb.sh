#!/bin/sh
# make deb: the Debian packages inbox, libinbox0.1 and libinbox-dev, built
# with debhelper (dpkg-buildpackage) from a copy of the tree in
# OUT/src with packaging/debian as its debian/ directory (the tree itself
# is left as it is), into OUT (default build-deb):
#   packaging/make-deb.sh [OUT] [JOBS]
# The version is include/inbox/version.h's (debian/changelog is written
# from it). Needs debhelper, dpkg-dev, fakeroot and the build's -dev
# packages (scripts/install-deps.sh); dpkg-checkbuilddeps says what is
# missing. Works from a clean clone or a tarball: it copies what git
# tracks when the tree is a git checkout, else the tree without its build
# directories.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-build-deb}
jobs=${2:-$(nproc 2>/dev/null || echo 2)}
case "$out" in /*) ;; *) out="$top/$out" ;; esac
version=$(sed -n 's/^#define INBOX_VERSION *"\([0-9.]*\)".*/\1/p' "$top/include/inbox/version.h")
[ -n "$version" ] || { echo "make-deb: no INBOX_VERSION in include/inbox/version.h" >&2; exit 1; }

rm -rf "$out/src"
mkdir -p "$out/src"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# what git tracks, as it is in the work tree (uncommitted edits too)
	(cd "$top" && git ls-files -z --cached --others --exclude-standard |
		xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
		tar --null -T - -cf -) | tar -xf - -C "$out/src"
else
	(cd "$top" && tar --exclude='./build*' --exclude=node_modules --exclude=.git -cf - .) |
		tar -xf - -C "$out/src"
fi
rm -rf "$out/src/debian"
cp -R "$top/packaging/debian" "$out/src/debian"
date=$(date -R)
cat >"$out/src/debian/changelog" <<CL
libinbox ($version) unstable; urgency=medium

  * Built from the libinbox tree by make deb.

 -- libinbox maintainers <libinbox@localhost>  $date
CL
rm -f "$out"/*.deb "$out"/*.buildinfo "$out"/*.changes
cd "$out/src"
DEB_BUILD_OPTIONS="parallel=$jobs nocheck" dpkg-buildpackage -us -uc -b
ls -1 "$out"/*.deb
