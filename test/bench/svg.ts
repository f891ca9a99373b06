import t from 'tap';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { scenarioSvg, writeSvgs } from '../../src/bench/svg.js';
import { fig, results } from '../helpers/bench-results.js';

t.test('one bar per measured target plus the limit, labelled', async (t) => {
  const res = results([
    fig({ target: 'FastFile', value: 190 }),
    fig({ target: 's3fs', value: 95 }),
    fig({ target: 'Pipe', value: null, unavailable: 'not built' }),
    fig({ target: 'FastFile', value: 0.3, scenario: 'ttfb', kind: 'ttfb', unit: 's', higherIsBetter: false, title: 'ttfb <&>' }),
  ]);
  const svg = scenarioSvg(res, 'B');
  t.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  t.equal((svg.match(/<rect x=/g) ?? []).length, 3, 'limit + two bars');
  t.match(svg, /link limit/);
  t.match(svg, /FastFile ÷ s3fs = 2\.00×/);
  t.match(svg, /not available here/);
  t.match(svg, /95% of limit/);
  t.match(svg, /FastFile<\/text>[\s\S]*?CPU 2\.50 \/ 0\.40 \/ 1\.25 s\/GB/, 'CPU s/GB of target / reader / s3rver next to the rate');
  t.match(svg, /CPU s\/GB: target \/ reader \/ s3rver/);
  const ttfb = scenarioSvg(res, 'ttfb');
  t.match(ttfb, /lower is better/);
  t.match(ttfb, /ttfb &lt;&amp;&gt;/, 'text is escaped');
  t.notMatch(ttfb, /link limit/, 'no limit bar for times');
  t.equal(scenarioSvg(res, 'nope'), '');
});

t.test('writes one file per scenario', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-svg-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const files = await writeSvgs(results([fig({ target: 'FastFile', value: 1 }), fig({ target: 'FastFile', value: 1, scenario: 'A' })]), dir);
  t.same(files.map((f) => path.basename(f)).sort(), ['A.svg', 'B.svg']);
  t.match(readFileSync(files[0]!, 'utf8'), /<\/svg>\n$/);
});
