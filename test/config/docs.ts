import { readFileSync } from 'node:fs';
import t from 'tap';
import { OPTIONS } from '../../src/config/options.js';

const doc = readFileSync(new URL('../../docs/CONFIGURATION.md', import.meta.url), 'utf8');
// The options table: the rows after its header, up to the first line that is not a table row
// (other tables, such as the one of mount-s3/s3fs names, are not option declarations).
const lines = doc.split('\n');
const start = lines.findIndex((l) => l.startsWith('| flag | environment |'));
const end = lines.findIndex((l, i) => i > start && !l.startsWith('|'));
const rows = lines.slice(start, end === -1 ? undefined : end).filter((l) => /^\| `--/.test(l));

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
