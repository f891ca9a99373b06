/**
 * A child process that must exit but may be stuck in the kernel on a FUSE request nobody
 * answers (uninterruptible, so SIGKILL does not free it): waits for its exit, bounded, and
 * when it does not come, returns where the child and this process's threads wait (kernel
 * stacks and wait channels) and aborts the mount's FUSE connection (fusectl), so the child
 * exits and the test can go on and report it.
 */
import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';

/** A /proc file's text, or the reason it could not be read (never throws: diagnostics must not fail). */
const read = (f: string): string => {
  try {
    return readFileSync(f, 'utf8').trim();
  } catch (err) {
    return `(${(err as Error).message})`;
  }
};

/** One line per thread of this process: its id, name and kernel wait channel. */
export function ourThreads(): string[] {
  return readdirSync('/proc/self/task').map((tid) => `thread ${tid} ${read(`/proc/self/task/${tid}/comm`)}: ${read(`/proc/self/task/${tid}/wchan`)}`);
}

/** undefined when `exited` settles within `ms`; else a diagnostic (the connection of the mount whose st_dev is `dev` is then aborted). */
export async function exitedWithin(child: ChildProcess, exited: Promise<unknown>, ms: number, dev: number): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = await Promise.race([exited.then(() => false), new Promise<boolean>((r) => { timer = setTimeout(() => r(true), ms); })]);
  clearTimeout(timer);
  if (!late) return undefined;
  const lines = [`child ${child.pid} did not exit within ${ms / 1000} s`];
  if (child.pid !== undefined) {
    lines.push(`child state: ${read(`/proc/${child.pid}/stat`).split(') ')[1]?.split(' ')[0]}, wchan ${read(`/proc/${child.pid}/wchan`)}`);
    lines.push(`child stack: ${read(`/proc/${child.pid}/stack`).replace(/\n/g, ' | ')}`);
    // A killed process whose leader shows Z may still have a thread in the kernel (closing its files): each one's state and stack.
    let tids: string[] = [];
    try { tids = readdirSync(`/proc/${child.pid}/task`); } catch { /* reaped meanwhile */ }
    for (const tid of tids) {
      const task = `/proc/${child.pid}/task/${tid}`;
      lines.push(`child thread ${tid}: ${read(`${task}/stat`).split(') ')[1]?.split(' ')[0]}, wchan ${read(`${task}/wchan`)}, stack ${read(`${task}/stack`).replace(/\n/g, ' | ')}`);
    }
    lines.push(`our SIGCHLD: ${read('/proc/self/status').split('\n').filter((l) => /^Sig(Blk|Ign|Cgt):/.test(l)).join(' ')}`);
  }
  lines.push(...ourThreads().map((l) => `our ${l}`));
  // fusectl names a connection by the minor number of the mount's device.
  const minor = (dev & 0xff) | ((dev >> 12) & 0xfff00);
  const ctl = '/sys/fs/fuse/connections';
  try {
    if (!existsSync(`${ctl}/${minor}`)) execFileSync('mount', ['-t', 'fusectl', 'none', ctl], { stdio: 'ignore' });
    lines.push(`connection ${minor}: waiting ${read(`${ctl}/${minor}/waiting`)}`);
    writeFileSync(`${ctl}/${minor}/abort`, '1');
    lines.push('connection aborted');
  } catch (err) {
    lines.push(`could not abort connection ${minor}: ${(err as Error).message}`);
  }
  await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
  return lines.join('\n');
}
