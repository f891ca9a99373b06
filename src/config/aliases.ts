/**
 * Option names of mount-s3, s3fs and the AWS CLI, rewritten to sluice's before parsing, so a
 * command line written from habit works or is answered with the sluice name.
 *
 * translateAliases() walks argv once (only the part before a literal `--`) and:
 *   - renames a flag (`--endpoint-url X` -> `--endpoint X`, `--force-path-style` ->
 *     `--path-style`, `--debug` -> `--log-level debug`, `--cache DIR` -> `--cache-dir DIR`);
 *   - drops a flag that asks for what sluice always does (`--foreground`/`-f`: sluice mount
 *     stays in the foreground unless --daemon; `--read-only`: every mount is read-only);
 *   - expands `-o a,b=c` (FUSE/s3fs mount options) into sluice flags, accepts the mount
 *     options that ask for nothing sluice does not already do (ro, nonempty, _netdev, ...),
 *     and refuses the others with the list of those it knows;
 *   - refuses a flag sluice has no counterpart for (`--bind`, write options) with the reason.
 * A rule applies only when its target flag is one the command takes, so `sluice status -f`
 * is still an unknown option. The rewritten argv is parsed as if the user had typed it.
 */
import { InvalidArgumentError } from '../errors.js';

type Rule =
  /** The flag (and its value, if the target takes one) becomes `to`, plus a fixed value. */
  | { to: string; value?: string }
  /** Dropped: asks for what sluice does anyway; `when` is a flag the command must take. */
  | { drop: string; when: string }
  /** Refused with this reason. */
  | { refuse: string; when: string };

/** Flags of mount-s3 (m), s3fs (s) and the AWS CLI (a) and what sluice makes of them. */
const FLAG_RULES: Record<string, Rule> = {
  '--endpoint-url': { to: '--endpoint' }, // m, a
  '--force-path-style': { to: '--path-style' }, // m
  '--debug': { to: '--log-level', value: 'debug' }, // m, a
  '-d': { to: '--log-level', value: 'debug' }, // s
  '--cache': { to: '--cache-dir' }, // m: a local folder for cached blocks
  '--foreground': { drop: 'sluice mount stays in the foreground unless --daemon', when: '--daemon' }, // m
  '-f': { drop: 'sluice mount stays in the foreground unless --daemon', when: '--daemon' }, // s, m
  '--read-only': { drop: 'every sluice mount is read-only', when: '--allow-other' }, // m
  '--bind': { refuse: "--bind (mount-s3's choice of network interface) has no sluice counterpart: sluice connects as the routing table says", when: '--endpoint' },
  '--allow-delete': { refuse: '--allow-delete: sluice mounts are read-only', when: '--allow-other' },
  '--allow-overwrite': { refuse: '--allow-overwrite: sluice mounts are read-only', when: '--allow-other' },
  '--incremental-upload': { refuse: '--incremental-upload: sluice mounts are read-only', when: '--allow-other' },
};

/** s3fs dbglevel names to sluice log levels. */
const S3FS_LEVELS: Record<string, string> = { crit: 'fatal', critical: 'fatal', err: 'error', error: 'error', warn: 'warn', info: 'info', debug: 'debug', dbg: 'debug' };

/** `-o` mount options with no effect in sluice: it does this already, or it is for mount(8)/fstab. */
const O_ACCEPTED = new Set(['ro', 'defaults', 'nonempty', '_netdev', 'noatime', 'nodiratime', 'nodev', 'nosuid', 'noexec', 'exec', 'auto_unmount', 'default_permissions', 'iam_role', 'iam_role=auto']);

/** `-o` mount options as sluice flags (a function of the option's value, or undefined when the value is bad). */
const O_FLAGS: Record<string, (v: string | undefined) => string[] | undefined> = {
  allow_other: () => ['--allow-other'],
  allow_root: () => ['--allow-root'],
  uid: (v) => (v === undefined ? undefined : ['--uid', v]),
  gid: (v) => (v === undefined ? undefined : ['--gid', v]),
  umask: (v) => {
    if (v === undefined || !/^0?[0-7]{1,3}$/.test(v)) return undefined;
    const m = parseInt(v, 8);
    return ['--dir-mode', (0o555 & ~m).toString(8).padStart(4, '0'), '--file-mode', (0o444 & ~m).toString(8).padStart(4, '0')];
  },
  url: (v) => (v === undefined ? undefined : ['--endpoint', v]), // s3fs: the endpoint URL
  endpoint: (v) => (v === undefined ? undefined : ['--region', v]), // s3fs: the region (sic)
  use_path_request_style: () => ['--path-style'],
  profile: (v) => (v === undefined ? undefined : ['--profile', v]),
  requester_pays: () => ['--requester-pays'],
  public_bucket: (v) => (v === undefined || v === '1' ? ['--no-sign-request'] : []),
  dbglevel: (v) => (v !== undefined && S3FS_LEVELS[v.toLowerCase()] ? ['--log-level', S3FS_LEVELS[v.toLowerCase()]!] : undefined),
  curldbg: () => ['--log-level', 'trace'],
};

const O_REFUSED: Record<string, string> = {
  rw: 'sluice mounts are read-only',
  passwd_file: 'sluice takes credentials from the AWS chain: use AWS_SHARED_CREDENTIALS_FILE and --profile, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY',
};

function expandMountOptions(list: string, command: string): string[] {
  const out: string[] = [];
  for (const item of list.split(',').map((x) => x.trim()).filter((x) => x !== '')) {
    if (O_ACCEPTED.has(item)) continue;
    const eq = item.indexOf('=');
    const name = eq === -1 ? item : item.slice(0, eq);
    const value = eq === -1 ? undefined : item.slice(eq + 1);
    if (name in O_REFUSED) throw new InvalidArgumentError(`-o ${name}: ${O_REFUSED[name]}`, { hint: `See sluice ${command} --help` });
    const rule = O_FLAGS[name];
    if (rule === undefined) {
      throw new InvalidArgumentError(`unknown -o option ${JSON.stringify(item)} (sluice ${command})`, {
        hint: `sluice takes -o ${Object.keys(O_FLAGS).join(', ')} (as its own flags) and accepts ${[...O_ACCEPTED].filter((o) => !o.includes('=')).join(', ')}; see sluice ${command} --help`,
      });
    }
    const flags = rule(value);
    if (flags === undefined) throw new InvalidArgumentError(`-o ${item}: bad value`, { hint: `e.g. -o uid=1000,gid=1000,umask=022,allow_other (sluice ${command} --help)` });
    out.push(...flags);
  }
  return out;
}

/**
 * argv (before `--`) with the aliases of mount-s3, s3fs and the AWS CLI rewritten to sluice's
 * flags. `takes(flag)` says whether the command takes a sluice flag (e.g. '--endpoint').
 */
export function translateAliases(argv: readonly string[], command: string, takes: (flag: string) => boolean): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if ((a === '-o' || a.startsWith('-o') && !a.startsWith('--')) && takes('--allow-other')) {
      const list = a === '-o' ? argv[++i] : a.slice(2);
      if (list === undefined) throw new InvalidArgumentError(`-o needs a list of mount options (sluice ${command})`, { hint: 'e.g. -o allow_other,uid=1000' });
      out.push(...expandMountOptions(list, command));
      continue;
    }
    const eq = a.startsWith('--') ? a.indexOf('=') : -1;
    const name = eq === -1 ? a : a.slice(0, eq);
    const rule = Object.hasOwn(FLAG_RULES, name) ? FLAG_RULES[name]! : undefined;
    if (rule === undefined) { out.push(a); continue; }
    if ('drop' in rule) {
      if (takes(rule.when)) continue;
      out.push(a);
    } else if ('refuse' in rule) {
      if (takes(rule.when)) throw new InvalidArgumentError(rule.refuse, { hint: `See sluice ${command} --help` });
      out.push(a);
    } else if (!takes(rule.to)) {
      out.push(a);
    } else if (rule.value !== undefined) {
      out.push(`${rule.to}=${rule.value}`);
    } else {
      out.push(eq === -1 ? rule.to : `${rule.to}=${a.slice(eq + 1)}`);
    }
  }
  return out;
}
