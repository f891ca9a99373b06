/**
 * JSON as Python sees it, so that sluice renders the SM_* strings byte for byte as
 * sagemaker-training-toolkit does (src/sagemaker_training/mapping.py, environment.py).
 *
 * The toolkit reads hyperparameters.json with json.loads per value, then renders values
 * with `json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True)` (env
 * variables) or `str(v)` (command-line arguments, SM_USER_ARGS). JavaScript's JSON loses
 * what these need: Python keeps ints (arbitrary precision) apart from floats ("1.0" stays
 * a float and prints "1.0"), prints floats with repr() ("1e-05", "1e+16"), and str() of a
 * list or dict is a Python repr ("['a', 1]"). So values are modelled as:
 *   null (None), boolean, string, bigint (int), number (float), PyValue[] (list),
 *   Map<string, PyValue> (dict, in insertion order).
 * parse() is json.loads (NaN, Infinity and -Infinity included, as Python accepts them);
 * dumpsCompact() the toolkit's dumps; dumps() json.dumps with its default separators
 * (what the SageMaker Python SDK writes for a non-string hyperparameter); str() Python's.
 * Known limit: repr() of a string treats every character from U+00A0 up as printable,
 * where Python consults its Unicode tables (a few format characters differ).
 */

export type PyValue = null | boolean | string | bigint | number | PyValue[] | Map<string, PyValue>;

export class PyJsonError extends Error {
  override name = 'PyJsonError';
}

/** JavaScript data (from our own code) as a PyValue: integers become ints. */
export function fromJs(v: unknown): PyValue {
  if (v === null || v === undefined) return null;
  if (typeof v === 'boolean' || typeof v === 'string' || typeof v === 'bigint') return v;
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : v;
  if (Array.isArray(v)) return v.map(fromJs);
  if (v instanceof Map) return new Map([...v].map(([k, x]) => [String(k), fromJs(x)]));
  if (typeof v === 'object') return new Map(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, fromJs(x)]));
  throw new PyJsonError(`cannot represent ${typeof v} in JSON`);
}

/** json.loads(text). */
export function parse(text: string): PyValue {
  let i = 0;
  const fail = (what: string): never => { throw new PyJsonError(`${what} at char ${i}`); };
  const ws = () => { while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++; };
  const lit = (word: string): boolean => {
    if (text.startsWith(word, i)) { i += word.length; return true; }
    return false;
  };
  const str = (): string => {
    i++; // opening quote
    let out = '';
    for (;;) {
      const c = text[i];
      if (c === undefined) fail('unterminated string');
      if (c === '"') { i++; return out; }
      if (c! < ' ') fail('invalid control character');
      if (c !== '\\') { out += c; i++; continue; }
      const e = text[i + 1];
      const simple: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
      if (e !== undefined && e in simple) { out += simple[e]; i += 2; continue; }
      if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) { out += String.fromCharCode(parseInt(text.slice(i + 2, i + 6), 16)); i += 6; continue; }
      fail('invalid escape');
    }
  };
  const value = (): PyValue => {
    ws();
    const c = text[i];
    if (c === '"') return str();
    if (c === '{') {
      i++;
      const m = new Map<string, PyValue>();
      ws();
      if (text[i] === '}') { i++; return m; }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('expected a property name');
        const k = str();
        ws();
        if (text[i] !== ':') fail("expected ':'");
        i++;
        m.set(k, value());
        ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === '}') { i++; return m; }
        fail("expected ',' or '}'");
      }
    }
    if (c === '[') {
      i++;
      const a: PyValue[] = [];
      ws();
      if (text[i] === ']') { i++; return a; }
      for (;;) {
        a.push(value());
        ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === ']') { i++; return a; }
        fail("expected ',' or ']'");
      }
    }
    if (lit('null')) return null;
    if (lit('true')) return true;
    if (lit('false')) return false;
    if (lit('NaN')) return NaN;
    if (lit('Infinity')) return Infinity;
    if (lit('-Infinity')) return -Infinity;
    const m = /^-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?/.exec(text.slice(i));
    if (!m) return fail('expecting value');
    i += m[0].length;
    return m[1] === undefined && m[2] === undefined ? BigInt(m[0]) : Number(m[0]);
  };
  const v = value();
  ws();
  if (i !== text.length) fail('extra data');
  return v;
}

/** Python's repr() of a float. */
export function floatRepr(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (x === Infinity) return 'inf';
  if (x === -Infinity) return '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  // Shortest round-trip digits, as Python's repr; then Python's layout: fixed notation
  // when -4 <= exponent < 16, else d.ddde+XX with at least two exponent digits.
  const [mant, expText] = Math.abs(x).toExponential().split('e') as [string, string];
  const digits = mant.replace('.', '');
  const exp = Number(expText);
  const sign = x < 0 ? '-' : '';
  if (exp >= -4 && exp < 16) {
    if (exp < 0) return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
    const int = digits.slice(0, exp + 1).padEnd(exp + 1, '0');
    const frac = digits.slice(exp + 1);
    return `${sign}${int}.${frac === '' ? '0' : frac}`;
  }
  const e = `${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  return `${sign}${digits[0]}${digits.length > 1 ? `.${digits.slice(1)}` : ''}e${e}`;
}

/** A JSON string literal with ensure_ascii: everything outside ' '..'~' is escaped. */
function jsonString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ch = s[i]!;
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (c >= 0x20 && c <= 0x7e) out += ch;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\b') out += '\\b';
    else if (ch === '\f') out += '\\f';
    else out += `\\u${c.toString(16).padStart(4, '0')}`;
  }
  return `${out}"`;
}

/** Python sorts str keys by code point; JavaScript's default sort is by UTF-16 unit. */
function byCodePoint(a: string, b: string): number {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

function dumpsWith(v: PyValue, item: string, kv: string, sortKeys: boolean): string {
  const rec = (x: PyValue): string => {
    if (x === null) return 'null';
    if (x === true) return 'true';
    if (x === false) return 'false';
    if (typeof x === 'string') return jsonString(x);
    if (typeof x === 'bigint') return x.toString();
    if (typeof x === 'number') return Number.isNaN(x) ? 'NaN' : x === Infinity ? 'Infinity' : x === -Infinity ? '-Infinity' : floatRepr(x);
    if (Array.isArray(x)) return `[${x.map(rec).join(item)}]`;
    const keys = [...x.keys()];
    if (sortKeys) keys.sort(byCodePoint);
    return `{${keys.map((k) => `${jsonString(k)}${kv}${rec(x.get(k)!)}`).join(item)}}`;
  };
  return rec(v);
}

/** The toolkit's json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True). */
export function dumpsCompact(v: PyValue): string {
  return dumpsWith(v, ',', ':', true);
}

/** json.dumps(v) with Python's defaults (", " and ": ", insertion order, ensure_ascii). */
export function dumps(v: PyValue): string {
  return dumpsWith(v, ', ', ': ', false);
}

/** Python's repr() of a str. */
function strRepr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === quote || ch === '\\') out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (c < 0x20 || (c >= 0x7f && c < 0xa0)) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else if (c >= 0xd800 && c <= 0xdfff) out += `\\u${c.toString(16)}`;
    else out += ch;
  }
  return out + quote;
}

/** Python's repr(). */
export function repr(v: PyValue): string {
  if (typeof v === 'string') return strRepr(v);
  if (Array.isArray(v)) return `[${v.map(repr).join(', ')}]`;
  if (v instanceof Map) return `{${[...v].map(([k, x]) => `${strRepr(k)}: ${repr(x)}`).join(', ')}}`;
  return str(v);
}

/** Python's str(). */
export function str(v: PyValue): string {
  if (v === null) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'string') return v;
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number') return floatRepr(v);
  return repr(v);
}
