# Sourced by scripts/ensure-system-deps.sh, .ci/run and docker/Dockerfile (POSIX sh).
#
# libfuse2_package prints the name under which this system's apt offers libfuse.so.2:
#  - libfuse2t64 on Ubuntu 24.04 and later (the 64-bit time_t transition renamed it; there
#    libfuse2 is only a virtual package, and `apt-get install libfuse2` fails asking to choose);
#  - libfuse2 on Debian 12, Ubuntu 22.04 and older.
# A name counts when `apt-cache policy` shows a real candidate version for it (a virtual or
# unknown package has "Candidate: (none)" or no entry). Run `apt-get update` first on an image
# whose package lists were removed. When neither name has a candidate it prints libfuse2, so
# apt's own error names the package that is missing.
libfuse2_package() {
  for _pkg in libfuse2t64 libfuse2; do
    if apt-cache policy "$_pkg" 2>/dev/null | grep -Eq '^[[:space:]]*Candidate:[[:space:]]*[0-9]'; then
      echo "$_pkg"
      return 0
    fi
  done
  echo libfuse2
}
