/**
 * Issue 45: sluice installs as a package. `npm pack` of this checkout, then `npm install -g`
 * into a temporary prefix, gives a `sluice` on the PATH whose native addon was built from the
 * sources in the tarball by its install script, and `npx sluice` finds it.
 *
 * Offline and bounded: the tarball is installed from its unpacked folder with the checkout's
 * node_modules beside it, so npm resolves no dependency from the registry (a tarball install
 * would fetch them); the pack, the global install, the bin link and the install script are
 * npm's own.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';

const root = path.resolve(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string; bin: Record<string, string> };
/** npm pack and a global install with a native build take well under a minute here; a hang fails. */
const STEP_TIMEOUT_MS = 300_000;

function sh(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd: opts.cwd ?? root, env: opts.env ?? process.env, timeout: STEP_TIMEOUT_MS, maxBuffer: 32 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1) : 0, stdout, stderr });
    });
  });
}

t.test('npm pack, npm install -g: sluice on the PATH with its native addon; npx sluice', async (t) => {
  if (!existsSync(path.join(root, 'dist', 'cli.js'))) throw new Error('build first: npm run build');
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'sluice-pack-'));
  t.teardown(() => rm(tmp, { recursive: true, force: true }));
  // An environment of npm's own: no tap hooks, a cache of its own, offline.
  const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(NODE_OPTIONS|_?TAP|npm_)/i.test(k)));
  Object.assign(env, { npm_config_cache: path.join(tmp, 'cache'), npm_config_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' });

  // dist/ is built by the test run; --ignore-scripts skips prepack's second build.
  const pack = await sh('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], { env });
  t.equal(pack.code, 0, pack.stderr.slice(-500));
  const packed = (JSON.parse(pack.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>)[0]!;
  const files = packed.files.map((f) => f.path);
  for (const f of ['dist/cli.js', 'native/binding.gyp', 'native/binding.c', 'README.md', 'package.json']) t.ok(files.includes(f), `the tarball has ${f}`);
  t.ok(files.some((f) => /^native\/src\/.+\.c$/.test(f)) && files.some((f) => /^native\/include\/.+\.h$/.test(f)), 'and the addon\'s C sources and headers');
  t.same(files.filter((f) => f.startsWith('native/build/')), [], 'and no local build of the addon (it is built at install, for the machine installing)');
  t.equal(pkg.bin.sluice, 'dist/cli.js');
  t.match(readFileSync(path.join(root, 'dist', 'cli.js'), 'utf8'), /^#!\/usr\/bin\/env node\n/, 'the bin has a node shebang');

  const unpacked = path.join(tmp, 'unpacked');
  await mkdir(unpacked);
  const tar = await sh('tar', ['xzf', path.join(tmp, packed.filename), '-C', unpacked]);
  t.equal(tar.code, 0, tar.stderr);
  const dir = path.join(unpacked, 'package');
  await symlink(realpathSync(path.join(root, 'node_modules')), path.join(dir, 'node_modules'));
  const prefix = path.join(tmp, 'prefix');
  const install = await sh('npm', ['install', '-g', '--prefix', prefix, '--allow-scripts=sluice', dir], { env, cwd: tmp });
  t.equal(install.code, 0, install.stderr.slice(-1500));
  const addon = path.join(dir, 'native', 'build', 'Release', 'sluice_native.node');
  t.ok(existsSync(addon), 'the install script built the native addon from the tarball\'s sources');
  const load = await sh(process.execPath, ['-e', `process.dlopen({ exports: {} }, ${JSON.stringify(addon)}); console.log('loaded')`], { env });
  t.equal(load.stdout.trim(), 'loaded', `the addon loads (${load.stderr.slice(0, 300)})`);

  const bin = path.join(prefix, 'bin');
  t.same(await readdir(bin), ['sluice'], 'npm linked the sluice bin');
  const pathEnv = { ...env, PATH: `${bin}:${env.PATH ?? ''}` };
  const version = await sh('sluice', ['--version'], { env: pathEnv, cwd: tmp });
  t.equal(version.stdout.trim(), pkg.version, `sluice on the PATH runs (${version.stderr.slice(0, 300)})`);
  const help = await sh('sluice', ['mount', '--help'], { env: pathEnv, cwd: tmp });
  t.match(help.stdout, /Usage: sluice mount/);
  const npx = await sh('npx', ['--no-install', 'sluice', '--version'], { env: { ...pathEnv, npm_config_prefix: prefix }, cwd: tmp });
  t.equal(npx.stdout.trim(), pkg.version, `npx sluice runs the installed one (${npx.stderr.slice(-300)})`);
});
