/**
 * SageMaker manifests, parsed with line numbers for every error.
 *
 * ManifestFile: one JSON list; the first element names the prefix, the others are keys
 * relative to it, concatenated as text (SageMaker's rule: prefix + entry):
 *     [ {"prefix": "s3://bucket/some/prefix/"},
 *       "relative/path/to/custdata-1",
 *       "relative/path/custdata-2" ]
 *   The list is scanned element by element (strings and nesting tracked by hand) so that
 *   each element, and each syntax error, carries the line it starts on; each element is
 *   then decoded with JSON.parse.
 *
 * AugmentedManifestFile: JSON Lines, one object per line. For each line, the attributes
 * of AttributeNames are taken in that order (others are ignored); a missing one is an
 * error. An attribute whose name ends in "-ref" holds an s3:// URI whose object's bytes
 * are streamed; any other attribute is streamed as its JSON text (SageMaker's example
 * streams {"is-a-cat": 1} as "1"). Blank lines are skipped. Each line is one record (the
 * unit that is shuffled and sharded); its attributes are consecutive pipe items.
 *
 * Malformed entries are ManifestError with the 1-based line number.
 */
import { ManifestError, SluiceError } from '../errors.js';
import { parseS3Uri } from '../s3/uri.js';

export interface ManifestEntry {
  bucket: string;
  /** The full key (prefix + entry). */
  key: string;
  /** The entry as written: the object's path below the prefix (File mode writes it there). */
  rel: string;
  line: number;
}

export type AugmentedAttribute =
  | { kind: 'ref'; name: string; bucket: string; key: string }
  | { kind: 'inline'; name: string; data: Buffer };

export interface AugmentedRecord {
  line: number;
  attributes: AugmentedAttribute[];
}

function s3Location(value: unknown, line: number, what: string): { bucket: string; key: string } {
  if (typeof value !== 'string') throw new ManifestError(`${what} must be an s3:// URI string, got ${JSON.stringify(value)}`, line);
  try {
    const { bucket, prefix } = parseS3Uri(value);
    return { bucket, key: prefix };
  } catch (err) {
    if (err instanceof SluiceError) throw new ManifestError(`${what}: ${err.message}`, line);
    throw err;
  }
}

/** Parse a ManifestFile's text. */
export function parseManifestFile(text: string): ManifestEntry[] {
  const elements = scanJsonList(text);
  if (elements.length === 0) throw new ManifestError('the manifest is an empty list; its first element must be {"prefix": "s3://bucket/prefix/"}', 1);
  const first = elements[0]!;
  const head = first.value as { prefix?: unknown };
  if (typeof head !== 'object' || head === null || Array.isArray(head) || typeof head.prefix !== 'string' || Object.keys(head).length !== 1) {
    throw new ManifestError('the first element must be {"prefix": "s3://bucket/prefix/"}', first.line);
  }
  const base = s3Location(head.prefix, first.line, '"prefix"');
  const out: ManifestEntry[] = [];
  for (const { value, line } of elements.slice(1)) {
    if (typeof value !== 'string') throw new ManifestError(`expected a key relative to the prefix (a JSON string), got ${JSON.stringify(value)}`, line);
    if (value === '') throw new ManifestError('empty key', line);
    out.push({ bucket: base.bucket, key: base.key + value, rel: value, line });
  }
  return out;
}

/** Parse an AugmentedManifestFile's text for the given AttributeNames. */
export function parseAugmentedManifest(text: string, attributeNames: readonly string[]): AugmentedRecord[] {
  const out: AugmentedRecord[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    const line = i + 1;
    if (raw.trim() === '') continue;
    let obj: unknown;
    try {
      obj = JSON.parse(raw);
    } catch (err) {
      throw new ManifestError(`not valid JSON (${err instanceof Error ? err.message.split('\n')[0] : String(err)})`, line);
    }
    if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) throw new ManifestError('each line must be a JSON object', line);
    const rec = obj as Record<string, unknown>;
    const attributes: AugmentedAttribute[] = attributeNames.map((name) => {
      if (!(name in rec)) throw new ManifestError(`attribute ${JSON.stringify(name)} is missing`, line);
      const v = rec[name];
      if (name.endsWith('-ref')) return { kind: 'ref', name, ...s3Location(v, line, `attribute ${JSON.stringify(name)}`) };
      return { kind: 'inline', name, data: Buffer.from(JSON.stringify(v), 'utf8') };
    });
    out.push({ line, attributes });
  }
  if (out.length === 0) throw new ManifestError('the augmented manifest has no records', 1);
  return out;
}

/** The elements of a top-level JSON list, each with the line it starts on. */
export function scanJsonList(text: string): { value: unknown; line: number }[] {
  let i = 0;
  let line = 1;
  const n = text.length;
  const ws = () => {
    while (i < n) {
      const ch = text[i]!;
      if (ch === '\n') line++;
      else if (ch !== ' ' && ch !== '\t' && ch !== '\r' && ch !== '\ufeff') break;
      i++;
    }
  };
  ws();
  if (text[i] !== '[') throw new ManifestError('a ManifestFile must be a JSON list starting with [', line);
  i++;
  const out: { value: unknown; line: number }[] = [];
  ws();
  if (text[i] === ']') {
    i++;
  } else {
    for (;;) {
      ws();
      if (i >= n) throw new ManifestError('the list is not closed with ]', line);
      const start = i;
      const startLine = line;
      // Scan one value: a string, a nested object/list, or a bare literal.
      let depth = 0;
      let inString = false;
      for (; i < n; i++) {
        const ch = text[i]!;
        if (ch === '\n') line++;
        if (inString) {
          if (ch === '\\') i++;
          else if (ch === '"') { inString = false; if (depth === 0) { i++; break; } }
          continue;
        }
        if (ch === '"') inString = true;
        else if (ch === '{' || ch === '[') depth++;
        else if (ch === '}' || ch === ']') {
          if (depth === 0) break;
          depth--;
          if (depth === 0) { i++; break; }
        } else if (depth === 0 && (ch === ',' || ch === ' ' || ch === '\t' || ch === '\r' || ch === '\n')) {
          if (ch === '\n') line--; // ws() counts it again
          break;
        }
      }
      const piece = text.slice(start, i);
      if (piece === '') throw new ManifestError(`expected a list element, found ${JSON.stringify(text[i] ?? 'end of file')}`, startLine);
      let value: unknown;
      try {
        value = JSON.parse(piece);
      } catch {
        throw new ManifestError(`not valid JSON: ${piece.length > 60 ? piece.slice(0, 60) + '...' : piece}`, startLine);
      }
      out.push({ value, line: startLine });
      ws();
      if (text[i] === ',') { i++; continue; }
      if (text[i] === ']') { i++; break; }
      throw new ManifestError(i >= n ? 'the list is not closed with ]' : `expected , or ] after an element, found ${JSON.stringify(text[i])}`, line);
    }
  }
  ws();
  if (i < n) throw new ManifestError(`unexpected text after the closing ]: ${JSON.stringify(text.slice(i, i + 20))}`, line);
  return out;
}
