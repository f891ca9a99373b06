/**
 * A certificate authority made for one run (a benchmark run or a test), and a server
 * certificate it signs for 127.0.0.1 and localhost: what the latency proxy presents when
 * it terminates TLS, and what each client is told to trust through its own option
 * (--ca-bundle / AWS_CA_BUNDLE for sluice and the aws CLI, NODE_EXTRA_CA_CERTS for the
 * limit client, s3fs's `-o ssl_ca_file`... see ./peers.ts).
 *
 * Made with the `openssl` command (present wherever OpenSSL is; Debian's `openssl`
 * package), rather than a JavaScript certificate library: one child process per file,
 * no dependency. Keys are ECDSA P-256, as quick to make as to use; the bulk of a
 * transfer is AES-GCM either way, whatever the certificate's key type. Valid 2 days:
 * long enough for any run, short enough that a leaked file is soon worthless.
 */
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

export interface RunCa {
  /** PEM file of the CA certificate: what clients trust. */
  caFile: string;
  /** The server's private key and certificate (PEM text), for tls.createServer. */
  key: string;
  cert: string;
}

/** Days a run's certificates are valid. */
const VALID_DAYS = 2;

function openssl(args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('openssl', args, { cwd, timeout: 30_000 }, (err, _out, stderr) => {
      if (!err) { resolve(); return; }
      const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
      reject(new Error(missing ? 'the openssl command is not installed (Debian: apt-get install openssl); it makes the run\'s TLS certificates'
        : `openssl ${args[0]} failed: ${stderr.trim().split('\n')[0] ?? err.message}`));
    });
  });
}

/** True when the `openssl` command runs. */
export function hasOpenssl(): Promise<boolean> {
  return new Promise((resolve) => execFile('openssl', ['version'], { timeout: 10_000 }, (err) => resolve(!err)));
}

/** Makes a CA and a server certificate for 127.0.0.1/localhost in `dir` (which must exist). */
export async function createRunCa(dir: string): Promise<RunCa> {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await openssl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', String(VALID_DAYS), '-subj', '/CN=sluice run CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir);
  await openssl(['req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1'], dir);
  await writeFile(path.join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  await openssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem',
    '-days', String(VALID_DAYS), '-extfile', 'server.ext'], dir);
  return {
    caFile: path.join(dir, 'ca.pem'),
    key: await readFile(path.join(dir, 'server.key'), 'utf8'),
    cert: await readFile(path.join(dir, 'server.pem'), 'utf8'),
  };
}
