/** Smoke test of `sluice demo` with a tiny dataset: the figures are printed and everything is cleaned up. */
import t from 'tap';
import { readMounts } from '../../src/fuse/mountpoint.js';
import { runCli } from '../helpers/cli.js';

t.test('sluice demo on a tiny dataset', async (t) => {
  const r = await runCli(['demo', '--small', '50', '--large', '1', '--large-size', '4MiB', '--workers', '3'], process.env, 240_000);
  t.equal(r.code, 0, `exit code 0 (stderr: ${r.stderr.slice(-500)})`);
  const out = r.stdout;
  t.match(out, /seeded s3:\/\/sluice-demo\/dataset\/ with 51 objects/);
  t.match(out, /^walked the image folders: 50 files in [\d.]+ s$/m);
  t.match(out, /^mounted at .+ in [\d.]+ s .*metrics at http:\/\/127\.0\.0\.1:\d+\/metrics$/m);
  t.match(out, /^images: 50 files, [\d.]+ MB in [\d.]+ s: \d+ files\/s, [\d.]+ MB\/s \(3 workers\)$/m);
  t.match(out, /^shards: 1 files, 4\.2 MB in [\d.]+ s: [\d.]+ MB\/s/m);
  t.match(out, /^time to first byte: [\d.]+ ms from the first open/m);
  // Issue 45: one time-to-first-byte figure, and no pointer at a daemon that is gone by then.
  t.equal(out.split('\n').filter((l) => /first_byte|first byte/i.test(l)).length, 1, 'one time-to-first-byte figure');
  t.notMatch(out, /`sluice status`/, 'does not send the user to sluice status for a mount that stops');
  t.match(out, /^verified: all 51 files match the sha256 of their source/m);
  t.match(out, /^ {2}sluice_fuse_operations_total\{op="read",result="ok"\} \d+$/m, 'shows key /metrics lines');
  t.match(out, /^cleaned up: unmounted, local S3 stopped, temporary files removed$/m);
  const left = (await readMounts()).filter((m) => m.mountpoint.includes('sluice-demo-'));
  t.same(left, [], 'nothing left mounted');
});

t.test('sluice demo rejects bad flags with one line', async (t) => {
  const r = await runCli(['demo', '--small', 'many']);
  t.equal(r.code, 2);
  t.match(r.stderr, /^sluice: --small must be a whole number/m);
  const h = await runCli(['demo', '--help']);
  t.equal(h.code, 0);
  t.match(h.stdout, /Usage: sluice demo/);
});

t.test('sluice demo takes --log-format like the other commands', async (t) => {
  const h = await runCli(['demo', '--help']);
  t.match(h.stdout, /--log-format FORMAT/);
  const bad = await runCli(['demo', '--log-format', 'xml']);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /^sluice: .*log-format must be auto, text or json/m);
  t.notMatch(bad.stderr, /\n\s+at /, 'no stack trace');
});
