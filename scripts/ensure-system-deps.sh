#!/bin/sh
# Installs the system packages sluice needs at run time when they are missing:
# libfuse.so.2 (fuse-native links it; packaged as libfuse2, or libfuse2t64 on Ubuntu 24.04+)
# and fuse (fusermount, used to unmount). With the argument `tests` (npm test), also what the
# test suite itself uses: openssl (the HTTPS tests make a certificate authority with it).
# As root it installs them with apt-get; otherwise it prints one line saying how.
set -eu
. "$(dirname "$0")/libfuse-package.sh"
missing=""
ldconfig -p 2>/dev/null | grep -q 'libfuse\.so\.2 ' || missing="$missing libfuse2"
command -v fusermount >/dev/null 2>&1 || missing="$missing fuse"
if [ "${1:-}" = tests ]; then
  command -v openssl >/dev/null 2>&1 || missing="$missing openssl"
fi
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "sluice: installing missing system packages:$missing" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  # The libfuse2 package name depends on the release; ask apt once its lists are fresh.
  missing=$(echo "$missing" | sed "s/libfuse2/$(libfuse2_package)/")
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
else
  command -v apt-cache >/dev/null 2>&1 && missing=$(echo "$missing" | sed "s/libfuse2/$(libfuse2_package)/")
  echo "sluice: missing system packages:$missing. Install them with: sudo apt-get install -y$missing" >&2
  exit 1
fi
