/** Types of pattern-bytes.mjs (plain JavaScript, so child processes can import it untranspiled). */
export function patternBytes(size: number, seed: number): Buffer;
