#!/bin/bash
# Issue 14: one epoch 1 through a fresh FastFile mount, with or without the disk tier.
# usage: HARNESS_OUT=/tmp/harness.out scripts/tier-epoch1/epoch1.sh DIST TAG notier|tier|tierdirect [none|prof|perf|strace]
# Mounts the bucket of harness.mjs (its JSON line in $HARNESS_OUT) with DIST, reads every file once
# (dd bs=1M to /dev/null; with READERS=N, N cat processes at once over the sorted list, each
# taking every Nth file, as the bench's readers do), prints MB/s, files/s and the daemon's
# CPU s/GB (user + sys). With METRICS_PORT=N the daemon serves /metrics there and its
# FUSE, prefetch and tier counters are printed at the end (BENCHMARKS.md t14-hot). Leaves its folder
# (mount point, tier, profiles) in /tmp and unmounts what it mounted.
DIST=$1; TAG=$2; MODE=$3; EXTRA=$4
EP=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.env.HARNESS_OUT||"/tmp/harness.out","utf8")).endpoint)')
ROOT=$(mktemp -d /tmp/tier-epoch1-$TAG-XXXX); MNT=$ROOT/mnt; mkdir -p $MNT
ARGS=(mount s3://bench/large/ $MNT --endpoint $EP --path-style --region us-east-1 --metrics-port=${METRICS_PORT:--1} --log-level warn --cache-size ${CACHE_SIZE:-33554432} --max-prefetch 16MiB)
[ "$MODE" = tier -o "$MODE" = tierdirect ] && ARGS+=(--cache-dir $ROOT/tier --cache-dir-size 8589934592)
[ "$MODE" = tierdirect ] && ARGS+=(--cache-dir-direct-write)
NODEARGS=()
[ "$EXTRA" = prof ] && NODEARGS=(--cpu-prof --cpu-prof-dir=$ROOT/prof)
[ "$EXTRA" = perf ] && NODEARGS=(--perf-basic-prof)
AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1 node "${NODEARGS[@]}" $DIST/cli.js "${ARGS[@]}" > $ROOT/daemon.log 2>&1 &
PID=$!
for i in $(seq 1 100); do grep -q " $MNT " /proc/mounts && break; sleep 0.2; done
FILES=$(find $MNT -type f | sort)
[ "$EXTRA" = perf ] && { perf record -F 499 -g -o $ROOT/perf.data -p $PID 2>$ROOT/perf.err & SPID=$!; sleep 1; }
[ "$EXTRA" = strace ] && { strace -c -f -o $ROOT/strace.txt -p $PID & SPID=$!; sleep 1; }
read u0 s0 < <(awk '{print $14, $15}' /proc/$PID/stat)
T0=$(date +%s.%N)
BYTES=0
NFILES=$(echo "$FILES" | wc -l)
if [ "${READERS:-1}" -gt 1 ]; then
  for r in $(seq 0 $((READERS-1))); do echo "$FILES" | awk -v r=$r -v n=$READERS 'NR % n == r' | xargs cat > /dev/null & done
  wait $(jobs -p | grep -v "^$PID$" | grep -v "^${SPID:-x}$")
  BYTES=$(echo "$FILES" | xargs stat -c %s | awk '{s+=$1} END {print s}')
else
  for f in $FILES; do n=$(dd if=$f of=/dev/null bs=1M 2>&1 | awk '/bytes/{print $1}'); BYTES=$((BYTES+n)); done
fi
T1=$(date +%s.%N)
read u1 s1 < <(awk '{print $14, $15}' /proc/$PID/stat)
[ "$EXTRA" = strace -o "$EXTRA" = perf ] && { kill -INT $SPID; wait $SPID; }
sleep 0.5
read u2 s2 < <(awk '{print $14, $15}' /proc/$PID/stat)
[ -n "$THREADS" ] && python3 -c "
import os,collections
pid=$PID; a=collections.Counter(); n=collections.Counter()
for t in os.listdir(f'/proc/{pid}/task'):
  st=open(f'/proc/{pid}/task/{t}/stat').read(); name=st[st.index('(')+1:st.rindex(')')]; f=st[st.rindex(')')+2:].split()
  k='main' if int(t)==pid else name; a[k]+=int(f[11])+int(f[12]); n[k]+=1
print('  threads: '+', '.join(f'{k} x{n[k]} {a[k]/100:.2f}s' for k in sorted(a)))"
[ -n "$METRICS_PORT" ] && { curl -s localhost:$METRICS_PORT/metrics > $ROOT/metrics.txt; grep -E '^sluice_(fuse_(passthrough|memory)_opens_total|disk_cache_(hits|misses)_total|prefetch_bytes_total|prefetch_evicted_unread_bytes_total|read_wait_seconds_(sum|count))' $ROOT/metrics.txt | sed 's/^/  /'; }
kill -TERM $PID; wait $PID
grep -q " $MNT " /proc/mounts && fusermount -u $MNT
python3 -c "
b=$BYTES; t=$T1-$T0; cpu=($u1+$s1-$u0-$s0)/100; cpu2=($u2+$s2-$u0-$s0)/100
print(f'$TAG $MODE: daemon CPU per file {cpu/$NFILES*1000:.3f} ms')
print(f'$TAG $MODE: {b/1e6/t:.1f} MB/s, {$NFILES/t:.0f} files/s, {b/1e6:.0f} MB in {t:.2f}s, daemon CPU {cpu:.2f}s = {cpu/(b/1e9):.2f} s/GB (user {($u1-$u0)/100:.2f} sys {($s1-$s0)/100:.2f}); +0.5s after: {cpu2/(b/1e9):.2f} s/GB')"
echo ROOT=$ROOT
