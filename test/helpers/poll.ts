/** Polling for a condition that becomes true asynchronously (a release reaching the core after close(), a background write). */

/** Polls `cond` every 20 ms for at most `ms`; whether it held (asked once more at the end). */
export async function until(cond: () => boolean | Promise<boolean>, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return cond();
}
