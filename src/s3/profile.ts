/**
 * A named shared profile (--profile, AWS_PROFILE) checked before any request: the SDK's
 * credential chain answers a profile that is nowhere with "could not load credentials", and
 * sluice's error then suggested setting AWS_PROFILE, which the user had done. Here the two
 * files the SDK reads are searched the way it does: `[profile NAME]` (or `[NAME]`) in the
 * config file, `[NAME]` in the credentials file; a profile in neither is a ConfigError that
 * names both files.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from '../errors.js';

/** The shared config and credentials files, as the SDK locates them. */
export function sharedFiles(env: NodeJS.ProcessEnv = process.env): { config: string; credentials: string } {
  const home = env.HOME || os.homedir();
  return {
    config: env.AWS_CONFIG_FILE || path.join(home, '.aws', 'config'),
    credentials: env.AWS_SHARED_CREDENTIALS_FILE || path.join(home, '.aws', 'credentials'),
  };
}

/** The section names of an INI file ('' when it cannot be read). */
function sections(file: string): string[] {
  let text = '';
  try { text = readFileSync(file, 'utf8'); } catch { return []; }
  return [...text.matchAll(/^\s*\[\s*([^\]]+?)\s*\]/gm)].map((m) => m[1]!.replace(/\s+/g, ' '));
}

/** Throws a ConfigError when `profile` is in neither shared file. */
export function checkProfile(profile: string, env: NodeJS.ProcessEnv = process.env): void {
  const f = sharedFiles(env);
  const inConfig = sections(f.config).some((s) => s === `profile ${profile}` || s === profile);
  const inCredentials = sections(f.credentials).includes(profile);
  if (inConfig || inCredentials) return;
  const all = [...new Set([...sections(f.config).map((s) => s.replace(/^profile /, '')), ...sections(f.credentials)])].filter((s) => !s.startsWith('sso-session') && !s.startsWith('services '));
  throw new ConfigError(`the AWS profile ${JSON.stringify(profile)} (from ${env.AWS_PROFILE === profile ? 'AWS_PROFILE' : '--profile'}) does not exist in ${f.config} or ${f.credentials}`, {
    hint: all.length > 0 ? `Profiles there: ${all.slice(0, 10).join(', ')}` : 'Create it with aws configure --profile NAME, or unset AWS_PROFILE',
  });
}
