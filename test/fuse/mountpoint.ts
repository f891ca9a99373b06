import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { checkFuseAvailable, libfuseCandidates, mountAt, prepareMountpoint, readMounts } from '../../src/fuse/mountpoint.js';
import { mountCore } from '../../src/fuse/kernel-mount.js';
import { MemCore } from '../helpers/mem-core.js';
import { tempMountpoint } from '../helpers/fuse.js';

function withEnv(vars: Record<string, string>, fn: () => void): void {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  try { fn(); } finally {
    for (const [k, v] of Object.entries(saved)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; }
  }
}

t.test('checkFuseAvailable', async (t) => {
  t.doesNotThrow(() => checkFuseAvailable(), 'this host has FUSE');
  withEnv({ SLUICE_DEV_FUSE: '/nonexistent/fuse' }, () => {
    t.throws(() => checkFuseAvailable(), { code: 'SLUICE_FUSE_UNAVAILABLE', hint: /--device \/dev\/fuse --cap-add SYS_ADMIN/ });
  });
  withEnv({ SLUICE_DEV_FUSE: '/etc/hostname' }, () => {
    t.throws(() => checkFuseAvailable(), { code: 'SLUICE_FUSE_UNAVAILABLE' }, 'a regular file is not the device');
  });
  withEnv({ SLUICE_LIBFUSE_PATHS: '/nonexistent/libfuse.so.2:/also/not' }, () => {
    t.same(libfuseCandidates(), ['/nonexistent/libfuse.so.2', '/also/not']);
    t.throws(() => checkFuseAvailable(), { code: 'SLUICE_FUSE_UNAVAILABLE', hint: /apt-get install -y libfuse2/ });
  });
});

t.test('prepareMountpoint', async (t) => {
  const base = await mkdtemp(path.join(os.tmpdir(), 'sluice-test-mp-'));
  t.teardown(() => rm(base, { recursive: true, force: true }));
  const empty = path.join(base, 'empty');
  await mkdir(empty);
  await t.resolves(prepareMountpoint(empty), 'an empty folder is fine');
  await t.rejects(prepareMountpoint(path.join(base, 'missing')), { code: 'SLUICE_MOUNTPOINT', message: /does not exist/, hint: /mkdir -p/ });
  await writeFile(path.join(base, 'file'), 'x');
  await t.rejects(prepareMountpoint(path.join(base, 'file')), { code: 'SLUICE_MOUNTPOINT', message: /not a directory/ });
  await t.rejects(prepareMountpoint(path.join(base, 'file', 'sub')), { code: 'SLUICE_MOUNTPOINT', message: /not a directory/ });
  await t.rejects(prepareMountpoint(base), { code: 'SLUICE_MOUNTPOINT', message: /not empty \(2 entries\)/ });

  const live = await tempMountpoint(t, 'live');
  const m = await mountCore(new MemCore({ '/x': Buffer.from('x') }), live, { allowOther: true, attrTimeoutSec: 1, readaheadKb: 0, fuseTimeoutMs: 30_000 });
  t.teardown(() => m.unmount());
  const line = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').find((l) => l.split(' ')[4] === live) ?? '';
  t.match(line, /allow_other/, '--allow-other reaches the mount');
  await t.rejects(prepareMountpoint(live), { code: 'SLUICE_MOUNTPOINT', message: /already a mount \(fuse\.sluice sluice\)/ }, 'a live mount is refused');
  await m.unmount();
  await t.resolves(prepareMountpoint(live), 'fine again after unmount');
});

t.test('readMounts decodes escaped mount points', async (t) => {
  const mounts = await readMounts();
  t.ok(mounts.some((m) => m.mountpoint === '/'), 'the root is listed');
  t.equal(await mountAt('/definitely/not/a/mount'), undefined);
});
