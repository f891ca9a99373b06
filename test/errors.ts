import t from 'tap';
import * as A from '../src/errors.js';

// A second, separate copy of the module, as `sluice bench` and `sluice demo` have beside
// the bundled CLI: dist/'s errors.js is one copy, the bundle's is another.
// A specifier typed as a plain string: TypeScript cannot resolve a query suffix, Node loads it as a new module.
const secondCopy: string = '../src/errors.js?second-copy';
const B = (await import(secondCopy)) as typeof A;

t.test('two copies of the errors module are really two', async (t) => {
  t.not(A.SluiceError, B.SluiceError);
});

t.test('an error of one copy is an instance of the same classes of the other', async (t) => {
  const fromB = new B.ConfigError('bad scenario file', { hint: 'fix it' });
  t.ok(fromB instanceof A.SluiceError);
  t.ok(fromB instanceof A.ConfigError);
  t.notOk(fromB instanceof A.InvalidArgumentError, 'a sibling class is not matched');
  t.notOk(fromB instanceof A.ChildFailedError);
  t.ok(fromB instanceof Error);
  t.ok(A.isUserError(fromB), 'printed as one line by the other copy');
  t.equal(A.exitCodeFor(fromB), 2);
  t.equal(A.exitCodeFor(new B.ChildFailedError('child', 7)), 7);
});

t.test('within one copy, instanceof is unchanged', async (t) => {
  const e = new A.ConfigError('x');
  t.ok(e instanceof A.ConfigError);
  t.ok(e instanceof A.SluiceError);
  t.notOk(e instanceof A.InvalidArgumentError);
  t.notOk(new A.SluiceError('SLUICE_CONFIG', 'base') instanceof A.ConfigError, 'a base instance is not a subclass instance');
});

t.test('other values are never sluice errors', async (t) => {
  for (const v of [new Error('plain'), null, undefined, 42, 'SLUICE_CONFIG', { code: 'SLUICE_CONFIG', userError: true }]) {
    t.notOk(v instanceof A.SluiceError, String(v));
    t.notOk(A.isUserError(v));
    t.equal(A.exitCodeFor(v), 1);
  }
});
