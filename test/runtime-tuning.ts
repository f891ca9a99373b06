// The data-plane commands run with eager baseline compilation (src/runtime-tuning.ts):
// checked in a child node, where V8's natives syntax can ask a function's tier.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { applyRuntimeTuning } from '../src/runtime-tuning.js';

const MODULE = fileURLToPath(new URL('../dist/runtime-tuning.js', import.meta.url));

/** Runs applyRuntimeTuning() (or not) in a fresh node, then reports the tier of a function compiled afterwards. */
function tierAfter(apply: boolean, nodeArgs: string[] = []): { applied: boolean; sparkplug: boolean; ignition: boolean } {
  const script = `const { applyRuntimeTuning } = await import(${JSON.stringify(MODULE)});
    const applied = ${apply} ? applyRuntimeTuning() : false;
    function probe(x) { return x + 1; }
    probe(1);
    console.log(JSON.stringify({ applied, sparkplug: %ActiveTierIsSparkplug(probe), ignition: %ActiveTierIsIgnition(probe) }));`;
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', ...nodeArgs, '--input-type=module', '-e', script], {
    encoding: 'utf8', timeout: 60_000, env: { ...process.env, NODE_OPTIONS: '' },
  });
  if (r.status !== 0) throw new Error(`child failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as { applied: boolean; sparkplug: boolean; ignition: boolean };
}

t.test('once applied, functions compiled afterwards start in baseline code, not the interpreter', async (t) => {
  t.same(tierAfter(true), { applied: true, sparkplug: true, ignition: false });
});

t.test('without it, V8 defaults (first run interpreted)', async (t) => {
  t.same(tierAfter(false), { applied: false, sparkplug: false, ignition: true });
});

t.test("a user's own flag wins", async (t) => {
  t.same(tierAfter(true, ['--no-always-sparkplug']), { applied: false, sparkplug: false, ignition: true });
  // In process (no flag is set for these): the decision alone.
  t.equal(applyRuntimeTuning([], '--no-always-sparkplug'), false);
  t.equal(applyRuntimeTuning(['--always_sparkplug'], ''), false);
});
