/**
 * Every error sluice raises on purpose, in one file, each with a stable code.
 *
 * Errors are plain classes that carry:
 *  - `code`: a stable `SLUICE_*` string that tests, logs and metrics use
 *    (never match on message text);
 *  - `hint`: one sentence on the likely fix, shown to the user after the message;
 *  - `userError`: true when the cause is the user's input or environment
 *    (bad URI, missing bucket, missing /dev/fuse, ...). The CLI prints such
 *    errors as one line and exits non-zero, without a stack trace.
 *
 * Errors become errnos in exactly one place: `errnoFor()` below, used by the
 * FUSE adapter. They become exit codes in exactly one place: `exitCodeFor()`,
 * used by `cli.ts`.
 */

export type ErrorCode =
  | 'SLUICE_INVALID_ARGUMENT'
  | 'SLUICE_BAD_URI'
  | 'SLUICE_CONFIG'
  | 'SLUICE_MANIFEST'
  | 'SLUICE_RECORDIO'
  | 'SLUICE_DECOMPRESSION'
  | 'SLUICE_UNSAFE_KEY'
  | 'SLUICE_NO_SUCH_BUCKET'
  | 'SLUICE_NO_SUCH_KEY'
  | 'SLUICE_ACCESS_DENIED'
  | 'SLUICE_INVALID_CREDENTIALS'
  | 'SLUICE_MISSING_CREDENTIALS'
  | 'SLUICE_ENDPOINT_UNREACHABLE'
  | 'SLUICE_OBJECT_CHANGED'
  | 'SLUICE_BAD_RANGE_REPLY'
  | 'SLUICE_S3_ERROR'
  | 'SLUICE_TIMEOUT'
  | 'SLUICE_RETRIES_EXHAUSTED'
  | 'SLUICE_ABORTED'
  | 'SLUICE_MOUNTPOINT'
  | 'SLUICE_FUSE_UNAVAILABLE'
  | 'SLUICE_NOT_FOUND'
  | 'SLUICE_READ_ONLY'
  | 'SLUICE_IS_DIRECTORY'
  | 'SLUICE_NOT_DIRECTORY'
  | 'SLUICE_BAD_HANDLE'
  | 'SLUICE_CHILD_FAILED'
  | 'SLUICE_METRICS_UNAVAILABLE'
  | 'SLUICE_INTERNAL'
  | 'SLUICE_TLS_CERTIFICATE'
  // issue 15: snapshots, archived objects, partition filters
  | 'SLUICE_SNAPSHOT'
  | 'SLUICE_OBJECT_ARCHIVED'
  | 'SLUICE_ARCHIVED_OBJECTS'
  // a dead FUSE mount in sluice's way
  | 'SLUICE_DEAD_MOUNT'
  // issue 43: the data path's HTTP/1.1 client refuses what would break framing, both ways
  | 'SLUICE_HTTP_PROTOCOL'
  | 'SLUICE_UNSAFE_HEADER'
  | 'SLUICE_MALFORMED_REPLY';

export interface SluiceErrorOptions {
  hint?: string;
  cause?: unknown;
}

/**
 * Marks every SluiceError, in whichever copy of this module made it. The CLI is one
 * esbuild bundle, but `sluice bench` and `sluice demo` load dist/'s own modules (see
 * scripts/bundle.mjs), so one process can hold two copies of these classes: an error
 * thrown by dist/'s copy must still be a user error to the bundle's cli.ts.
 */
const BRAND = Symbol.for('sluice.SluiceError');

export class SluiceError extends Error {
  /**
   * `x instanceof C` for C this class or any subclass: true when x is branded and C's
   * prototype, or a class of the same name (the other copy's), is on x's prototype chain.
   * Class names are unique in this file, and the bundle keeps them (keepNames).
   */
  static override [Symbol.hasInstance](this: abstract new (...args: never[]) => unknown, value: unknown): boolean {
    if (typeof value !== 'object' || value === null || !(BRAND in value)) return false;
    for (let p: unknown = Object.getPrototypeOf(value); p !== null; p = Object.getPrototypeOf(p)) {
      if (p === this.prototype) return true;
      const ctor = Object.hasOwn(p as object, 'constructor') ? (p as { constructor: unknown }).constructor : undefined;
      if (typeof ctor === 'function' && ctor.name === this.name) return true;
    }
    return false;
  }

  readonly code: ErrorCode;
  readonly hint: string | undefined;
  /** True when the user can fix it (input, environment); printed without a stack. */
  readonly userError: boolean;

  constructor(code: ErrorCode, message: string, opts: SluiceErrorOptions = {}, userError = false) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.code = code;
    this.hint = opts.hint;
    this.userError = userError;
  }

  /** One line for a person: the problem, then the fix. */
  oneLine(): string {
    return this.hint ? `${this.message}. ${this.hint}` : this.message;
  }
}
Object.defineProperty(SluiceError.prototype, BRAND, { value: true });

// ---- user input and environment -------------------------------------------------

export class InvalidArgumentError extends SluiceError {
  constructor(message: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_INVALID_ARGUMENT', message, opts, true);
  }
}

export class BadUriError extends SluiceError {
  constructor(uri: string, why: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_BAD_URI', `bad S3 URI ${JSON.stringify(uri)}: ${why}`, {
      hint: 'Use the form s3://bucket/prefix/',
      ...opts,
    }, true);
  }
}

export class ConfigError extends SluiceError {
  constructor(message: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_CONFIG', message, opts, true);
  }
}

export class ManifestError extends SluiceError {
  readonly line: number | undefined;
  constructor(message: string, line?: number, opts: SluiceErrorOptions = {}) {
    super('SLUICE_MANIFEST', line === undefined ? message : `manifest line ${line}: ${message}`, opts, true);
    this.line = line;
  }
}

export class RecordIOError extends SluiceError {
  constructor(message: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_RECORDIO', message, opts, true);
  }
}

/** An object of a `CompressionType: Gzip` channel is not valid gzip data. */
export class DecompressionError extends SluiceError {
  constructor(what: string, why: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_DECOMPRESSION', `${what} is not valid gzip data: ${why}`, {
      hint: 'Set CompressionType to None for this channel, or store the objects gzip-compressed',
      ...opts,
    }, true);
  }
}

export class UnsafeKeyError extends SluiceError {
  constructor(key: string, why: string) {
    super('SLUICE_UNSAFE_KEY', `object key ${JSON.stringify(key)} is unsafe: ${why}`, {
      hint: 'Rename the object, or exclude it from the channel',
    }, true);
  }
}

export class MountpointError extends SluiceError {
  constructor(message: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_MOUNTPOINT', message, opts, true);
  }
}

export class FuseUnavailableError extends SluiceError {
  constructor(message: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_FUSE_UNAVAILABLE', message, opts, true);
  }
}

// ---- S3 ---------------------------------------------------------------------------

export class NoSuchBucketError extends SluiceError {
  constructor(readonly bucket: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_NO_SUCH_BUCKET', `bucket ${JSON.stringify(bucket)} does not exist`, {
      hint: 'Check the bucket name, the --region and the --endpoint',
      ...opts,
    }, true);
  }
}

export class NoSuchKeyError extends SluiceError {
  constructor(readonly bucket: string, readonly key: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_NO_SUCH_KEY', `s3://${bucket}/${key} does not exist`, {
      hint: 'It may have been deleted since it was listed',
      ...opts,
    }, true);
  }
}

export class AccessDeniedError extends SluiceError {
  constructor(readonly bucket: string, key: string | undefined, opts: SluiceErrorOptions = {}) {
    super('SLUICE_ACCESS_DENIED', `access denied to s3://${bucket}/${key ?? ''}`, {
      hint: 'Grant s3:ListBucket on the bucket and s3:GetObject on the prefix to these credentials',
      ...opts,
    }, true);
  }
}

export class InvalidCredentialsError extends SluiceError {
  constructor(message: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_INVALID_CREDENTIALS', message, {
      hint: 'Check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or the role these credentials come from',
      ...opts,
    }, true);
  }
}

export class MissingCredentialsError extends SluiceError {
  constructor(opts: SluiceErrorOptions = {}) {
    super('SLUICE_MISSING_CREDENTIALS', 'no AWS credentials found', {
      hint: 'Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run where a role is available (IMDS, ECS, EKS IRSA)',
      ...opts,
    }, true);
  }
}

export class EndpointUnreachableError extends SluiceError {
  constructor(readonly endpoint: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_ENDPOINT_UNREACHABLE', `cannot reach S3 endpoint ${endpoint}`, {
      hint: 'Check --endpoint, the network, and that the server is up',
      ...opts,
    }, true);
  }
}

/** The object's ETag differs from the one pinned when it was listed or opened. */
export class ObjectChangedError extends SluiceError {
  constructor(readonly bucket: string, readonly key: string, readonly expectedEtag: string, readonly actualEtag: string | undefined, opts: SluiceErrorOptions = {}) {
    super('SLUICE_OBJECT_CHANGED', `s3://${bucket}/${key} changed while it was being read (ETag ${expectedEtag} -> ${actualEtag ?? 'unknown'})`, {
      hint: 'Reopen the file to read the new version; remount to see new listings',
      ...opts,
    });
  }
}

/** The server answered a ranged GET with bytes we cannot trust (wrong Content-Range, short body after retries, ...). */
export class BadRangeReplyError extends SluiceError {
  constructor(message: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_BAD_RANGE_REPLY', message, opts);
  }
}

/**
 * A reply that breaks HTTP/1.1's framing rules (RFC 9112; src/s3/reply-parser.ts): conflicting
 * lengths, a transfer coding other than chunked, a control character in a field, ... No byte
 * of it is used, and it is not retried: the same server would frame the next one the same way.
 */
export class HttpProtocolError extends SluiceError {
  constructor(message: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_HTTP_PROTOCOL', message, opts);
  }
}

/**
 * A request header or path holding CR, LF or another control character (src/s3/wire.ts):
 * written as is, it would end the header early and could smuggle a second request onto the
 * connection. E.g. an ETag from a snapshot file or a listing.
 */
export class UnsafeHeaderError extends SluiceError {
  constructor(message: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_UNSAFE_HEADER', message, opts);
  }
}

/**
 * A reply body that is not what S3 sends (src/s3/list-parser.ts): XML that is not well formed,
 * a listing without its required fields, a size that is not a number, a key whose URL
 * encoding is broken. No part of it is used; not retried (the server would send it again).
 */
export class MalformedReplyError extends SluiceError {
  constructor(message: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_MALFORMED_REPLY', message, opts);
  }
}

/** Any other S3 error reply, with its status and S3 error code. */
export class S3Error extends SluiceError {
  constructor(message: string, readonly status: number | undefined, readonly s3Code: string | undefined, opts: SluiceErrorOptions = {}) {
    super('SLUICE_S3_ERROR', message, opts);
  }
}

export class TimeoutError extends SluiceError {
  constructor(message: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_TIMEOUT', message, opts);
  }
}

export class RetriesExhaustedError extends SluiceError {
  constructor(message: string, readonly attempts: number, opts: SluiceErrorOptions = {}) {
    super('SLUICE_RETRIES_EXHAUSTED', message, opts);
  }
}

export class AbortedError extends SluiceError {
  constructor(message = 'operation aborted', opts: SluiceErrorOptions = {}) {
    super('SLUICE_ABORTED', message, opts);
  }
}

// ---- filesystem core -------------------------------------------------------------

export class NotFoundError extends SluiceError {
  constructor(path: string) { super('SLUICE_NOT_FOUND', `no such file or directory: ${path}`); }
}
export class ReadOnlyError extends SluiceError {
  constructor(op: string) { super('SLUICE_READ_ONLY', `read-only filesystem: ${op} is not supported`); }
}
export class IsDirectoryError extends SluiceError {
  constructor(path: string) { super('SLUICE_IS_DIRECTORY', `is a directory: ${path}`); }
}
export class NotDirectoryError extends SluiceError {
  constructor(path: string) { super('SLUICE_NOT_DIRECTORY', `not a directory: ${path}`); }
}
export class BadHandleError extends SluiceError {
  constructor(fh: number) { super('SLUICE_BAD_HANDLE', `bad file handle ${fh}`); }
}

/** `sluice status` found no metrics endpoint (nothing listens, or not sluice's). */
export class MetricsUnavailableError extends SluiceError {
  constructor(readonly url: string, why: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_METRICS_UNAVAILABLE', `no sluice metrics at ${url}: ${why}`, {
      hint: 'Check that sluice is running with --metrics-port (default 9400), or pass --url http://HOST:PORT/metrics',
      ...opts,
    }, true);
  }
}

export class ChildFailedError extends SluiceError {
  constructor(message: string, readonly exitCode: number, opts: SluiceErrorOptions = {}) {
    super('SLUICE_CHILD_FAILED', message, opts, true);
  }
}

/**
 * The endpoint's TLS certificate was refused: self-signed or signed by a CA this process
 * does not trust, issued for another host name, or expired. Not retried: it will not
 * change by itself. `tlsCode` is OpenSSL's/Node's code (e.g. SELF_SIGNED_CERT_IN_CHAIN).
 */
export class TlsCertificateError extends SluiceError {
  constructor(readonly endpoint: string, readonly tlsCode: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_TLS_CERTIFICATE', `the TLS certificate of S3 endpoint ${endpoint} was refused (${tlsCode})`, {
      hint: tlsCode === 'ERR_TLS_CERT_ALTNAME_INVALID' ? 'Use the host name the certificate was issued for in --endpoint'
        : tlsCode === 'CERT_HAS_EXPIRED' || tlsCode === 'CERT_NOT_YET_VALID' ? "Renew the endpoint's certificate, or set this machine's clock right"
          : 'Pass the CA certificate that signed it with --ca-bundle FILE (or AWS_CA_BUNDLE=FILE)',
      ...opts,
    }, true);
  }
}

// ---- snapshots and archived objects (issue 15) --------------------------------------

/** A snapshot file that cannot be read, does not verify, or does not fit the command. */
export class SnapshotError extends SluiceError {
  constructor(message: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_SNAPSHOT', message, opts, true);
  }
}

/** How to restore an archived object, for error hints and log lines. */
export function restoreHint(bucket: string, key: string): string {
  return `Restore with: aws s3api restore-object --bucket ${bucket} --key ${JSON.stringify(key)} --restore-request Days=7 (Intelligent-Tiering archive tiers: --restore-request '{}'), or pass --skip-archived to leave archived objects out`;
}

/** One object cannot be read until it is restored (GLACIER, DEEP_ARCHIVE, Intelligent-Tiering archive tiers). */
export class ObjectArchivedError extends SluiceError {
  constructor(readonly bucket: string, readonly key: string, readonly storageClass: string, opts: SluiceErrorOptions = {}) {
    super('SLUICE_OBJECT_ARCHIVED', `s3://${bucket}/${key} is archived (${storageClass}) and cannot be read without a restore`, {
      hint: restoreHint(bucket, key),
      ...opts,
    }, true);
  }
}

/** A Pipe or File channel holds archived objects: found before the training command starts. */
export class ArchivedObjectsError extends SluiceError {
  constructor(readonly what: string, readonly bucket: string, readonly keys: readonly string[], readonly classes: readonly string[], opts: SluiceErrorOptions = {}) {
    const shown = keys.slice(0, ARCHIVED_NAMED).map((k) => JSON.stringify(k)).join(', ');
    const more = keys.length > ARCHIVED_NAMED ? ` and ${keys.length - ARCHIVED_NAMED} more` : '';
    super('SLUICE_ARCHIVED_OBJECTS', `${what}: ${keys.length} object${keys.length === 1 ? ' is' : 's are'} archived (${[...new Set(classes)].join(', ')}) and cannot be read without a restore: ${shown}${more}`, {
      hint: restoreHint(bucket, keys[0] ?? 'KEY'),
      ...opts,
    }, true);
  }
}
/** Archived keys named in ArchivedObjectsError: enough to find them, short enough for one line. */
const ARCHIVED_NAMED = 3;

// ---- dead FUSE mounts in sluice's folders ------------------------------------------

/**
 * A path sluice must use is, or lies under, a FUSE mount whose daemon is gone (a killed
 * `sluice mount`): every access fails with ENOTCONN until it is unmounted.
 */
export class DeadMountError extends SluiceError {
  /** `what` names the path's role (e.g. 'the folder of File-mode channel "train"'). */
  constructor(what: string, readonly path: string, readonly mountpoint: string, opts: SluiceErrorOptions = {}) {
    const where = mountpoint === path ? 'is a dead FUSE mount' : `is under a dead FUSE mount at ${mountpoint}`;
    super('SLUICE_DEAD_MOUNT', `${what} ${path} ${where} (ENOTCONN: the daemon that served it is gone)`, {
      hint: `Unmount it: fusermount -u ${mountpoint} (or umount -l ${mountpoint} as root), then retry`,
      ...opts,
    }, true);
  }
}

// ---- the two mapping points -------------------------------------------------------

/** Linux errno values used by the FUSE adapter (fuse-native wants them negated). */
export const Errno = {
  EPERM: 1, ENOENT: 2, EIO: 5, EBADF: 9, EAGAIN: 11, EACCES: 13, ENOTDIR: 20, EISDIR: 21,
  EINVAL: 22, EROFS: 30, ENAMETOOLONG: 36, ENOSYS: 38, ENODATA: 61, ETIMEDOUT: 110, ESTALE: 116,
} as const;

/**
 * The one place where errors become errnos. Unknown errors are EIO: the kernel
 * must always get an answer, and EIO is what a reader of a failing disk expects.
 */
export function errnoFor(err: unknown): number {
  if (!(err instanceof SluiceError)) return Errno.EIO;
  switch (err.code) {
    case 'SLUICE_NOT_FOUND': return Errno.ENOENT;
    case 'SLUICE_NO_SUCH_KEY': return Errno.ESTALE; // listed, then deleted: the view is stale
    case 'SLUICE_READ_ONLY': return Errno.EROFS;
    case 'SLUICE_IS_DIRECTORY': return Errno.EISDIR;
    case 'SLUICE_NOT_DIRECTORY': return Errno.ENOTDIR;
    case 'SLUICE_BAD_HANDLE': return Errno.EBADF;
    case 'SLUICE_OBJECT_CHANGED': return Errno.ESTALE;
    case 'SLUICE_ACCESS_DENIED': return Errno.EACCES;
    case 'SLUICE_INVALID_CREDENTIALS':
    case 'SLUICE_MISSING_CREDENTIALS': return Errno.EACCES;
    case 'SLUICE_TIMEOUT': return Errno.ETIMEDOUT;
    case 'SLUICE_INVALID_ARGUMENT': return Errno.EINVAL;
    // An archived object has no data to read until it is restored: "No data available",
    // not EIO (a failing disk) nor EACCES (which sends people to their IAM policy).
    case 'SLUICE_OBJECT_ARCHIVED': return Errno.ENODATA;
    default: return Errno.EIO;
  }
}

/** The one place where errors become process exit codes (used only by cli.ts). */
export function exitCodeFor(err: unknown): number {
  if (err instanceof ChildFailedError) return err.exitCode;
  if (err instanceof SluiceError) return err.userError ? 2 : 1;
  return 1;
}

/** True for errors the CLI prints as one line without a stack. */
export function isUserError(err: unknown): err is SluiceError {
  return err instanceof SluiceError && err.userError;
}
