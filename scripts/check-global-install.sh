#!/bin/sh
# Issue 45: install the packed tarball globally, as a user would, with the npm registry for
# its dependencies (test/packaging/global-install.ts does the same offline, from the unpacked
# tarball). For CI where the registry is reachable: exits 0 with a note when it is not.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
if ! timeout 10 npm ping >/dev/null 2>&1; then echo "check-global-install: the npm registry is not reachable; skipped"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$here"
npm pack --pack-destination "$tmp" >/dev/null
tarball=$(ls "$tmp"/sluice-*.tgz)
timeout 600 npm install -g --prefix "$tmp/prefix" --prefer-offline --no-audit --no-fund --allow-scripts=sluice,fuse-native "$tarball"
PATH="$tmp/prefix/bin:$PATH"
test "$(sluice --version)" = "$(node -p "require('./package.json').version")"
test -f "$tmp/prefix/lib/node_modules/sluice/native/build/Release/sluice_native.node"
test "$(cd "$tmp" && npm_config_prefix="$tmp/prefix" npx --no-install sluice --version)" = "$(node -p "require('./package.json').version")"
echo "check-global-install: ok ($tarball)"
