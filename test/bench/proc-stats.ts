import t from 'tap';
import { spawn } from 'node:child_process';
import { ProcSampler, addStats, childPids, cmdlineOf, readProcStats } from '../../src/bench/proc-stats.js';

t.test('reads peak RSS and CPU time of a live process', async (t) => {
  const s = readProcStats(process.pid)!;
  t.ok(s.peakRssBytes > 10 * 1024 * 1024, 'a node process holds more than 10 MiB');
  t.ok(s.cpuSeconds > 0);
  t.ok(s.userCpuSeconds > 0 && s.userCpuSeconds <= s.cpuSeconds, 'user CPU is part of the CPU time');
  t.ok(s.minorFaults > 1000, 'a node process has faulted in its heap');
  t.equal(readProcStats(2 ** 22 + 12345), undefined, 'a process that does not exist');
  t.same(addStats({ peakRssBytes: 1, cpuSeconds: 2, userCpuSeconds: 1, minorFaults: 5 }, { peakRssBytes: 3, cpuSeconds: 4, userCpuSeconds: 3, minorFaults: 7 }), { peakRssBytes: 4, cpuSeconds: 6, userCpuSeconds: 4, minorFaults: 12 });
  const one = { peakRssBytes: 1, cpuSeconds: 1, userCpuSeconds: 1, minorFaults: 1 };
  t.same(addStats(undefined, one), one);
});

t.test('finds children and samples them until they exit', async (t) => {
  const child = spawn('sleep', ['5']);
  t.teardown(() => { child.kill('SIGKILL'); });
  const sampler = new ProcSampler(child.pid!);
  t.ok(childPids(process.pid).includes(child.pid!));
  t.match(cmdlineOf(child.pid!), /sleep 5/);
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  const last = sampler.stop();
  t.ok(last && last.peakRssBytes > 0, 'the last sample survives the exit');
});
