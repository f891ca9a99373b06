/** `sluice bench`: not built yet (see the open issues). */
import { InvalidArgumentError } from '../errors.js';

export const summary = '';

export async function run(_argv: string[]): Promise<number> {
  throw new InvalidArgumentError('sluice bench is not available in this build yet');
}
