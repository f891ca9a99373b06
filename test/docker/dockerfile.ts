/**
 * docker/Dockerfile and .dockerignore, checked without a Docker daemon (CI has none):
 *  - every FROM is an image pinned to an exact release (x.y.z tag or a digest) or an earlier
 *    stage; the ARG defaults are resolved as Docker does for the FROM lines;
 *  - .dockerignore keeps node_modules, native/build, dist and .git out of the context;
 *  - every COPY source from the context exists and is not ignored;
 *  - the build stage's steps run on the context as Docker would send it: its COPY lines copy
 *    from a filtered copy of the repository into a temporary WORKDIR, and its RUN steps run
 *    there, except those that need a registry or root (apt-get; the `npm ci` step, also its
 *    arm64 branch: node_modules is linked in its place; `npm prune`: it would prune the
 *    linked node_modules). The result must run: dist/cli.js --version;
 *  - the final stage's `sluice` wrapper (RUN printf ...) is written with its paths moved under
 *    the temporary folder and runs.
 * A daemon, where there is one, would be the better check; this one runs everywhere.
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../..');
const dockerfile = readFileSync(path.join(root, 'docker/Dockerfile'), 'utf8');
const ignoreText = readFileSync(path.join(root, '.dockerignore'), 'utf8');

interface Instr { op: string; args: string }
/** Instructions, continuation lines joined, comments dropped. */
function parse(text: string): Instr[] {
  const out: Instr[] = [];
  let cur = '';
  for (const raw of text.split('\n')) {
    if (/^\s*#/.test(raw)) continue; // comments, also inside a continued instruction
    const line = raw.replace(/\s+$/, '');
    if (line.endsWith('\\')) { cur += `${line.slice(0, -1)} `; continue; }
    cur += line;
    const m = /^\s*([A-Za-z]+)\s+(.*)$/s.exec(cur);
    if (m) out.push({ op: m[1]!.toUpperCase(), args: m[2]!.trim() });
    cur = '';
  }
  return out;
}

/** .dockerignore patterns as regular expressions over context-relative paths (Go filepath.Match plus **). */
const ignores = ignoreText.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#')).map((p) => {
  const re = p.replace(/^\/+/, '').replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*\*\//g, '\u0000').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]').replace(/\u0000/g, '(?:.*/)?');
  return { pattern: p, re: new RegExp(`^${re}$`) };
});
/** Whether Docker leaves `rel` (or a folder above it) out of the context. */
function ignored(rel: string): string | undefined {
  const parts = rel.split('/');
  for (let i = 1; i <= parts.length; i++) {
    const prefix = parts.slice(0, i).join('/');
    const hit = ignores.find((g) => g.re.test(prefix));
    if (hit) return hit.pattern;
  }
  return undefined;
}

const instrs = parse(dockerfile);
const globalArgs: Record<string, string> = {};
for (const i of instrs) {
  if (i.op === 'FROM') break;
  if (i.op === 'ARG') { const [k, v] = i.args.split('='); if (v !== undefined) globalArgs[k!] = v; }
}
const expand = (s: string) => s.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a, b) => globalArgs[a ?? b] ?? '');
interface Stage { image: string; name: string | undefined; steps: Instr[] }
const stages: Stage[] = [];
for (const i of instrs) {
  if (i.op === 'FROM') {
    const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(i.args)!;
    stages.push({ image: expand(m[1]!), name: m[2], steps: [] });
  } else stages.at(-1)?.steps.push(i);
}

t.test('every base image is pinned to an exact release or a digest', async (t) => {
  t.ok(stages.length >= 2, 'stages parsed');
  for (const s of stages) {
    if (stages.some((o) => o !== s && o.name === s.image)) continue; // an earlier stage
    t.match(s.image, /(?::[^:@/]*\d+\.\d+\.\d+[^:@/]*$|@sha256:[0-9a-f]{64}$)/, `FROM ${s.image} is pinned`);
  }
  // The pinned Node is the one CI runs the suite on (the major .ci/run fetches).
  const ci = readFileSync(path.join(root, '.ci/run'), 'utf8');
  const lts = /^LTS=(\d+)$/m.exec(ci)?.[1];
  for (const a of ['NODE', 'BUILD']) t.match(globalArgs[a], new RegExp(`^node:${lts}\\.`), `${a} is Node ${lts}, as CI`);
});

t.test('.dockerignore keeps host builds and history out; nothing the Dockerfile copies is ignored', async (t) => {
  for (const p of ['node_modules', 'native/node_modules', 'native/build', 'native/build/Release/sluice_native.node', 'dist', 'dist/cli.js', '.git']) {
    t.ok(ignored(p), `${p} is left out of the context`);
  }
  let copies = 0;
  for (const s of stages) {
    for (const i of s.steps.filter((x) => x.op === 'COPY' && !/--from=/.test(x.args))) {
      const words = i.args.split(/\s+/).filter((w) => !w.startsWith('--'));
      for (const src of words.slice(0, -1)) {
        copies++;
        t.ok(existsSync(path.join(root, src)), `COPY ${src}: exists`);
        t.notOk(ignored(src.replace(/^\.\//, '').replace(/\/$/, '')), `COPY ${src}: not ignored`);
      }
    }
  }
  t.ok(copies >= 5, `${copies} COPY sources`);
});

t.test('the build stage\'s steps build a sluice that runs, from the context Docker would send', async (t) => {
  const build = stages.find((s) => s.name === 'build');
  t.ok(build, 'a build stage');
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'sluice-dockerfile-'));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  let workdir = tmp;
  const ran: string[] = [];
  const skipped: string[] = [];
  for (const i of build!.steps) {
    if (i.op === 'WORKDIR') { workdir = path.join(tmp, i.args); mkdirSync(workdir, { recursive: true }); continue; }
    if (i.op === 'COPY') {
      const words = i.args.split(/\s+/);
      const dest = path.resolve(workdir, words.at(-1)!);
      const intoDir = words.length > 2 || words.at(-1)!.endsWith('/');
      for (const src of words.slice(0, -1)) {
        const from = path.join(root, src);
        // Docker copies a folder's contents to the destination; a file into it when it is a folder.
        const to = statSync(from).isDirectory() ? dest : intoDir ? path.join(dest, path.basename(src)) : dest;
        mkdirSync(path.dirname(to), { recursive: true });
        cpSync(from, to, { recursive: true, filter: (f) => ignored(path.relative(root, f)) === undefined });
      }
      continue;
    }
    if (i.op !== 'RUN') continue;
    if (/\bnpm ci\b/.test(i.args)) {
      // The install step (npm ci, on arm64 with fuse-native built from source): the registry
      // is not ours to call from a test, so the checkout's node_modules is linked instead.
      symlinkSync(realpathSync(path.join(root, 'node_modules')), path.join(workdir, 'node_modules'));
      skipped.push('npm ci (node_modules linked)');
      continue;
    }
    for (const part of i.args.split('&&').map((p) => p.trim())) {
      if (/^(apt-get|rm -rf \/var\/lib\/apt)/.test(part)) { skipped.push(part); continue; }
      if (/^npm prune\b/.test(part)) { skipped.push(`${part} (would prune the linked node_modules)`); continue; }
      execFileSync('sh', ['-c', part], { cwd: workdir, stdio: 'pipe', timeout: 240_000 });
      ran.push(part);
    }
  }
  t.ok(ran.includes('npm run build'), `ran: ${ran.join('; ')} (skipped: ${skipped.join('; ')})`);
  t.notOk(existsSync(path.join(workdir, 'native/build')), 'no host-built addon came with the context');
  const version = execFileSync(process.execPath, [path.join(workdir, 'dist/cli.js'), '--version'], { encoding: 'utf8', timeout: 60_000 }).trim();
  t.equal(version, JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).version, 'dist/cli.js built in the image\'s layout runs');

  // The final stage's wrapper, its paths moved under tmp.
  const final = stages.at(-1)!;
  const wrapper = final.steps.find((i) => i.op === 'RUN' && i.args.includes('/usr/local/bin/sluice'));
  t.ok(wrapper, 'the final stage writes the sluice wrapper');
  const bin = path.join(tmp, 'bin');
  mkdirSync(bin);
  const moved = wrapper!.args.split('&&')[0]!.trim()
    .replaceAll('/usr/local/bin/node', process.execPath).replaceAll('/usr/local/bin/sluice', path.join(bin, 'sluice')).replaceAll('/opt/sluice', path.join(tmp, 'opt/sluice'));
  execFileSync('sh', ['-c', `${moved} && chmod +x ${path.join(bin, 'sluice')}`], { timeout: 10_000 });
  t.equal(execFileSync(path.join(bin, 'sluice'), ['--version'], { encoding: 'utf8', timeout: 60_000 }).trim(), version, 'the sluice wrapper runs the build');
});
