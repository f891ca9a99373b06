import t from 'tap';
import { markFirstByte, markFirstFile } from '../../src/metrics/milestones.js';
import { registry } from '../../src/metrics/metrics.js';
import { has, parseExposition, sumOf } from '../../src/metrics/exposition.js';

t.test('first byte and first file are set once per channel and mode', async (t) => {
  const m = { channel: 'ms-test', mode: 'FastFile' };
  let e = parseExposition(await registry.metrics());
  t.notOk(has(e, 'sluice_time_to_first_byte_seconds', m), 'absent until the first byte');
  markFirstByte('ms-test', 'FastFile');
  e = parseExposition(await registry.metrics());
  const first = sumOf(e, 'sluice_time_to_first_byte_seconds', m);
  t.ok(first > 0 && first <= process.uptime());
  await new Promise((r) => setTimeout(r, 20));
  markFirstByte('ms-test', 'FastFile');
  markFirstFile('ms-test', 'FastFile');
  const batch = sumOf(parseExposition(await registry.metrics()), 'sluice_time_to_first_batch_seconds', m);
  await new Promise((r) => setTimeout(r, 20));
  markFirstFile('ms-test', 'FastFile');
  markFirstByte('ms-test', 'Pipe');
  e = parseExposition(await registry.metrics());
  t.equal(sumOf(e, 'sluice_time_to_first_byte_seconds', m), first, 'first byte kept');
  t.equal(sumOf(e, 'sluice_time_to_first_batch_seconds', m), batch, 'first file kept');
  t.ok(batch > first);
  t.ok(sumOf(e, 'sluice_time_to_first_byte_seconds', { channel: 'ms-test', mode: 'Pipe' }) > first, 'modes are separate');
});
