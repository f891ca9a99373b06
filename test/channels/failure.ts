/** output/failure: the head line and the last stderr lines within SageMaker's 1024 characters. */
import t from 'tap';
import { FAILURE_MAX_CHARS, failureText, TailBuffer } from '../../src/channels/failure.js';

t.test('failureText', async (t) => {
  t.equal(failureText('head', 'a\nb\n\nc\n'), 'head\na\nb\nc\n');
  t.equal(failureText('head', 'x\r50%\r100%\nlast'), 'head\n100%\nlast\n', 'a carriage-return line is what a terminal shows');
  const long = failureText('head', Array.from({ length: 500 }, (_, i) => `line ${i}`).join('\n'));
  t.ok(long.length <= FAILURE_MAX_CHARS, `bounded (${long.length})`);
  t.match(long, /^head\nline \d+\n[\s\S]*line 499\n$/, 'the head, then the last lines');
  const huge = failureText('head', 'y'.repeat(5000) + 'END');
  t.ok(huge.length <= FAILURE_MAX_CHARS);
  t.match(huge, /^head\ny+END\n$/, 'one overlong last line keeps its end');
});

t.test('TailBuffer keeps the last 64 KiB', async (t) => {
  const tail = new TailBuffer();
  for (let i = 0; i < 1000; i++) tail.push(Buffer.from(`${String(i).padStart(4, '0')}${'.'.repeat(995)}\n`));
  const text = tail.text();
  t.equal(text.length, 64 * 1024);
  t.ok(text.endsWith(`0999${'.'.repeat(995)}\n`));
});
