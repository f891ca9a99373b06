/**
 * The process logger: pino, JSON lines on stderr (stdout belongs to commands'
 * output and to `sluice run`'s child), level from setLogLevel() or SLUICE_LOG_LEVEL.
 *
 * Credentials are never logged. Every finished line passes through scrub()
 * (pino's streamWrite hook) before it is written, so the rule holds for the
 * message, every nested field and error stacks alike:
 *  - the value of any field named like a credential (accessKeyId, secretAccessKey,
 *    sessionToken, authorization, x-amz-security-token, AWS_* variables) at any depth;
 *  - presigned-URL query parameters (X-Amz-Signature, X-Amz-Credential,
 *    X-Amz-Security-Token) and SigV4 `Credential=` / `Signature=` header parts;
 *  - free text that looks like an access key id (AKIA/ASIA + 16) or a secret key
 *    (40 base64 characters mixing upper case, lower case and digits).
 * Scrubbing the serialized line rather than the objects costs a few regex passes
 * per line; at info sluice logs events, not per-read traffic, so that is cheap. At debug
 * (a line per S3 request) and trace (a line per FUSE operation) it is the price of asking.
 *
 * Where and how (configureLogging(), from --log-format and --log-file): the process
 * logger writes through one sink that can be pointed at stderr or a file (appended,
 * synchronously) and can turn each scrubbed JSON line into one readable text line
 * (`time LEVEL component: message key=value ...`). JSON is the default outside a
 * terminal, for log collectors; text is the default on a terminal.
 */
import { mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino, { type DestinationStream, type Logger } from 'pino';
import { InvalidArgumentError } from './errors.js';

/** What replaces a secret in a log line. */
export const REDACTED = '[REDACTED]';

/** Levels a user may choose (pino's, plus silent). */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Used when neither setLogLevel() nor SLUICE_LOG_LEVEL chose: events, not traffic. */
const DEFAULT_LEVEL = 'info';

/** Field names whose values are credentials (compared case-insensitively, `-`/`_` ignored). */
const SECRET_FIELDS = [
  'accessKeyId', 'secretAccessKey', 'sessionToken', 'authorization', 'x-amz-security-token',
  'aws_access_key_id', 'aws_secret_access_key', 'aws_session_token', 'password', 'secret',
];
const fieldPattern = SECRET_FIELDS.map((f) => f.replace(/[-_]/g, '').split('').join('[-_]?')).join('|');

/** `"field": <string | number | bool | null>` inside a JSON line. */
const JSON_FIELD_RE = new RegExp(`("(?:${fieldPattern})"\\s*:\\s*)("(?:[^"\\\\]|\\\\.)*"|-?\\d[\\d.eE+-]*|true|false|null)`, 'gi');
/** `"field": [ ... ]` with scalar items only (e.g. a header listed as an array). */
const JSON_ARRAY_FIELD_RE = new RegExp(`("(?:${fieldPattern})"\\s*:\\s*)\\[(?:[^\\]"]|"(?:[^"\\\\]|\\\\.)*")*\\]`, 'gi');
/** `field=value` or `field: value` in free text (env dumps, header text, query strings); an auth scheme word is taken along. */
const TEXT_FIELD_RE = new RegExp(`\\b((?:${fieldPattern})\\s*[=:]\\s*)(?!\\s*")((?:(?:Bearer|Basic|AWS4-HMAC-SHA256|AWS)\\s+)?[^\\s&,;"'\\\\]+)`, 'gi');
/** Presigned URL parameters; the value runs to the next `&`, quote, space or backslash. */
const QUERY_RE = /([?&](?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token)=)[^&"'\s\\#]*/gi;
/** SigV4 Authorization header parts: `Credential=AKIA.../date/region/s3/aws4_request`, `Signature=<hex>`. */
const SIGV4_RE = /\b((?:Credential|Signature)=)[^,&\s"\\]+/g;
/** Access key ids: long-term (AKIA) and temporary (ASIA). */
const ACCESS_KEY_RE = /\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g;
/** Candidates for a secret access key: exactly 40 base64 characters, not part of a longer run. */
const SECRET_RE = /(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])/g;

/**
 * A 40-character run is taken for a secret when it mixes upper case, lower case and
 * digits, and is not a path (secrets hold a '/' or two at most; paths hold several).
 * Hex digests (sha1 is 40 lowercase hex) are therefore kept.
 */
function looksLikeSecret(s: string): boolean {
  return /[A-Z]/.test(s) && /[a-z]/.test(s) && /[0-9]/.test(s) && (s.match(/\//g)?.length ?? 0) < 3;
}

/** Remove credentials from text (a JSON log line, an error message, a URL). */
export function scrub(text: string): string {
  return text
    .replace(JSON_ARRAY_FIELD_RE, `$1"${REDACTED}"`)
    .replace(JSON_FIELD_RE, `$1"${REDACTED}"`)
    .replace(TEXT_FIELD_RE, `$1${REDACTED}`)
    .replace(QUERY_RE, `$1${REDACTED}`)
    .replace(SIGV4_RE, `$1${REDACTED}`)
    .replace(ACCESS_KEY_RE, REDACTED)
    .replace(SECRET_RE, (m) => (looksLikeSecret(m) ? REDACTED : m));
}

function checkLevel(level: string): string {
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new InvalidArgumentError(`log level ${JSON.stringify(level)} is not one of ${LOG_LEVELS.join(', ')}`, {
      hint: 'Pass --log-level info (or set SLUICE_LOG_LEVEL)',
    });
  }
  return level;
}

/** The level from the environment; an invalid value falls back to info (options.ts rejects it for commands). */
function initialLevel(): string {
  const env = process.env.SLUICE_LOG_LEVEL;
  return env && (LOG_LEVELS as readonly string[]).includes(env) ? env : DEFAULT_LEVEL;
}

/**
 * A logger with sluice's settings writing to `dest` (default: stderr, synchronously,
 * so that the last lines before an exit are not lost). Tests pass their own stream.
 */
export function createLogger(dest?: DestinationStream | Writable, level: string = initialLevel()): Logger {
  return pino(
    {
      name: 'sluice',
      level: checkLevel(level),
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      hooks: { streamWrite: scrub },
    },
    dest ?? pino.destination({ dest: 2, sync: true }),
  );
}

/** pino's SonicBoom destination: what the sink writes to. */
type Destination = ReturnType<typeof pino.destination>;

/** Fields of a pino line that the text format shows in its fixed columns (or leaves out). */
const TEXT_FIXED = new Set(['level', 'time', 'pid', 'name', 'msg', 'component']);

/** One pino JSON line (already scrubbed) as `time LEVEL component: message key=value ...`. */
export function textLine(json: string): string {
  let rec: Record<string, unknown>;
  try {
    rec = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const fields: string[] = [];
  for (const [k, v] of Object.entries(rec)) {
    if (TEXT_FIXED.has(k)) continue;
    // Strings bare when they can be, else quoted; numbers, booleans and objects as JSON.
    fields.push(`${k}=${typeof v !== 'string' ? JSON.stringify(v) : /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v)}`);
  }
  const level = String(rec.level ?? 'info').toUpperCase().padEnd(5);
  const component = rec.component === undefined ? '' : `${String(rec.component)}: `;
  return `${String(rec.time ?? '')} ${level} ${component}${String(rec.msg ?? '')}${fields.length ? ` ${fields.join(' ')}` : ''}\n`;
}

/** The process logger's output: stderr or a file, JSON or text; switched by configureLogging(). */
const sink = {
  dest: undefined as Destination | undefined,
  text: false,
  write(line: string): void {
    this.dest ??= pino.destination({ dest: 2, sync: true });
    this.dest.write(this.text ? textLine(line) : line);
  },
};

/** The process logger. Use `log.child({ component: 'fuse' })` for a part of the program. */
export const log: Logger = createLogger(sink as unknown as DestinationStream);

/**
 * Whether the process logger writes debug and trace lines, as plain booleans that the hot
 * paths read before building a line: one per S3 request attempt at debug (src/s3/), one per
 * FUSE operation at trace (src/fuse/adapter.ts). At info neither builds an object or a string;
 * the cost is one property read per request or operation. Kept in step by setLogLevel().
 */
export const logOn = { debug: log.isLevelEnabled('debug'), trace: log.isLevelEnabled('trace') };

export type LogFormat = 'auto' | 'text' | 'json';

/**
 * Applies --log-level, --log-format and --log-file to the process logger. `auto` is text
 * on a terminal (stderr a TTY, no log file) and JSON otherwise. The file is created if
 * missing and appended to; a file that cannot be opened is an InvalidArgumentError.
 */
export function configureLogging(o: { logLevel: string; logFormat?: string; logFile?: string | undefined }, stderrIsTty = process.stderr.isTTY === true): void {
  setLogLevel(o.logLevel);
  sink.dest = undefined; // stderr unless a file is given
  if (o.logFile !== undefined) {
    let dest: Destination;
    try {
      // Opened here, so a bad path fails now with its errno (SonicBoom would retry it).
      mkdirSync(path.dirname(o.logFile), { recursive: true });
      dest = pino.destination({ dest: openSync(o.logFile, 'a'), sync: true });
    } catch (err) {
      throw new InvalidArgumentError(`cannot open --log-file ${o.logFile}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, { hint: 'Choose a path in a writable folder' });
    }
    sink.dest = dest;
  }
  const format = (o.logFormat ?? 'auto') as LogFormat;
  sink.text = format === 'text' || (format === 'auto' && stderrIsTty && o.logFile === undefined);
}

/** Set the level of `log` (and of its children): fatal, error, warn, info, debug, trace or silent. */
export function setLogLevel(level: string): void {
  log.level = checkLevel(level);
  logOn.debug = log.isLevelEnabled('debug');
  logOn.trace = log.isLevelEnabled('trace');
}
