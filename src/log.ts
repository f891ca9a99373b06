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
 * per line; sluice logs events, not per-read traffic, so that is cheap.
 */
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

/** The process logger. Use `log.child({ component: 'fuse' })` for a part of the program. */
export const log: Logger = createLogger();

/** Set the level of `log` (and of its children): fatal, error, warn, info, debug, trace or silent. */
export function setLogLevel(level: string): void {
  log.level = checkLevel(level);
}
