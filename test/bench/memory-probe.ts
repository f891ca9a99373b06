import t from 'tap';
import { readFileSync } from 'node:fs';
import { describeMemoryProbe, probeMemory } from '../../src/bench/memory-probe.js';
import { markdownTable } from '../../src/bench/report.js';
import { fig, results } from '../helpers/bench-results.js';

t.test('the probe times new memory in a child process and reads free page reporting', async (t) => {
  const p = probeMemory();
  t.ok(p, 'the probe ran');
  t.ok(Number.isFinite(p!.msPer8MiB) && p!.msPer8MiB > 0, `ms per 8 MiB is a positive time (${p!.msPer8MiB.toFixed(1)})`);
  let order: number | null = null;
  try {
    order = Number(readFileSync('/sys/module/page_reporting/parameters/page_reporting_order', 'utf8').trim());
  } catch {
    order = null;
  }
  t.equal(p!.freePageReportingOrder, order, 'the reporting order is what the kernel says, or null without page_reporting');
});

t.test('the report says what new memory costs, and whether it goes back to a host', async (t) => {
  t.match(describeMemoryProbe({ msPer8MiB: 35.14, freePageReportingOrder: 9 }), /35\.1 ms to map and first write 8 MiB.*free blocks of 2 MiB and more back to the host/);
  t.match(describeMemoryProbe({ msPer8MiB: 2.5, freePageReportingOrder: 7 }), /free blocks of 512 KiB and more/);
  t.match(describeMemoryProbe({ msPer8MiB: 2.5, freePageReportingOrder: null }), /2\.5 ms.*does not hand free memory back/);
  const res = results([fig({ target: 'FastFile', value: 190 }), fig({ target: 's3fs', value: 95 })]);
  t.notMatch(markdownTable(res), /New memory on this machine/, 'no probe, no line');
  res.machine.memory = { msPer8MiB: 12, freePageReportingOrder: null };
  t.match(markdownTable(res), /New memory on this machine: 12\.0 ms/, 'the table carries the probe');
});
