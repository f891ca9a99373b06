/**
 * What a production install carries, read from package.json and package-lock.json (the
 * lockfile marks every package only development needs with "dev": true, which is what
 * `npm ci --omit=dev` leaves out), and the libfuse2 package-name choice of
 * scripts/libfuse-package.sh on Debian- and Ubuntu-style apt.
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>; devDependencies: Record<string, string>; engines: { node: string };
};
const lock = JSON.parse(readFileSync(path.join(root, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { dev?: boolean; devOptional?: boolean; optional?: boolean }>;
};

/** Package names a production install puts in node_modules (nested copies included). */
function productionPackages(): Set<string> {
  const names = new Set<string>();
  for (const [where, meta] of Object.entries(lock.packages)) {
    if (where === '' || meta.dev) continue;
    names.add(where.slice(where.lastIndexOf('node_modules/') + 'node_modules/'.length));
  }
  return names;
}

t.test('the production install leaves out the test-only server and unused SDK parts', async (t) => {
  const prod = productionPackages();
  t.ok(prod.size > 0, `${prod.size} production packages`);
  for (const name of ['s3rver', '@aws-sdk/credential-providers', 'tap', 'typescript', 'fast-check']) {
    t.notOk(prod.has(name), `${name} is not in a production install`);
  }
  t.notOk('s3rver' in pkg.dependencies, 's3rver is not a runtime dependency');
  t.ok('s3rver' in pkg.devDependencies, 's3rver is a development dependency (demo, bench, tests)');
  for (const needed of ['fuse-native', 'undici', '@aws-sdk/client-s3', 'prom-client', 'pino', 'yaml', 'lru-cache']) {
    t.ok(prod.has(needed), `${needed} is in a production install`);
  }
});

t.test('every package src/ imports is a runtime dependency', async (t) => {
  const files: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(path.join(d, e.name));
      else if (e.name.endsWith('.ts')) files.push(path.join(d, e.name));
    }
  };
  walk(path.join(root, 'src'));
  const imported = new Set<string>();
  // Static and dynamic imports of bare specifiers (not node: builtins, not relative paths).
  const re = /(?:from\s+|import\(\s*|require\(\s*)'([^.'/][^']*)'/g;
  for (const f of files) {
    for (const m of readFileSync(f, 'utf8').matchAll(re)) {
      const spec = m[1]!;
      if (spec.startsWith('node:')) continue;
      imported.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
    }
  }
  t.ok(imported.size > 5, `src/ imports ${[...imported].sort().join(', ')}`);
  for (const name of imported) t.ok(name in pkg.dependencies, `${name} is in dependencies`);
  for (const name of Object.keys(pkg.dependencies)) {
    // node-gyp-build is used by the install script, not imported; @smithy/signature-v4 likewise checked by import.
    if (name === 'node-gyp-build') continue;
    t.ok(imported.has(name), `dependency ${name} is imported by src/`);
  }
});

t.test('engines names the Node lines sluice supports', async (t) => {
  // undici 7 needs Node >= 20.18.1; 22 and 24 are the current LTS lines.
  t.match(pkg.engines.node, /\^20\.18\.1/);
  t.match(pkg.engines.node, /\^22\./);
  t.match(pkg.engines.node, /\^24\./);
});

/** Runs libfuse2_package with a fake apt-cache that prints `policies[name]` (nothing for unknown names). */
function choose(policies: Record<string, string>): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-apt-'));
  try {
    for (const [name, text] of Object.entries(policies)) writeFileSync(path.join(dir, `${name}.policy`), text);
    const fake = path.join(dir, 'apt-cache');
    writeFileSync(fake, `#!/bin/sh\n[ "$1" = policy ] || exit 100\nf="${dir}/$2.policy"\n[ -f "$f" ] && cat "$f"\nexit 0\n`);
    chmodSync(fake, 0o755);
    return execFileSync('sh', ['-c', `. "${path.join(root, 'scripts/libfuse-package.sh')}" && libfuse2_package`], {
      env: { ...process.env, PATH: `${dir}:${process.env.PATH}` }, encoding: 'utf8',
    }).trim();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

t.test('libfuse2 package name: libfuse2t64 on Ubuntu 24.04, libfuse2 on Debian 12', async (t) => {
  // apt-cache policy as Ubuntu 24.04 (noble) prints it: libfuse2 is only virtual there.
  const noble = {
    libfuse2: 'libfuse2:\n  Installed: (none)\n  Candidate: (none)\n  Version table:\n',
    libfuse2t64: 'libfuse2t64:\n  Installed: (none)\n  Candidate: 2.9.9-8.1build1\n  Version table:\n     2.9.9-8.1build1 500\n        500 http://archive.ubuntu.com/ubuntu noble/main amd64 Packages\n',
  };
  t.equal(choose(noble), 'libfuse2t64');
  // Debian 12 (bookworm): no libfuse2t64 at all.
  const bookworm = {
    libfuse2: 'libfuse2:\n  Installed: (none)\n  Candidate: 2.9.9-6+b1\n  Version table:\n     2.9.9-6+b1 500\n',
  };
  t.equal(choose(bookworm), 'libfuse2');
  t.equal(choose({}), 'libfuse2', 'neither known (lists not updated): libfuse2, so apt names it in its error');
});
