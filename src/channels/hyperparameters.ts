/**
 * Hyperparameters: <root>/input/config/hyperparameters.json, as SageMaker writes it.
 *
 * SageMaker passes CreateTrainingJob's HyperParameters, a map of string to string, to the
 * container as that JSON object, always (an empty job gets {}); sagemaker-training-toolkit
 * reads the file unconditionally. Sources, later ones overriding earlier ones key by key:
 *  1. the HyperParameters of a whole CreateTrainingJob request given as --input-data-config;
 *  2. --hyperparameters: a JSON object inline (text starting with "{") or a file holding one.
 * Values must be strings on SageMaker; a non-string value given here is written as the
 * SageMaker Python SDK writes it, json.dumps(value) (10 -> "10", true -> "true",
 * "[1, 2]"), so the toolkit's json.loads reads back the same value. SageMaker's limits
 * (100 entries, keys up to 256 characters, values up to 2500) are warned about, not
 * enforced: a local run may want more.
 *
 * deserialize() is the toolkit's read_hyperparameters(): json.loads of each value, the raw
 * string when that fails.
 */
import { readFile } from 'node:fs/promises';
import { ConfigError } from '../errors.js';
import { dumps, parse, PyJsonError, type PyValue } from './pyjson.js';

export type HyperParameters = Record<string, string>;

/** SageMaker's HyperParameters limits (CreateTrainingJob API reference). */
const MAX_ENTRIES = 100;
const MAX_KEY = 256;
const MAX_VALUE = 2500;

/** HyperParameters (a JSON object) as SageMaker's strings; `what` names the source in errors. */
export function hyperParametersFrom(json: PyValue, what: string, warnings: string[]): HyperParameters {
  if (!(json instanceof Map)) throw new ConfigError(`${what} must be a JSON object of hyperparameters`, { hint: 'E.g. {"epochs": "10", "learning-rate": "0.01"}' });
  const out: HyperParameters = {};
  for (const [k, v] of json) {
    if (k === '') throw new ConfigError(`${what}: a hyperparameter name is empty`, { hint: 'Name every hyperparameter' });
    out[k] = typeof v === 'string' ? v : dumps(v);
    if (k.length > MAX_KEY || out[k]!.length > MAX_VALUE) warnings.push(`${what}: hyperparameter ${JSON.stringify(k.slice(0, 40))} is longer than SageMaker allows (keys ${MAX_KEY}, values ${MAX_VALUE} characters)`);
  }
  if (json.size > MAX_ENTRIES) warnings.push(`${what}: ${json.size} hyperparameters; SageMaker allows at most ${MAX_ENTRIES}`);
  return out;
}

/** --hyperparameters: inline JSON, or the path of a JSON file. */
export async function readHyperParametersFlag(arg: string, warnings: string[]): Promise<HyperParameters> {
  const inline = arg.trimStart().startsWith('{');
  let text = arg;
  if (!inline) {
    try {
      text = await readFile(arg, 'utf8');
    } catch (err) {
      throw new ConfigError(`cannot read --hyperparameters ${arg} (${(err as NodeJS.ErrnoException).code ?? String(err)})`, { hint: 'Pass a JSON object, e.g. --hyperparameters \'{"epochs": "10"}\', or the path of a file holding one' });
    }
  }
  const what = inline ? '--hyperparameters' : `--hyperparameters ${arg}`;
  let json: PyValue;
  try {
    json = parse(text);
  } catch (err) {
    const msg = err instanceof PyJsonError ? err.message : String(err);
    throw new ConfigError(`${what} is not valid JSON (${msg})`, { hint: 'Write a JSON object, e.g. {"epochs": "10", "learning-rate": "0.01"}' });
  }
  return hyperParametersFrom(json, what, warnings);
}

/** The toolkit's read_hyperparameters(): each value json.loads-ed when it parses, else the string. */
export function deserialize(hps: ReadonlyMap<string, PyValue>): Map<string, PyValue> {
  const out = new Map<string, PyValue>();
  for (const [k, v] of hps) {
    if (typeof v !== 'string') { out.set(k, v); continue; }
    try {
      out.set(k, parse(v));
    } catch {
      out.set(k, v);
    }
  }
  return out;
}
