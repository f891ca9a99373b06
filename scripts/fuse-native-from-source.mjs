#!/usr/bin/env node
// Builds fuse-native's N-API binding from its C source against the machine's libfuse.so.2,
// for the platforms fuse-native ships no prebuilt binary for. fuse-native 2.2.6 has
// prebuilds for linux-x64 and darwin-x64 only; on linux-arm64 (Graviton, GH200) its own
// from-source build fails, because it links the libfuse.so that fuse-shared-library-linux
// bundles, an x86-64 file ("file in wrong format").
//
// How: one compiler call, no node-gyp (nothing downloaded): fuse-native.c with Node's own
// headers (<prefix>/include/node, shipped with every official Node build and Debian's
// nodejs), napi-macros, and the FUSE 2.9 headers fuse-shared-library-linux bundles (C
// declarations, the same for every CPU), linked to the system's libfuse.so.2 by soname
// (package libfuse2, or libfuse2t64 on Ubuntu 24.04+; no -dev package needed). The result
// goes to node_modules/fuse-native/build/Release/fuse.node, which node-gyp-build loads
// before any prebuild.
//
// Usage: node scripts/fuse-native-from-source.mjs [--if-needed] [--out FILE] [--cc CC]
//                                                 [--node-include DIR] [--no-libfuse]
//   --if-needed     do nothing when fuse-native has a prebuild for this platform and CPU,
//                   or a build that loads
//   --out FILE      where to write the binding (default: fuse-native's build/Release/fuse.node)
//   --cc CC         the C compiler (default: $CC, else cc)
//   --node-include  Node's headers (default: next to this Node, <prefix>/include/node)
//   --no-libfuse    do not link libfuse.so.2 (a cross-compile check, where the target's
//                   libfuse is not installed: the symbols stay undefined)
// Exit 0 when built (or not needed), 1 with one line naming the fix otherwise.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '..', 'package.json'));

/** Whether fuse-native ships a prebuilt binary for `platform`-`arch` in `prebuildsDir`. */
export function hasPrebuild(prebuildsDir, platform, arch) {
  return existsSync(prebuildsDir) && readdirSync(prebuildsDir).includes(`${platform}-${arch}`);
}

function fail(message) {
  process.stderr.write(`fuse-native-from-source: ${message}\n`);
  process.exit(1);
}

function main(argv) {
  const opt = { ifNeeded: false, out: undefined, cc: process.env.CC || 'cc', nodeInclude: undefined, libfuse: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--if-needed') opt.ifNeeded = true;
    else if (a === '--no-libfuse') opt.libfuse = false;
    else if (a === '--out') opt.out = argv[++i];
    else if (a === '--cc') opt.cc = argv[++i];
    else if (a === '--node-include') opt.nodeInclude = argv[++i];
    else fail(`unknown argument ${a}`);
  }
  let fuseDir;
  try {
    fuseDir = path.dirname(require.resolve('fuse-native/package.json'));
  } catch {
    fail('fuse-native is not installed: run npm ci (or npm ci --ignore-scripts) first');
  }
  if (opt.ifNeeded) {
    if (hasPrebuild(path.join(fuseDir, 'prebuilds'), process.platform, process.arch)) return;
    if (existsSync(path.join(fuseDir, 'build', 'Release', 'fuse.node'))) {
      try { require(path.join(fuseDir, 'build', 'Release', 'fuse.node')); return; } catch { /* a foreign or broken build: rebuild it */ }
    }
  }
  const fuseRequire = createRequire(path.join(fuseDir, 'package.json'));
  const napiMacros = path.dirname(fuseRequire.resolve('napi-macros/package.json'));
  // fuse-shared-library-linux's headers are plain declarations; only its libfuse.so is x86-64.
  const sharedLib = path.dirname(createRequire(fuseRequire.resolve('fuse-shared-library/package.json')).resolve('fuse-shared-library-linux/package.json'));
  const fuseInclude = path.join(sharedLib, 'libfuse', 'include');
  const nodeInclude = opt.nodeInclude ?? path.resolve(path.dirname(process.execPath), '..', 'include', 'node');
  if (!existsSync(path.join(nodeInclude, 'node_api.h'))) fail(`no node_api.h in ${nodeInclude}: pass --node-include (Debian: apt-get install libnode-dev)`);
  if (!existsSync(path.join(fuseInclude, 'fuse.h'))) fail(`no fuse.h in ${fuseInclude}`);
  const out = path.resolve(opt.out ?? path.join(fuseDir, 'build', 'Release', 'fuse.node'));
  mkdirSync(path.dirname(out), { recursive: true });
  const args = [
    '-shared', '-fPIC', '-O2', '-Wall', '-D_FILE_OFFSET_BITS=64',
    `-I${nodeInclude}`, `-I${napiMacros}`, `-I${fuseInclude}`,
    path.join(fuseDir, 'fuse-native.c'), '-o', out, '-lpthread',
    ...(opt.libfuse ? ['-l:libfuse.so.2'] : []),
  ];
  try {
    execFileSync(opt.cc, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  } catch (err) {
    fail(`${opt.cc} failed (${err.message.split('\n')[0]}): it needs a C compiler and libfuse.so.2 (apt-get install gcc libfuse2)`);
  }
  process.stdout.write(`fuse-native-from-source: built ${out}\n`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main(process.argv.slice(2));
