// Bundles the command line (dist/cli.js) with esbuild, after tsc has type-checked and
// emitted dist/ (issue 15: start-up time).
//
// Why: a `sluice mount` spent about 0.4 s of CPU before its first request resolving,
// reading and wrapping some 150 CommonJS files and 100 ES modules (prom-client alone pulls
// in 51 files of @opentelemetry/api); one bundle is read and compiled in a fraction of that.
//
// What: entry src/cli.ts; each command it imports lazily (mount, run, snapshot, status) and
// each lazily loaded library (undici) becomes its own chunk under dist/chunks/, so a command
// loads only its own code. Left out, loaded from dist/ and node_modules/ at run time as before:
//  - native addons and the packages that locate them on disk (fuse-native, node-gyp-build,
//    @node-rs/crc32): they find their .node files relative to their own folder;
//  - s3rver (demo and bench start it in a child process by file path);
//  - `bench` and `demo`: tools, not the start-up path, and bench loads modules of dist/ by URL
//    (src/bench/host.ts), which must be the same module instances as its own imports.
// Every `import.meta.url` in a bundled module is rewritten to the URL its tsc output file
// has in dist/, so code that finds files relative to itself (native/, package.json,
// dist/cli.js for --daemon) behaves exactly as unbundled.
//
// Stack traces: names are kept (keepNames) and nothing is minified, so a trace names the
// real functions; dist/cli.js.map and the chunks' maps point at src/*.ts, which Node follows
// with NODE_OPTIONS=--enable-source-maps.
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const src = path.join(root, 'src');
const dist = path.join(root, 'dist');
const requireFromRoot = createRequire(path.join(root, 'package.json'));

const EXTERNAL_PACKAGES = ['fuse-native', 'node-gyp-build', '@node-rs/crc32', 's3rver', 'esbuild', 'typescript'];
/** Commands loaded from tsc's dist/ output instead of the bundle (see above). */
const UNBUNDLED = new Set(['./commands/bench.js', './commands/demo.js']);

const importMetaUrl = {
  name: 'import-meta-url-as-in-dist',
  setup(b) {
    b.onResolve({ filter: /^\.\/commands\/(bench|demo)\.js$/ }, (args) =>
      (UNBUNDLED.has(args.path) && args.importer === path.join(src, 'cli.ts') ? { path: args.path, external: true } : undefined));
    // A CommonJS package imported with import() becomes a chunk whose only export is
    // `default` (esbuild's splitting), while Node gives it named exports too; the code
    // destructures names (`const { Pool } = await import('undici')`). So such an import
    // goes through a small ES module that names every export the package has.
    b.onResolve({ filter: /^[^./]/ }, (args) =>
      (args.kind === 'dynamic-import' && args.importer.startsWith(src + path.sep) && !args.path.startsWith('node:') && !EXTERNAL_PACKAGES.includes(args.path)
        ? { path: args.path, namespace: 'cjs-named-exports' } : undefined));
    b.onLoad({ filter: /.*/, namespace: 'cjs-named-exports' }, (args) => {
      const names = Object.keys(requireFromRoot(args.path)).filter((n) => /^[A-Za-z_$][\w$]*$/.test(n) && n !== 'default');
      return { contents: `import m from ${JSON.stringify(args.path)};\nexport default m;\nexport const { ${names.join(', ')} } = m;\n`, loader: 'js', resolveDir: root };
    });
    b.onLoad({ filter: /\.ts$/ }, async (args) => {
      const text = await readFile(args.path, 'utf8');
      if (!text.includes('import.meta.url')) return undefined;
      // The file's place in dist/, as a URL relative to the output file that will hold it
      // is unknown here (chunks), so it is made absolute at run time from the package root,
      // found from the bundle's own URL: dist/cli.js and dist/chunks/*.js.
      const rel = path.relative(src, args.path).replace(/\.ts$/, '.js').split(path.sep).join('/');
      const expr = `__sluiceDistUrl(${JSON.stringify(rel)})`;
      return { contents: text.replaceAll('import.meta.url', expr), loader: 'ts' };
    });
  },
};

// Defined once per output file: the dist/ URL of a module, from this file's own URL.
const banner = [
  "import { createRequire as __sluiceCreateRequire } from 'node:module';",
  'const require = __sluiceCreateRequire(import.meta.url);',
  "const __sluiceDist = new URL(/\\/(chunks|bench)\\/[^/]*$/.test(import.meta.url) ? '../' : './', import.meta.url);",
  'const __sluiceDistUrl = (rel) => new URL(rel, __sluiceDist).href;',
].join('\n');

await rm(path.join(dist, 'chunks'), { recursive: true, force: true }); // chunks of an earlier build
const result = await build({
  // bench/host.js: the process `sluice bench` runs File and Pipe mode in (src/bench/host.ts),
  // bundled so that it starts as the command line does.
  entryPoints: { cli: path.join(src, 'cli.ts'), 'bench/host': path.join(src, 'bench', 'host.ts') },
  outdir: dist,
  chunkNames: 'chunks/[name]-[hash]',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  sourcemap: 'linked',
  sourcesContent: false,
  keepNames: true,
  external: EXTERNAL_PACKAGES,
  banner: { js: banner },
  plugins: [importMetaUrl],
  logLevel: 'warning',
  metafile: true,
});
const outputs = Object.entries(result.metafile.outputs).filter(([f]) => f.endsWith('.js'));
const bytes = outputs.reduce((n, [, o]) => n + o.bytes, 0);
process.stdout.write(`bundle: dist/cli.js, dist/bench/host.js and ${outputs.length - 2} chunks, ${(bytes / 1e6).toFixed(1)} MB (${pathToFileURL(dist).href})\n`);
