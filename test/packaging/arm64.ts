/**
 * Issue 45, item 10: the linux-arm64 install path, tested on the machine at hand.
 *  - fuse-native ships prebuilds for linux-x64 and darwin-x64 only (the reason the path
 *    exists; if an upgrade brings linux-arm64, this says so and the path may go);
 *  - scripts/fuse-native-from-source.mjs, the arm64 path's step, builds fuse-native's binding
 *    from its C source against the system's libfuse.so.2 on this machine; a copy of
 *    fuse-native that loads that build mounts a file system that the kernel reads from
 *    (the same steps as on arm64, but for the local CPU);
 *  - scripts/cross-compile-arm64.sh (also run by .ci/run) builds sluice's addon and
 *    fuse-native's binding for AArch64 with Debian's cross compiler;
 *  - the README and docker/README.md give the commands.
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { cleanupMount, tempMountpoint } from '../helpers/fuse.js';

const root = path.resolve(import.meta.dirname, '../..');
const script = path.join(root, 'scripts/fuse-native-from-source.mjs');
const fuseDir = path.join(root, 'node_modules/fuse-native');

t.test('fuse-native has no linux-arm64 prebuild: the reason for the from-source path', async (t) => {
  const { hasPrebuild } = await import(script) as { hasPrebuild: (dir: string, platform: string, arch: string) => boolean };
  t.ok(hasPrebuild(path.join(fuseDir, 'prebuilds'), 'linux', 'x64'), 'linux-x64 has one');
  t.notOk(hasPrebuild(path.join(fuseDir, 'prebuilds'), 'linux', 'arm64'), 'linux-arm64 has none');
  // And its own from-source build would link fuse-shared-library-linux's libfuse.so: x86-64 only.
  const lib = createRequire(path.join(fuseDir, 'package.json'))('fuse-shared-library').lib as string;
  const elf = readFileSync(lib);
  t.equal(elf.readUInt16LE(18), 62, `${path.basename(lib)} bundled for the build is x86-64 (EM_X86_64), unusable on arm64`);
});

t.test('fuse-native built from source against libfuse.so.2 mounts and serves reads', async (t) => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'sluice-fuse-src-'));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  // A copy of fuse-native without its prebuilds, its dependencies linked: it can only load
  // the binding built here (node-gyp-build tries build/Release first).
  const copy = path.join(tmp, 'node_modules/fuse-native');
  mkdirSync(copy, { recursive: true });
  for (const f of ['index.js', 'package.json', 'fuse-native.c']) cpSync(path.join(fuseDir, f), path.join(copy, f));
  const req = createRequire(path.join(fuseDir, 'package.json'));
  for (const dep of ['nanoresource', 'fuse-shared-library', 'napi-macros', 'node-gyp-build']) {
    symlinkSync(path.dirname(req.resolve(`${dep}/package.json`)), path.join(tmp, 'node_modules', dep));
  }
  execFileSync(process.execPath, [script, '--out', path.join(copy, 'build/Release/fuse.node')], { stdio: 'pipe', timeout: 120_000 });
  t.ok(existsSync(path.join(copy, 'build/Release/fuse.node')), 'built');
  t.notOk(existsSync(path.join(copy, 'prebuilds')), 'no prebuild to fall back on');

  type Cb = (code: number, ...rest: unknown[]) => void;
  const Fuse = createRequire(path.join(copy, 'package.json'))(copy) as {
    new (mnt: string, ops: Record<string, unknown>, opts?: Record<string, unknown>): { mount(cb: (err?: Error) => void): void; unmount(cb: (err?: Error) => void): void };
    ENOENT: number;
  };
  const content = Buffer.from(`from a binding built from source on ${process.arch}\n`);
  const stat = (mode: number, size: number) => ({ mtime: new Date(), atime: new Date(), ctime: new Date(), nlink: 1, size, mode, uid: process.getuid!(), gid: process.getgid!() });
  const ops = {
    readdir: (p: string, cb: Cb) => (p === '/' ? cb(0, ['hello']) : cb(Fuse.ENOENT)),
    getattr: (p: string, cb: Cb) => (p === '/' ? cb(0, stat(0o40755, 4096)) : p === '/hello' ? cb(0, stat(0o100644, content.length)) : cb(Fuse.ENOENT)),
    open: (_p: string, _flags: number, cb: Cb) => cb(0, 42),
    release: (_p: string, _fd: number, cb: Cb) => cb(0),
    read: (_p: string, _fd: number, buf: Buffer, len: number, pos: number, cb: Cb) => {
      const part = content.subarray(pos, pos + len);
      part.copy(buf);
      cb(part.length);
    },
  };
  const mnt = await tempMountpoint(t, 'fuse-src');
  const fuse = new Fuse(mnt, ops, { force: true, mkdir: false });
  await new Promise<void>((resolve, reject) => fuse.mount((err) => (err ? reject(err) : resolve())));
  t.teardown(async () => {
    await new Promise<void>((resolve) => fuse.unmount(() => resolve()));
    await cleanupMount(mnt);
  });
  t.same(await readFile(path.join(mnt, 'hello')), content, 'the kernel read the file through the from-source binding');
});

let crossCc = '';
try { crossCc = execFileSync('sh', ['-c', 'command -v aarch64-linux-gnu-gcc'], { encoding: 'utf8' }).trim(); } catch { /* absent */ }
t.test('sluice\'s addon and fuse-native cross-compile for linux-arm64', {
  skip: crossCc === '' ? 'aarch64-linux-gnu-gcc is not installed (.ci/run installs gcc-aarch64-linux-gnu and runs the script itself)' : false,
}, async (t) => {
  const out = execFileSync('sh', [path.join(root, 'scripts/cross-compile-arm64.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 240_000 });
  t.match(out, /build for linux-arm64/, 'both are AArch64 shared objects');
});

t.test('the README and docker/README.md give the arm64 commands', async (t) => {
  for (const f of ['README.md', 'docker/README.md']) {
    const text = readFileSync(path.join(root, f), 'utf8');
    t.match(text, /arm64/, `${f} mentions arm64`);
    t.match(text, /fuse-native-from-source\.mjs/, `${f} names the from-source step`);
  }
});
