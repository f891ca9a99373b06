/**
 * ListObjectsV2 reply bodies parsed by us, strictly, so that the first listing pages of a
 * mount need no SDK (issue 44: the SDK's chunks cost ~0.3 CPU s to compile at every start).
 *
 * How it works:
 *  - parseXml(): a small, strict XML reader for the shape S3 sends: an optional declaration,
 *    comments, then one root element of elements and text (attributes read and ignored,
 *    CDATA kept as text). Refused, with MalformedReplyError: a DOCTYPE (no entity expansion,
 *    ever), an unknown entity or a bare '&', a '<' that opens no tag, mismatched or
 *    unclosed tags, characters XML 1.0 forbids, anything but whitespace after the root.
 *  - parseListObjectsV2(): the ListBucketResult of that tree: Contents (Key and Size
 *    required, Size a safe non-negative integer, LastModified a valid date when given),
 *    CommonPrefixes, IsTruncated ("true"/"false", required) and NextContinuationToken.
 *    With <EncodingType>url</EncodingType> (we ask for it: XML 1.0 cannot carry every byte
 *    a key may hold) Key, Prefix, Delimiter and StartAfter are URL-decoded as S3 encodes
 *    them ('+' is a space, %XX a UTF-8 byte); without it (a server that ignores the
 *    parameter) they are taken as they are.
 */
import { MalformedReplyError } from '../errors.js';
import type { ObjectInfo } from './object-client.js';

export interface XmlElement {
  name: string;
  children: XmlElement[];
  /** The element's own text (entities decoded, CDATA included), children's not. */
  text: string;
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
const NAME = /[A-Za-z_:][\w.:-]*/y;
/** XML 1.0 Char: TAB, LF, CR and from U+0020 on, less the surrogates (checked as pairs by the u flag) and U+FFFE/U+FFFF. */
const BAD_CHAR = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;

function bad(what: string): never {
  throw new MalformedReplyError(`malformed XML in an S3 reply: ${what}`);
}

function decodeText(raw: string): string {
  if (!raw.includes('&')) return raw;
  return raw.replace(/&([^;&<]*);?/g, (m, ent: string) => {
    if (!m.endsWith(';')) bad(`'&' without an entity (${JSON.stringify(m.slice(0, 12))})`);
    if (ent in ENTITIES) return ENTITIES[ent]!;
    const num = /^#(?:x([0-9A-Fa-f]{1,6})|([0-9]{1,7}))$/.exec(ent);
    if (num) {
      const cp = num[1] !== undefined ? parseInt(num[1], 16) : Number(num[2]);
      const ch = cp <= 0x10ffff ? String.fromCodePoint(cp) : '\0';
      if (BAD_CHAR.test(ch)) bad(`character reference &${ent}; names no XML character`);
      return ch;
    }
    return bad(`unknown entity &${ent};`);
  });
}

/** The root element of `text` (see the header for what is refused). */
export function parseXml(text: string): XmlElement {
  if (BAD_CHAR.test(text)) bad('a character XML 1.0 does not allow');
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  const stack: XmlElement[] = [];
  let root: XmlElement | undefined;
  const skipSpace = () => { while (i < text.length && /[ \t\r\n]/.test(text[i]!)) i++; };
  const readName = (): string => {
    NAME.lastIndex = i;
    const m = NAME.exec(text);
    if (!m) bad(`a tag without a name at offset ${i}`);
    i += m[0].length;
    return m[0];
  };
  if (text.startsWith('<?xml', i)) {
    const end = text.indexOf('?>', i);
    if (end < 0) bad('an unclosed XML declaration');
    i = end + 2;
  }
  while (i < text.length) {
    const lt = text.indexOf('<', i);
    const chunk = text.slice(i, lt < 0 ? text.length : lt);
    if (chunk.length > 0) {
      if (stack.length === 0) { if (chunk.trim() !== '') bad('text outside the root element'); }
      else stack[stack.length - 1]!.text += decodeText(chunk);
    }
    if (lt < 0) break;
    i = lt;
    if (text.startsWith('<!--', i)) {
      const end = text.indexOf('-->', i + 4);
      if (end < 0) bad('an unclosed comment');
      i = end + 3;
    } else if (text.startsWith('<![CDATA[', i)) {
      if (stack.length === 0) bad('CDATA outside the root element');
      const end = text.indexOf(']]>', i + 9);
      if (end < 0) bad('an unclosed CDATA section');
      stack[stack.length - 1]!.text += text.slice(i + 9, end);
      i = end + 3;
    } else if (text.startsWith('<!', i)) {
      bad('a DOCTYPE or other declaration (refused)');
    } else if (text.startsWith('<?', i)) {
      const end = text.indexOf('?>', i);
      if (end < 0) bad('an unclosed processing instruction');
      i = end + 2;
    } else if (text.startsWith('</', i)) {
      i += 2;
      const name = readName();
      skipSpace();
      if (text[i] !== '>') bad(`a malformed closing tag </${name}`);
      i++;
      const open = stack.pop();
      if (open === undefined || open.name !== name) bad(`</${name}> closes ${open ? `<${open.name}>` : 'nothing'}`);
    } else {
      i++;
      const el: XmlElement = { name: readName(), children: [], text: '' };
      // Attributes: name="value" or name='value', read and ignored (xmlns).
      for (;;) {
        const before = i;
        skipSpace();
        if (text[i] === '>' || text.startsWith('/>', i)) break;
        if (i === before) bad(`a malformed tag <${el.name}`);
        readName();
        skipSpace();
        if (text[i] !== '=') bad(`an attribute without a value in <${el.name}>`);
        i++;
        skipSpace();
        const q = text[i];
        if (q !== '"' && q !== "'") bad(`an unquoted attribute value in <${el.name}>`);
        const end = text.indexOf(q, i + 1);
        if (end < 0 || text.slice(i + 1, end).includes('<')) bad(`a malformed attribute value in <${el.name}>`);
        decodeText(text.slice(i + 1, end));
        i = end + 1;
      }
      if (stack.length > 0) stack[stack.length - 1]!.children.push(el);
      else if (root === undefined) root = el;
      else bad('a second root element');
      if (text.startsWith('/>', i)) i += 2;
      else { i++; stack.push(el); }
    }
  }
  if (stack.length > 0) bad(`<${stack[stack.length - 1]!.name}> is never closed (the reply was cut short?)`);
  if (root === undefined) bad('no root element');
  return root;
}

/** One page of a listing (./lister.ts ListPage). */
export interface ParsedListPage {
  objects: ObjectInfo[];
  prefixes: string[];
  /** Set when the page is truncated: where the next page starts. */
  nextToken: string | undefined;
  truncated: boolean;
}

function only(el: XmlElement, name: string, required: true): XmlElement;
function only(el: XmlElement, name: string, required?: false): XmlElement | undefined;
function only(el: XmlElement, name: string, required = false): XmlElement | undefined {
  let found: XmlElement | undefined;
  for (const c of el.children) {
    if (c.name !== name) continue;
    if (found !== undefined) throw new MalformedReplyError(`S3 listing: <${el.name}> has <${name}> twice`);
    found = c;
  }
  if (required && found === undefined) throw new MalformedReplyError(`S3 listing: <${el.name}> has no <${name}>`);
  return found;
}

/** S3's URL encoding of listing fields (encoding-type=url): '+' is a space, %XX a UTF-8 byte. */
export function decodeListField(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    throw new MalformedReplyError(`S3 listing: ${JSON.stringify(s.slice(0, 80))} is not valid URL encoding`);
  }
}

/** A ListObjectsV2 reply body as one page; MalformedReplyError when it is not one. */
export function parseListObjectsV2(xml: string): ParsedListPage {
  const root = parseXml(xml);
  if (root.name !== 'ListBucketResult') throw new MalformedReplyError(`S3 listing: the reply is <${root.name}>, not <ListBucketResult>`);
  const encoding = only(root, 'EncodingType')?.text;
  if (encoding !== undefined && encoding !== 'url') throw new MalformedReplyError(`S3 listing: unknown EncodingType ${JSON.stringify(encoding)}`);
  const field = encoding === 'url' ? decodeListField : (s: string) => s;
  const truncatedText = only(root, 'IsTruncated', true).text;
  if (truncatedText !== 'true' && truncatedText !== 'false') throw new MalformedReplyError(`S3 listing: IsTruncated is ${JSON.stringify(truncatedText)}, not true or false`);
  const truncated = truncatedText === 'true';
  const objects: ObjectInfo[] = [];
  const prefixes: string[] = [];
  for (const c of root.children) {
    if (c.name === 'Contents') {
      const key = field(only(c, 'Key', true).text);
      const sizeText = only(c, 'Size', true).text;
      if (!/^[0-9]{1,16}$/.test(sizeText) || !Number.isSafeInteger(Number(sizeText))) throw new MalformedReplyError(`S3 listing: the size of ${JSON.stringify(key)} is ${JSON.stringify(sizeText)}, not a byte count`);
      const lm = only(c, 'LastModified')?.text;
      const lastModified = lm !== undefined ? new Date(lm) : new Date(0);
      if (Number.isNaN(lastModified.getTime())) throw new MalformedReplyError(`S3 listing: the LastModified of ${JSON.stringify(key)} is ${JSON.stringify(lm)}, not a date`);
      objects.push({ key, size: Number(sizeText), etag: only(c, 'ETag')?.text ?? '', lastModified, storageClass: only(c, 'StorageClass')?.text || 'STANDARD' });
    } else if (c.name === 'CommonPrefixes') {
      const p = field(only(c, 'Prefix', true).text);
      if (p !== '') prefixes.push(p);
    }
  }
  const token = only(root, 'NextContinuationToken')?.text;
  return { objects, prefixes, truncated, nextToken: truncated ? token : undefined };
}
