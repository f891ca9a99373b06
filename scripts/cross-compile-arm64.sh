#!/bin/sh
# Cross-compiles sluice's addon (native/, the sources binding.gyp lists) and fuse-native's
# binding (scripts/fuse-native-from-source.mjs) for linux-arm64 with Debian's
# gcc-aarch64-linux-gnu, and checks that both are AArch64 ELF shared objects. A check that
# the C sources build for arm64 (Graviton, GH200), run by .ci/run on an x86-64 machine; the
# binaries are thrown away (they are not run: no arm64 Node here). About 10 s.
#
# Usage: sh scripts/cross-compile-arm64.sh   (CC_ARM64 overrides the compiler)
set -eu
cd "$(dirname "$0")/.."
cc=${CC_ARM64:-aarch64-linux-gnu-gcc}
command -v "$cc" >/dev/null || { echo "cross-compile-arm64: $cc not found (apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Node's headers: those next to this Node (official builds and Debian's nodejs ship them).
inc=$(node -p "require('path').resolve(process.execPath, '..', '..', 'include', 'node')")
[ -f "$inc/node_api.h" ] || inc=/usr/include/node
# The sources and flags binding.gyp gives node-gyp, so the two never drift apart.
srcs=$(node -e "
  const g = require('fs').readFileSync('native/binding.gyp', 'utf8').replace(/#.*$/gm, '');
  const t = JSON.parse(g.replace(/'/g, '\"').replace(/,(\s*[\]}])/g, '\$1')).targets[0];
  console.log(t.sources.map((s) => 'native/' + s).join(' '));
")
# shellcheck disable=SC2086
"$cc" -shared -fPIC -std=gnu11 -O2 -Wall -Wextra -DNAPI_VERSION=8 -Inative/include -I"$inc" $srcs -o "$out/sluice_native.node" -ldl -lpthread
node scripts/fuse-native-from-source.mjs --cc "$cc" --node-include "$inc" --no-libfuse --out "$out/fuse.node" >/dev/null
# ELF e_machine (bytes 18-19, little endian) 183 = EM_AARCH64.
for f in sluice_native.node fuse.node; do
  m=$(node -e "const b = require('fs').readFileSync(process.argv[1]); console.log(b.subarray(0, 4).toString('latin1') === '\x7fELF' ? b.readUInt16LE(18) : -1)" "$out/$f")
  [ "$m" = 183 ] || { echo "cross-compile-arm64: $f is not an AArch64 ELF object (e_machine $m)" >&2; exit 1; }
done
echo "cross-compile-arm64: native/ and fuse-native build for linux-arm64 ($cc)"
