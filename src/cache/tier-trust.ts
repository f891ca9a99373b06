/**
 * Who may touch the disk tier (--cache-dir): its trust model, enforced when it opens
 * (issue 43; SEMANTICS.md "The disk tier: who can read it, who can plant bytes").
 *
 * The tier holds training data in clear, and a block found there is served as the
 * object's bytes: its CRC32C catches corruption, not a forgery (anyone who can write the
 * folder can plant a block and its CRC for a key and ETag they know). So:
 *  - By default the tier is this user's alone: folders 0700, files 0600, whatever the
 *    umask (a umask can only take bits away, and none of 0600/0700's; a mode it would cut
 *    is set again with chmod/fchmod after create: `fixFileMode`, `fixDirMode`).
 *  - The folder given (--cache-dir) and the tier's own folder in it are checked before
 *    anything is read or written. Refused, with one line naming the fix: owned by another
 *    user (root excepted: root can read and write anything anyway), writable by every user,
 *    or writable by a group without the explicit sharing option. A tier folder this user
 *    owns is set back to the mode (tiers of earlier versions were 0755, files 0644).
 *  - Sharing between users is explicit: --cache-dir-group NAME (and --cache-dir-mode, 0770
 *    by default): folders get that group, mode and the setgid bit (so what any member
 *    creates stays in the group), files the mode's read/write bits (0660). Members of that
 *    group can then read every cached byte and plant bytes for each other; never others.
 *    The group must be one this process is in (it sets it on what it creates).
 */
import { chmodSync, chownSync, closeSync, fchmodSync, mkdirSync, openSync, readFileSync, statSync, type Stats } from 'node:fs';
import { InvalidArgumentError } from '../errors.js';

/** Folders of a private tier: this user only (enter, list, create). */
export const PRIVATE_DIR_MODE = 0o700;
/** Files of a private tier: this user reads and writes them, nobody else. */
export const PRIVATE_FILE_MODE = 0o600;
/** --cache-dir-mode's default with --cache-dir-group: the group does what the owner does. */
export const SHARED_DIR_MODE = 0o770;
/** Folders of a shared tier carry the setgid bit: entries created in them inherit the group. */
const SETGID = 0o2000;

export interface TierAccess {
  /** Mode of the folders the tier creates (setgid included when shared). */
  dirMode: number;
  /** Mode of the files it creates. */
  fileMode: number;
  /** The sharing group's id, when shared (--cache-dir-group). */
  gid?: number;
  /** The sharing group as given, for messages. */
  group?: string;
  /** The umask would cut bits of fileMode: each created file gets fchmod after create. */
  fixFileMode: boolean;
  /** The umask would cut bits of dirMode (or it has setgid): each created folder gets chmod. */
  fixDirMode: boolean;
}

export interface TierAccessOptions {
  /** --cache-dir-group: a group name or numeric id. */
  group?: string | undefined;
  /** --cache-dir-mode: the folders' permission bits (0770 by default when shared). */
  mode?: number | undefined;
}

/** The process's umask, read without changing it (process.umask() with no argument sets it twice). */
export function currentUmask(): number {
  try {
    const m = /^Umask:\s*([0-7]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (m) return parseInt(m[1]!, 8);
  } catch {
    // not Linux: fall through
  }
  return process.umask();
}

/** The id of group `name` (a name from /etc/group, or a number), or undefined when unknown. */
export function groupId(name: string, groupFile = '/etc/group'): number | undefined {
  if (/^\d+$/.test(name)) return Number(name);
  let text: string;
  try {
    text = readFileSync(groupFile, 'utf8');
  } catch {
    return undefined;
  }
  for (const line of text.split('\n')) {
    const [n, , gid] = line.split(':');
    if (n === name && gid !== undefined && /^\d+$/.test(gid)) return Number(gid);
  }
  return undefined;
}

function octal(mode: number): string {
  return `0${(mode & 0o7777).toString(8)}`;
}

/**
 * The modes and group the tier creates with, from --cache-dir-group / --cache-dir-mode
 * (InvalidArgumentError, one line, for a mode that is not a sharing mode or a group this
 * process cannot use).
 */
export function tierAccess(o: TierAccessOptions = {}, proc: { umask?: number; root?: boolean; groups?: readonly number[] } = {}): TierAccess {
  const umask = proc.umask ?? currentUmask();
  if (o.group === undefined) {
    if (o.mode !== undefined && o.mode !== PRIVATE_DIR_MODE) {
      throw new InvalidArgumentError(`--cache-dir-mode ${octal(o.mode)} shares the disk tier, but with no group`, {
        hint: `Name the group to share it with: --cache-dir-group NAME --cache-dir-mode ${octal(o.mode)} (or leave both unset: the tier is then this user's alone, ${octal(PRIVATE_DIR_MODE)})`,
      });
    }
    return { dirMode: PRIVATE_DIR_MODE, fileMode: PRIVATE_FILE_MODE, fixFileMode: (PRIVATE_FILE_MODE & umask) !== 0, fixDirMode: (PRIVATE_DIR_MODE & umask) !== 0 };
  }
  const mode = o.mode ?? SHARED_DIR_MODE;
  if ((mode & 0o700) !== 0o700 || (mode & 0o007) !== 0 || mode > 0o777) {
    throw new InvalidArgumentError(`--cache-dir-mode ${octal(mode)} is not a mode to share the disk tier with a group`, {
      hint: 'Give the owner rwx, the group what it may do, and others nothing: 0770 (members read and write) or 0750 (members read only)',
    });
  }
  const gid = groupId(o.group);
  if (gid === undefined) {
    throw new InvalidArgumentError(`--cache-dir-group ${o.group}: no such group`, { hint: 'Give a group name from /etc/group or a numeric group id' });
  }
  const root = proc.root ?? euid() === 0;
  if (!root && !(proc.groups ?? processGroups()).includes(gid)) {
    throw new InvalidArgumentError(`--cache-dir-group ${o.group}: this process is not in that group, so it cannot give the tier's files to it`, {
      hint: `Add the user running sluice to group ${o.group} (usermod -aG ${o.group} USER), or run sluice with it as a supplementary group`,
    });
  }
  const fileMode = mode & 0o660;
  return { dirMode: mode | SETGID, fileMode, gid, group: o.group, fixFileMode: (fileMode & umask) !== 0, fixDirMode: true };
}

function processGroups(): number[] {
  const out: number[] = [];
  if (typeof process.getegid === 'function') out.push(process.getegid());
  if (typeof process.getgroups === 'function') out.push(...process.getgroups());
  return out;
}

function euid(): number {
  return typeof process.geteuid === 'function' ? process.geteuid() : 0;
}

/**
 * Refuses (InvalidArgumentError, one line naming the fix) a folder of the tier that another
 * user could read through or plant bytes in: `what` is how the message names it.
 * Checked: --cache-dir itself and the tier's folder in it.
 */
export function checkTierFolder(dir: string, access: TierAccess, what = `--cache-dir ${dir}`, st: Stats = statSync(dir), me = euid()): void {
  if (!st.isDirectory()) throw new InvalidArgumentError(`${what} is not a folder`, { hint: 'Point --cache-dir at a folder (it is created when missing)' });
  const shared = access.gid !== undefined && st.gid === access.gid;
  const share = `--cache-dir-group GROUP --cache-dir-mode ${octal(SHARED_DIR_MODE)}`;
  if (st.uid !== me && st.uid !== 0 && !shared) {
    throw new InvalidArgumentError(`${what} belongs to uid ${st.uid}, not to this process's user (uid ${me}): that user could read the cached data and plant bytes in it`, {
      hint: `Use a folder this user owns (chown ${me} ${dir}), or share a folder deliberately with ${share}`,
    });
  }
  if ((st.mode & 0o002) !== 0) {
    throw new InvalidArgumentError(`${what} is writable by every user (mode ${octal(st.mode)}): any of them could plant bytes in the tier`, {
      hint: `chmod o-w ${dir}, or give --cache-dir a folder of its own (e.g. ${dir.replace(/\/+$/, '')}/sluice-cache, created 0700)`,
    });
  }
  if ((st.mode & 0o020) !== 0 && !shared) {
    throw new InvalidArgumentError(`${what} is writable by its group (gid ${st.gid}, mode ${octal(st.mode)}) but the tier is not shared: that group could plant bytes in it`, {
      hint: access.gid === undefined ? `chmod g-w ${dir}, or share it deliberately with --cache-dir-group ${st.gid} --cache-dir-mode ${octal(SHARED_DIR_MODE)}` : `chmod g-w ${dir}, or chgrp ${access.group ?? access.gid} ${dir}`,
    });
  }
}

/**
 * Makes folder `p` of the tier with the access's mode and group, or, when it exists and this
 * user owns it, sets them back (a tier of an earlier version, 0755). Returns whether it made it.
 */
export function makeTierFolder(p: string, access: TierAccess): boolean {
  let made = true;
  try {
    mkdirSync(p, { mode: access.dirMode & 0o777 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    made = false;
  }
  const st = statSync(p);
  if (made || st.uid === euid()) {
    if (access.gid !== undefined && st.gid !== access.gid) chownSync(p, -1, access.gid);
    // chown clears setgid on some systems: the mode goes last.
    if ((st.mode & 0o7777) !== access.dirMode || access.gid !== undefined) chmodSync(p, access.dirMode);
  }
  return made;
}

/**
 * Opens (creating) `file` with the access's file mode, as openSync with flags `flags`: a
 * mode the umask cuts is set again with fchmod (TierAccess.fixFileMode).
 */
export function openTierFileSync(file: string, flags: string | number, access: TierAccess): number {
  const fd = openSync(file, flags, access.fileMode);
  if (access.fixFileMode) {
    try {
      fchmodSync(fd, access.fileMode);
    } catch (err) {
      closeSync(fd);
      throw err;
    }
  }
  return fd;
}
