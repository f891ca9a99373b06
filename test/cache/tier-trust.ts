/**
 * Issue 43, defect 3 and deliverable 4: the disk tier's trust model (src/cache/tier-trust.ts).
 * Files 0600 and folders 0700 whatever the umask; a --cache-dir owned by another user, or
 * writable by others, refused with one line naming the fix; sharing with a group only when
 * asked; another user cannot read cached bytes; two endpoints never share cached bytes.
 * Tests that change owners or run a reader as another user (uid 65534) need root.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { DiskCache } from '../../src/cache/disk-cache.js';
import { DISK_BLOCK_SIZE, TIER_FOLDER } from '../../src/cache/tier-layout.js';
import { tierNamespace } from '../../src/cache/tiered-client.js';
import { checkTierFolder, PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, tierAccess } from '../../src/cache/tier-trust.js';
import { InvalidArgumentError } from '../../src/errors.js';
import { runCli } from '../helpers/cli.js';
import { patternBytes } from '../helpers/fake-client.js';
import { runEnv } from '../helpers/run.js';

const B = DISK_BLOCK_SIZE;
const MiB = 1024 * 1024;
const NOBODY = 65534;
const NOGROUP = 65534;
const isRoot = process.getuid?.() === 0;
const BIG_FREE = async () => 1e15;

/** A temp folder that every user may enter (0755), so that only the tier's own modes stand between another user and its files. */
async function openDir(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-trust-'));
  chmodSync(dir, 0o755);
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Every file and folder below `dir` with its mode (permission and setgid bits) and group. */
function walk(dir: string): Array<{ p: string; dir: boolean; mode: number; gid: number }> {
  const out: Array<{ p: string; dir: boolean; mode: number; gid: number }> = [];
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const p = path.join(e.parentPath, e.name);
    const st = statSync(p);
    out.push({ p, dir: st.isDirectory(), mode: st.mode & 0o7777, gid: st.gid });
  }
  return out;
}

/** Writes a small object (one block: the batched small-file writer) and a large one (runs), then flushes. */
async function fill(c: DiskCache): Promise<void> {
  c.write({ ns: 'ns', key: 'small', etag: '"1"', index: 0 }, patternBytes(1000, 1));
  c.writeRun({ ns: 'ns', key: 'large', etag: '"2"', index: 0 }, patternBytes(3 * B, 2));
  await c.flush();
}

/** A node binary uid 65534 can run: this one, or a copy in a folder it can reach. */
let nodeForOthers: string | undefined;
function otherUsersNode(dir: string): string {
  if (nodeForOthers !== undefined) return nodeForOthers;
  const probe = spawnSync(process.execPath, ['-e', '0'], { uid: NOBODY, gid: NOGROUP, timeout: 30_000 });
  if (probe.status === 0) return (nodeForOthers = process.execPath);
  const copy = path.join(dir, 'node');
  copyFileSync(process.execPath, copy);
  chmodSync(copy, 0o755);
  return (nodeForOthers = copy);
}

/** What uid 65534 (with `gid`) gets reading `file` and listing `folder`: 'ok' or the error code. */
function readAs(node: string, gid: number, file: string, folder: string): { file: string; folder: string } {
  const script = `const fs = require('fs'); const r = {};
    try { fs.readFileSync(${JSON.stringify(file)}); r.file = 'ok'; } catch (e) { r.file = e.code; }
    try { fs.readdirSync(${JSON.stringify(folder)}); r.folder = 'ok'; } catch (e) { r.folder = e.code; }
    process.stdout.write(JSON.stringify(r));`;
  const out = spawnSync(node, ['-e', script], { uid: NOBODY, gid, timeout: 30_000, encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`reader as uid ${NOBODY} failed: ${out.stderr}`);
  return JSON.parse(out.stdout) as { file: string; folder: string };
}

t.test('files 0600 and folders 0700, even with umask 000', async (t) => {
  const dir = await openDir(t);
  const old = process.umask(0);
  t.teardown(() => process.umask(old));
  const c = await DiskCache.open({ dir, maxBytes: 64 * MiB, writeBytesPerSec: 1024 * MiB, freeBytes: BIG_FREE });
  t.teardown(() => c.close());
  await fill(c);
  const all = walk(path.join(dir, TIER_FOLDER));
  t.ok(all.filter((e) => !e.dir).length >= 4, 'cache files, sidecars and the ledger were written');
  t.same(all.filter((e) => !e.dir && e.mode !== PRIVATE_FILE_MODE).map((e) => `${e.p} ${e.mode.toString(8)}`), [], 'every file is 0600');
  t.same(all.filter((e) => e.dir && e.mode !== PRIVATE_DIR_MODE).map((e) => `${e.p} ${e.mode.toString(8)}`), [], 'every folder is 0700');
  t.equal(statSync(path.join(dir, TIER_FOLDER)).mode & 0o7777, PRIVATE_DIR_MODE, 'the tier folder too');
});

t.test('a tier of an earlier version (0755 folders, 0644 files) is closed to others at open', async (t) => {
  const dir = await openDir(t);
  const tier = path.join(dir, TIER_FOLDER);
  mkdirSync(path.join(tier, 'objects', '00'), { recursive: true, mode: 0o755 });
  chmodSync(tier, 0o755);
  const c = await DiskCache.open({ dir, maxBytes: 64 * MiB, writeBytesPerSec: 1024 * MiB, freeBytes: BIG_FREE });
  t.teardown(() => c.close());
  t.equal(statSync(tier).mode & 0o777, PRIVATE_DIR_MODE);
  t.equal(statSync(path.join(tier, 'objects', '00')).mode & 0o777, PRIVATE_DIR_MODE);
});

t.test('a --cache-dir another user owns, or that others may write, is refused with one line naming the fix', { skip: !isRoot && 'needs root (chown)' }, async (t) => {
  const open = (dir: string, o: { group?: string; mode?: number } = {}) =>
    DiskCache.open({ dir, maxBytes: 64 * MiB, writeBytesPerSec: 1024 * MiB, freeBytes: BIG_FREE, access: tierAccess(o) });
  const base = await openDir(t);

  const theirs = path.join(base, 'theirs');
  mkdirSync(theirs, { mode: 0o700 });
  chownSync(theirs, NOBODY, NOGROUP);
  await t.rejects(open(theirs), { code: 'SLUICE_INVALID_ARGUMENT', message: /belongs to uid 65534, not to this process's user \(uid 0\)/ }, 'owned by uid 65534');
  const err = await open(theirs).then(() => { throw new Error('opened'); }, (e: unknown) => e as InvalidArgumentError);
  t.match(err.oneLine(), /chown 0 .*--cache-dir-group/, 'the line names the fix');
  t.notOk(err.oneLine().includes('\n'), 'one line');
  t.notOk(readdirSync(theirs).includes(TIER_FOLDER), 'nothing was created in it');

  const open777 = path.join(base, 'open777');
  mkdirSync(open777);
  chmodSync(open777, 0o777);
  await t.rejects(open(open777), { message: /writable by every user \(mode 0777\)/ }, 'mode 0777');
  const e777 = await open(open777).then(() => { throw new Error('opened'); }, (e: unknown) => e as InvalidArgumentError);
  t.match(e777.oneLine(), /chmod o-w/);
  chmodSync(open777, 0o1777);
  await t.rejects(open(open777), { message: /writable by every user/ }, 'mode 1777 (sticky, as /tmp): refused too');

  const group = path.join(base, 'group');
  mkdirSync(group);
  chownSync(group, 0, NOGROUP);
  chmodSync(group, 0o770);
  await t.rejects(open(group), { message: /writable by its group \(gid 65534, mode 0770\) but the tier is not shared/ }, 'group-writable, not shared');
  const c = await open(group, { group: String(NOGROUP), mode: 0o770 });
  await c.close();
  t.pass('group-writable and shared with that group: opens');

  // The tier's own folder is checked as well: planted by another user before we came.
  const planted = path.join(base, 'planted');
  mkdirSync(path.join(planted, TIER_FOLDER), { recursive: true, mode: 0o700 });
  chownSync(path.join(planted, TIER_FOLDER), NOBODY, NOGROUP);
  await t.rejects(open(planted), { message: new RegExp(`${TIER_FOLDER}.* belongs to uid 65534`) }, 'a tier folder another user made');

  // A folder of root's that others cannot write is fine (root can read everything anyway).
  const fine = path.join(base, 'fine');
  mkdirSync(fine, { mode: 0o755 });
  await (await open(fine)).close();
  t.pass('root-owned 0755: opens');
});

t.test('another user cannot read the cached bytes; a member of the sharing group can', { skip: !isRoot && 'needs root (setuid)' }, async (t) => {
  const dir = await openDir(t);
  const node = otherUsersNode(dir);
  const cacheDir = path.join(dir, 'cache');
  const c = await DiskCache.open({ dir: cacheDir, maxBytes: 64 * MiB, writeBytesPerSec: 1024 * MiB, freeBytes: BIG_FREE });
  await fill(c);
  const file = c.filesOf({ ns: 'ns', key: 'large', etag: '"2"' }).data;
  const small = c.filesOf({ ns: 'ns', key: 'small', etag: '"1"' }).data;
  await c.close();
  for (const f of [file, small]) {
    const got = readAs(node, NOGROUP, f, path.dirname(f));
    t.equal(got.file, 'EACCES', `uid ${NOBODY} cannot read ${path.basename(f)}`);
    t.equal(got.folder, 'EACCES', `uid ${NOBODY} cannot list its folder`);
  }

  // Shared with group 65534 (umask 022 would make files 0640: set to 0660 anyway).
  const old = process.umask(0o022);
  t.teardown(() => process.umask(old));
  const sharedDir = path.join(dir, 'shared');
  const s = await DiskCache.open({ dir: sharedDir, maxBytes: 64 * MiB, writeBytesPerSec: 1024 * MiB, freeBytes: BIG_FREE, access: tierAccess({ group: 'nogroup' }) });
  await fill(s);
  const sharedFile = s.filesOf({ ns: 'ns', key: 'large', etag: '"2"' }).data;
  await s.close();
  const all = walk(path.join(sharedDir, TIER_FOLDER));
  t.same(all.filter((e) => !e.dir && (e.mode !== 0o660 || e.gid !== NOGROUP)).map((e) => `${e.p} ${e.mode.toString(8)} ${e.gid}`), [], 'shared files: 0660, the group\'s');
  t.same(all.filter((e) => e.dir && (e.mode !== 0o2770 || e.gid !== NOGROUP)).map((e) => `${e.p} ${e.mode.toString(8)} ${e.gid}`), [], 'shared folders: 2770, the group\'s');
  t.same(readAs(node, NOGROUP, sharedFile, path.dirname(sharedFile)), { file: 'ok', folder: 'ok' }, 'a member of the group reads them');
  t.same(readAs(node, NOBODY + 1, sharedFile, path.dirname(sharedFile)), { file: 'EACCES', folder: 'EACCES' }, 'a user outside the group does not');
});

t.test('the sharing options: a mode without a group, a mode for others, an unknown group, a group this process is not in', async (t) => {
  t.throws(() => tierAccess({ mode: 0o770 }), { message: /--cache-dir-mode 0770 shares the disk tier, but with no group/ });
  t.same(tierAccess({ mode: 0o700 }, { umask: 0o022 }), tierAccess({}, { umask: 0o022 }), '0700 alone is the private default');
  t.throws(() => tierAccess({ group: '0', mode: 0o775 }), { message: /not a mode to share/ }, 'others get nothing');
  t.throws(() => tierAccess({ group: '0', mode: 0o670 }), { message: /not a mode to share/ }, 'the owner keeps rwx');
  t.throws(() => tierAccess({ group: 'no-such-group-sluice' }), { message: /no such group/ });
  t.throws(() => tierAccess({ group: '4242' }, { root: false, groups: [1, 2] }), { message: /this process is not in that group/ });
  t.same(tierAccess({ group: '4242' }, { root: false, groups: [4242], umask: 0o022 }),
    { dirMode: 0o2770, fileMode: 0o660, gid: 4242, group: '4242', fixFileMode: true, fixDirMode: true }, 'shared: 0770 by default, files 0660 set again past umask 022');
  t.same(tierAccess({ group: '4242', mode: 0o750 }, { root: false, groups: [4242], umask: 0o022 }),
    { dirMode: 0o2750, fileMode: 0o640, gid: 4242, group: '4242', fixFileMode: false, fixDirMode: true }, 'members that only read: files 0640');
  t.same(tierAccess({}, { umask: 0o022 }), { dirMode: 0o700, fileMode: 0o600, fixFileMode: false, fixDirMode: false }, 'private: no chmod needed under a usual umask');
  t.equal(tierAccess({}, { umask: 0o277 }).fixFileMode, true, 'a umask that cuts the owner\'s bits: chmod after create');
});

t.test('checkTierFolder without root: modes of a folder this user owns', async (t) => {
  const dir = await openDir(t);
  const access = tierAccess({});
  chmodSync(dir, 0o777);
  t.throws(() => checkTierFolder(dir, access), { message: /writable by every user/ });
  chmodSync(dir, 0o775);
  t.throws(() => checkTierFolder(dir, access), { message: /writable by its group/ });
  chmodSync(dir, 0o755);
  t.doesNotThrow(() => checkTierFolder(dir, access));
});

t.test('the tier key includes the endpoint however it was given, and the region', async (t) => {
  const keep = { ...process.env };
  t.teardown(() => { for (const v of ['AWS_ENDPOINT_URL', 'AWS_ENDPOINT_URL_S3', 'AWS_REGION', 'AWS_DEFAULT_REGION']) { if (keep[v] === undefined) delete process.env[v]; else process.env[v] = keep[v]; } });
  const ns = (env: Record<string, string>, o: { endpoint?: string; region?: string } = {}) => {
    for (const v of ['AWS_ENDPOINT_URL', 'AWS_ENDPOINT_URL_S3', 'AWS_REGION', 'AWS_DEFAULT_REGION']) delete process.env[v];
    Object.assign(process.env, env);
    return tierNamespace({ cacheDirWriteRate: 1, ...o }, 'bkt');
  };
  const a = 'http://127.0.0.1:9001';
  const b = 'http://127.0.0.1:9002';
  t.not(ns({}, { endpoint: a }), ns({}, { endpoint: b }), '--endpoint A vs B');
  t.not(ns({ AWS_ENDPOINT_URL: a }), ns({ AWS_ENDPOINT_URL: b }), 'AWS_ENDPOINT_URL A vs B');
  t.not(ns({ AWS_ENDPOINT_URL_S3: a }), ns({ AWS_ENDPOINT_URL_S3: b }), 'AWS_ENDPOINT_URL_S3 A vs B');
  t.not(ns({ AWS_ENDPOINT_URL: a }), ns({}), 'AWS_ENDPOINT_URL vs AWS S3');
  t.not(ns({ AWS_ENDPOINT_URL_S3: a, AWS_ENDPOINT_URL: b }), ns({ AWS_ENDPOINT_URL: b }), 'AWS_ENDPOINT_URL_S3 wins over AWS_ENDPOINT_URL, as for the client');
  t.equal(ns({ AWS_ENDPOINT_URL: a }), ns({}, { endpoint: a }), 'one endpoint given two ways: one namespace');
  t.equal(ns({}, { endpoint: `${a}/` }), ns({}, { endpoint: a.toUpperCase().replace('HTTP', 'http') }), 'a trailing slash or the case of the host changes nothing');
  t.not(ns({ AWS_REGION: 'us-east-1' }), ns({ AWS_REGION: 'eu-west-1' }), 'AWS_REGION: two regions of AWS S3');
  t.not(ns({ AWS_REGION: 'us-east-1' }, { endpoint: a }), ns({ AWS_REGION: 'eu-west-1' }, { endpoint: a }), 'the region counts with an endpoint too');
  t.not(ns({}, { region: 'us-east-1' }), ns({}, { region: 'eu-west-1' }), '--region');
});

t.test('sluice run: a refused --cache-dir fails the command with one line naming the fix, before any S3 request', async (t) => {
  const base = await openDir(t);
  const open777 = path.join(base, 'open777');
  mkdirSync(open777);
  chmodSync(open777, 0o777);
  // An endpoint nothing listens on: the command must fail on the folder, not on S3.
  const run = (extra: string[]) => runCli(['run', '--channel', 'train=s3://bkt/p/', '--root', path.join(base, 'root'), '--endpoint', 'http://127.0.0.1:9', '--path-style',
    '--metrics-port=-1', ...extra, '--', process.execPath, '-e', '0'], runEnv(), 60_000);
  for (const [what, extra, want] of [
    ['a --cache-dir of mode 0777', ['--cache-dir', open777], /writable by every user.*chmod o-w/],
    ['--cache-dir-mode without a group', ['--cache-dir', path.join(base, 'mine'), '--cache-dir-mode', '0770'], /--cache-dir-mode 0770 shares the disk tier, but with no group.*--cache-dir-group NAME/],
  ] as const) {
    const r = await run([...extra]);
    const lines = r.stderr.trim().split('\n').filter((l) => !l.startsWith('{'));
    t.equal(r.code, 2, `${what}: exit 2 (a user error)`);
    t.equal(lines.length, 1, `${what}: one line (${r.stderr.trim()})`);
    t.match(lines[0] ?? '', want, `${what}: names the problem and the fix`);
  }
});
