/**
 * Issue 7's end-to-end checks for Pipe mode, with the real local S3 server, the fault
 * proxy and a real FIFO read by a child process (`cat`):
 *  - sluice_served_bytes_total{mode="Pipe"} grows by exactly the bytes the reader got,
 *    and sluice_channel_objects_total by the objects of the epoch;
 *  - sluice_pipe_empty_seconds_total ("S3 is slow") rises when the emulated S3 latency
 *    rises. GETs are made one at a time, with one part of read-ahead, so after the reader
 *    connects every further object costs at least one delayed GET.
 * Only lower bounds on time are asserted.
 */
import t from 'tap';
import { existsSync } from 'node:fs';
import { seedDataset, sourceBytes } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { setLogLevel } from '../../src/log.js';
import { parseExposition, sumOf } from '../../src/metrics/exposition.js';
import { registry } from '../../src/metrics/metrics.js';
import { startPipeChannel } from '../../src/pipe/pipe-channel.js';
import type { ObjectInfo } from '../../src/s3/object-client.js';
import { createObjectClient } from '../../src/s3/s3-client.js';
import { startFaultProxy } from '../helpers/fault-proxy.js';
import { readFifo, tempDir, waitFor } from '../helpers/pipe.js';

setLogLevel('warn');

const CHANNEL = 'pipestarve';
const OBJECTS = 6;
const SIZE = 200_000;
/** One part per object, and one part of read-ahead: each object needs its own GET. */
const PART = 256 * 1024;
const LATENCY_MS = 400;

async function counters() {
  const e = parseExposition(await registry.metrics());
  return {
    served: sumOf(e, 'sluice_served_bytes_total', { channel: CHANNEL, mode: 'Pipe' }),
    objects: sumOf(e, 'sluice_channel_objects_total', { channel: CHANNEL, mode: 'Pipe' }),
    empty: sumOf(e, 'sluice_pipe_empty_seconds_total', { channel: CHANNEL }),
    full: sumOf(e, 'sluice_pipe_full_seconds_total', { channel: CHANNEL }),
  };
}

t.test('Pipe: counters match the bytes read; "FIFO empty" time rises with S3 latency', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('pipestarve');
  const seeded = await seedDataset(s3, 'pipestarve', 'p/', { smallFiles: { count: OBJECTS, size: SIZE, folders: 1 }, seed: 5 });
  const proxy = await startFaultProxy(s3.port);
  t.teardown(() => proxy.close());
  const client = createObjectClient({ bucket: 'pipestarve', endpoint: proxy.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 3 });
  t.teardown(() => client.close());
  const listed: ObjectInfo[] = [];
  for await (const o of client.list('p/')) listed.push(o);
  listed.sort((a, b) => a.key.localeCompare(b.key));
  const expected = Buffer.concat(listed.map((o) => sourceBytes(seeded.find((s) => s.key === o.key)!)));

  const ch = await startPipeChannel({
    client, channel: CHANNEL, dataDir: await tempDir(t), recordWrapper: 'None', compression: 'None', epochs: 2,
    partSize: PART, maxInflight: PART, maxRequests: 1,
    // Epoch 1 is served with the latency on from its first GET.
    itemsForEpoch: (epoch) => {
      proxy.set({ latencyMs: epoch === 0 ? 0 : LATENCY_MS });
      return listed.map((info) => ({ kind: 'object' as const, info }));
    },
  });
  t.teardown(() => ch.stop());

  const readEpoch = async (epoch: number) => {
    await waitFor(() => existsSync(ch.fifoPath(epoch)), 60_000, `FIFO of epoch ${epoch}`);
    return readFifo(ch.fifoPath(epoch));
  };
  const c0 = await counters();
  const e0 = await readEpoch(0);
  const c1 = await counters();
  const e1 = await readEpoch(1);
  await ch.done;
  const c2 = await counters();

  t.ok(e0.equals(expected), 'epoch 0 bytes');
  t.ok(e1.equals(expected), 'epoch 1 bytes');
  t.equal(c1.served - c0.served, e0.length, 'served bytes = bytes the reader got (epoch 0)');
  t.equal(c2.served - c1.served, e1.length, 'served bytes = bytes the reader got (epoch 1)');
  t.equal(c1.objects - c0.objects, OBJECTS, 'objects counted (epoch 0)');
  t.equal(c2.objects - c1.objects, OBJECTS, 'objects counted (epoch 1)');
  const slowEmpty = c2.empty - c1.empty;
  t.comment(`FIFO empty: ${(c1.empty - c0.empty).toFixed(3)} s without latency, ${slowEmpty.toFixed(3)} s at ${LATENCY_MS} ms per GET; full ${(c2.full - c0.full).toFixed(3)} s`);
  t.ok(slowEmpty >= ((OBJECTS - 2) * LATENCY_MS) / 1000, `FIFO empty ${slowEmpty.toFixed(3)} s >= ${OBJECTS - 2} delayed GETs`);
});
