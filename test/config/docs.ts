import { readFileSync } from 'node:fs';
import t from 'tap';
import { OPTIONS } from '../../src/config/options.js';

const doc = readFileSync(new URL('../../docs/CONFIGURATION.md', import.meta.url), 'utf8');
const rows = doc.split('\n').filter((l) => /^\| `--/.test(l));

t.test('every option has a row with its flag and environment variable', async (t) => {
  for (const s of Object.values(OPTIONS) as Array<{ flag: string; env?: string }>) {
    const row = rows.find((r) => r.startsWith(`| \`--${s.flag}\``) || r.startsWith(`| \`--${s.flag} `));
    t.ok(row, `--${s.flag} is documented`);
    if (row && s.env) t.match(row, `\`${s.env}\``, `--${s.flag} names ${s.env}`);
  }
});

t.test('every documented flag exists', async (t) => {
  const flags = new Set((Object.values(OPTIONS) as Array<{ flag: string }>).map((s) => s.flag));
  for (const r of rows) {
    const flag = /^\| `--([a-z0-9-]+)/.exec(r)![1]!;
    t.ok(flags.has(flag), `--${flag} is declared in src/config/options.ts`);
  }
  t.equal(rows.length, flags.size);
});
