/**
 * TLS for tests: a certificate authority made for the run with the openssl CLI (node:crypto
 * cannot issue certificates), a server certificate it signs for 127.0.0.1, and a TLS
 * terminator that forwards each connection to a plain-HTTP port (s3rver, a test server).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';

export interface TestCa {
  /** The CA certificate, PEM: what a client must trust. */
  caPem: string;
  /** Server certificate (for 127.0.0.1) and key, PEM. */
  certPem: string;
  keyPem: string;
}

export function makeTestCa(): TestCa {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-ca-'));
  try {
    const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
    run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=sluice test CA');
    run('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1');
    writeFileSync(path.join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
    run('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '1', '-extfile', 'ext.cnf');
    const read = (f: string) => readFileSync(path.join(dir, f), 'utf8');
    return { caPem: read('ca.pem'), certPem: read('server.pem'), keyPem: read('server.key') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface TlsFront {
  /** https://127.0.0.1:<port> */
  endpoint: string;
  /** TLS connections accepted so far. */
  readonly connections: number;
  close(): Promise<void>;
}

/** Terminates TLS on an ephemeral loopback port and forwards each connection to 127.0.0.1:`port`. */
export async function tlsFront(ca: TestCa, port: number): Promise<TlsFront> {
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const server = tls.createServer({ key: ca.keyPem, cert: ca.certPem }, (c) => {
    connections++;
    const u = net.connect(port, '127.0.0.1');
    sockets.add(c).add(u);
    c.pipe(u).pipe(c);
    c.on('error', () => u.destroy());
    u.on('error', () => c.destroy());
    c.on('close', () => { sockets.delete(c); u.destroy(); });
    u.on('close', () => { sockets.delete(u); c.destroy(); });
  });
  server.on('tlsClientError', () => {});
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    endpoint: `https://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    get connections() { return connections; },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
