#!/usr/bin/env python3
"""Where a new Pipe process's samples go, for two sets of its PIDs (BENCHMARKS.md "t11-tlsfloor").

  perf record -a -g -F 499 -o perf.data -- node dist/cli.js bench SCENARIOS.yaml --out DIR
  perf script -i perf.data -F pid,tid,comm,ip,sym > ps.txt
  python3 clear-page.py ps.txt PID,PID,... PID,PID,...

The PIDs are the Pipe hosts' (`dist/bench/host.js .../host-pipe.json`), logged by a poller
during the run (order-3-pids.txt). For each set: samples per process, samples whose leaf is
clear_page_erms (the kernel zeroing a new page) per process, and the call paths they came by.
"""
import collections
import re
import sys


def samples(path):
    block = []
    for line in open(path):
        if not line.strip():
            if block:
                yield block
            block = []
        else:
            block.append(line.rstrip('\n'))
    if block:
        yield block


def frame_name(line):
    parts = line.strip().split(None, 1)
    return parts[1] if len(parts) > 1 else '?'


sets = [set(int(p) for p in arg.split(',')) for arg in sys.argv[2:]]
stats = [dict(total=collections.Counter(), clear=collections.Counter(), paths=collections.Counter()) for _ in sets]
for s in samples(sys.argv[1]):
    m = re.search(r'(\d+)/(\d+)', s[0])
    if not m:
        continue
    pid = int(m.group(1))
    for pids, st in zip(sets, stats):
        if pid not in pids:
            continue
        st['total'][pid] += 1
        frames = [frame_name(f) for f in s[1:]]
        if frames and frames[0] == 'clear_page_erms':
            st['clear'][pid] += 1
            st['paths'][' < '.join(f[:40] for f in frames[1:9])] += 1
for pids, st in zip(sets, stats):
    print('PIDs', ','.join(str(p) for p in sorted(pids)))
    print('  samples per process', [st['total'][p] for p in sorted(pids)])
    print('  clear_page_erms per process', [st['clear'][p] for p in sorted(pids)])
    for path, n in st['paths'].most_common(3):
        print('   ', n, path)
