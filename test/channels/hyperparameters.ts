/** --hyperparameters and a request's HyperParameters: SageMaker's strings; the toolkit's reading back. */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { deserialize, hyperParametersFrom, readHyperParametersFlag } from '../../src/channels/hyperparameters.js';
import { fromJs, parse } from '../../src/channels/pyjson.js';

t.test('values become strings as the SageMaker Python SDK writes them', async (t) => {
  const w: string[] = [];
  t.same(await readHyperParametersFlag('{"epochs": 10, "lr": "0.1", "on": true, "list": [1, "a"], "f": 1.0, "none": null}', w),
    { epochs: '10', lr: '0.1', on: 'true', list: '[1, "a"]', f: '1.0', none: 'null' });
  t.same(w, []);
});

t.test('a file, and bad input', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-hp-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'hp.json');
  await writeFile(file, '{"a": "1"}');
  t.same(await readHyperParametersFlag(file, []), { a: '1' });
  await t.rejects(readHyperParametersFlag(path.join(dir, 'nope.json'), []), { code: 'SLUICE_CONFIG', message: /cannot read --hyperparameters .*nope\.json \(ENOENT\)/ });
  await t.rejects(readHyperParametersFlag('{"a": }', []), { message: /--hyperparameters is not valid JSON/ });
  await t.rejects(readHyperParametersFlag(' {"a": 1', []), { message: /not valid JSON/ });
  await writeFile(file, '[1]');
  await t.rejects(readHyperParametersFlag(file, []), { message: /must be a JSON object of hyperparameters/ });
  const w: string[] = [];
  hyperParametersFrom(fromJs(Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, 'x'.repeat(i === 0 ? 3000 : 1)]))), 'req', w);
  t.equal(w.length, 2, 'SageMaker\'s limits are warned about');
});

t.test('deserialize: json.loads each value, the raw string when it fails', async (t) => {
  const got = deserialize(parse('{"a": "10", "b": "\\"x\\"", "c": "plain", "d": "1e-5", "e": "[1, 2]", "f": 3}') as Map<string, never>);
  t.same([...got], [['a', 10n], ['b', 'x'], ['c', 'plain'], ['d', 1e-5], ['e', [1n, 2n]], ['f', 3n]]);
});
