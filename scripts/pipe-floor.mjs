#!/usr/bin/env node
/**
 * The floor of Pipe mode's daemon CPU per GB on this machine: the least CPU a receiver can
 * spend to move a TCP (or TLS) stream from loopback into a FIFO that a real reader drains.
 * Pipe mode (src/pipe/) does this plus HTTP, parallel ranged GETs and ordering, so its
 * figure can be read against these (BENCHMARKS.md "t11-floor").
 *
 * Receivers (each its own process; CPU = its utime+stime over the transfer, per GB):
 *   c-copy     C: read(2) into one reused 8 MiB buffer, blocking write(2) into the FIFO
 *              (scripts/pipe-floor.c, built here with cc). Two kernel copies, as any design
 *              that holds bytes in user memory pays.
 *   c-splice   C: splice(2) socket -> FIFO, no copy through user memory (plain TCP only).
 *   node       Node: net.Socket with `onread` into one reused 8 MiB buffer (as src/s3/wire.ts
 *              lands bodies), each read written to the FIFO with fs.writeSync.
 *   node-tls   the same over TLS (tls.connect honours `onread`; records are decrypted into
 *              the buffer): what decryption adds in Node's TLS stack.
 *   c-tls      C against the system's OpenSSL (scripts/pipe-floor-tls.c, built here with cc
 *              -lssl -lcrypto): SSL_read with read_ahead into one 8 MiB buffer, written to the
 *              FIFO a MiB at a time. The floor of any user-space TLS receiver, Node or not.
 *              Needs OpenSSL's headers (Debian: apt-get install -y libssl-dev).
 * The sender is this process: a plain or TLS server that writes the bytes from one buffer
 * (its CPU is not counted; s3rver, in the real runs, costs far more per byte).
 * Readers: `cat FIFO > /dev/null` (fast, frees the pipe's pages in large runs) and `sha256sum
 * FIFO` (about as fast as a training script that touches every byte; each of its reads wakes
 * the writer of a full pipe). The sha256sum reader's digest is checked against the bytes
 * sent, so every such figure is of bytes that arrived whole and in order.
 * Also printed: `openssl speed` for AES-256-GCM on 16 KiB records, the cipher's own cost per
 * GB on this CPU, which every HTTPS design pays on top of its copies.
 *
 * Usage: node scripts/pipe-floor.mjs [--size MiB] [--rounds N] [--receivers c-copy,c-splice,node,node-tls,c-tls]
 *        [--readers cat,sha256sum]
 * Rounds interleave every receiver and reader, so they see the same load; figures are medians.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
/** 8 MiB: sluice's part size, the most one read may land (as a part's slab would take). */
const BUF_BYTES = 8 * 1024 * 1024;
/** 1 MiB: the FIFO buffer sluice asks for (src/pipe/fifo-writer.ts PIPE_BUFFER_BYTES). */
const PIPE_BYTES = 1024 * 1024;

// ---- child: a Node receiver --------------------------------------------------------------
if (process.argv[2] === '--child') {
  const [, , , kind, port, bytesStr, fifo, caFile] = process.argv;
  const total = Number(bytesStr);
  const out = openSync(fifo, 'w');
  try {
    const { fifoOps } = await import(path.join(here, '..', 'dist', 'pipe', 'native.js'));
    fifoOps().setPipeSize(out, PIPE_BYTES);
  } catch { /* no addon: the kernel's default pipe size; said in the output */ }
  const buf = Buffer.alloc(BUF_BYTES);
  let got = 0, t0 = 0n, c0;
  const onread = {
    buffer: buf,
    callback(n, b) {
      if (got === 0) { t0 = process.hrtime.bigint(); c0 = process.cpuUsage(); }
      for (let w = 0; w < n;) w += writeSync(out, b, w, n - w);
      got += n;
      if (got >= total) {
        const cpu = process.cpuUsage(c0), seconds = Number(process.hrtime.bigint() - t0) / 1e9;
        closeSync(out);
        process.stdout.write(JSON.stringify({ bytes: got, seconds, user: cpu.user / 1e6, sys: cpu.system / 1e6, cipher: sock.getCipher?.()?.standardName }) + '\n');
        process.exit(0);
      }
      return true;
    },
  };
  const opts = { host: '127.0.0.1', port: Number(port), onread };
  const sock = kind === 'node-tls'
    ? tls.connect({ ...opts, ca: readFileSync(caFile), servername: 'localhost' })
    : net.connect(opts);
  sock.on('error', (e) => { console.error(`receiver: ${e.message}`); process.exit(1); });
  sock.on('end', () => { if (got < total) { console.error(`receiver: stream ended after ${got} of ${total} bytes`); process.exit(1); } });
} else {
  await main();
}

async function main() {
  const args = process.argv.slice(2);
  let sizeMiB = 1024, rounds = 3;
  let receivers = ['c-copy', 'c-splice', 'node', 'node-tls', 'c-tls'], readers = ['cat', 'sha256sum'];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--size') sizeMiB = Number(args[++i]);
    else if (args[i] === '--rounds') rounds = Number(args[++i]);
    else if (args[i] === '--receivers') receivers = args[++i].split(',');
    else if (args[i] === '--readers') readers = args[++i].split(',');
    else { console.error('usage: pipe-floor.mjs [--size MiB] [--rounds N] [--receivers c-copy,c-splice,node,node-tls,c-tls] [--readers cat,sha256sum]'); process.exit(2); }
  }
  const total = sizeMiB * 1024 * 1024;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pipe-floor-'));
  try {
    const cBin = path.join(dir, 'pipe-floor');
    const cTlsBin = path.join(dir, 'pipe-floor-tls');
    if (receivers.some((r) => r === 'c-copy' || r === 'c-splice')) execFileSync('cc', ['-O2', '-o', cBin, path.join(here, 'pipe-floor.c')], { stdio: 'inherit' });
    if (receivers.includes('c-tls')) execFileSync('cc', ['-O2', '-o', cTlsBin, path.join(here, 'pipe-floor-tls.c'), '-lssl', '-lcrypto'], { stdio: 'inherit' });
    const { createRunCa } = await import(path.join(here, '..', 'dist', 'bench', 'tls-ca.js'));
    const ca = receivers.some((r) => r.endsWith('-tls')) ? await createRunCa(dir) : undefined;

    // The stream: one 1 MiB block of pseudo-random bytes repeated (its digest is known).
    const block = createHash('sha512').update('pipe-floor').digest();
    const chunk = Buffer.alloc(1024 * 1024);
    for (let i = 0; i < chunk.length; i += block.length) block.copy(chunk, i);
    const want = (() => { const h = createHash('sha256'); for (let i = 0; i < total; i += chunk.length) h.update(chunk.subarray(0, Math.min(chunk.length, total - i))); return h.digest('hex'); })();
    const serve = (sock) => {
      let sent = 0;
      const more = () => {
        while (sent < total) {
          const n = Math.min(chunk.length, total - sent);
          sent += n;
          if (!sock.write(n === chunk.length ? chunk : chunk.subarray(0, n))) { sock.once('drain', more); return; }
        }
        sock.end();
      };
      sock.on('error', () => {});
      more();
    };
    const plain = net.createServer(serve);
    const secure = ca ? tls.createServer({ key: ca.key, cert: ca.cert }, serve) : undefined;
    const listen = (srv) => new Promise((r) => srv.listen(0, '127.0.0.1', () => r(srv.address().port)));
    const plainPort = await listen(plain);
    const tlsPort = secure ? await listen(secure) : 0;

    const results = {};
    const ciphers = new Set();
    for (let round = 1; round <= rounds; round++) {
      for (const reader of readers) {
        for (const recv of receivers) {
          const fifo = path.join(dir, 'fifo');
          rmSync(fifo, { force: true });
          execFileSync('mkfifo', [fifo]);
          const rd = spawn('sh', ['-c', reader === 'cat' ? 'cat "$0" > /dev/null' : 'sha256sum "$0"', fifo], { stdio: ['ignore', 'pipe', 'inherit'] });
          let digest = '';
          rd.stdout.on('data', (d) => { digest += d; });
          const readerDone = new Promise((r) => rd.on('close', r));
          const argv = recv === 'c-tls'
            ? [cTlsBin, [String(tlsPort), String(total), fifo, ca.caFile]]
            : recv.startsWith('c-')
            ? [cBin, [recv.slice(2), String(plainPort), String(total), fifo]]
            : [process.execPath, [fileURLToPath(import.meta.url), '--child', recv, String(recv === 'node-tls' ? tlsPort : plainPort), String(total), fifo, ca?.caFile ?? '']];
          const child = spawn(argv[0], argv[1], { stdio: ['ignore', 'pipe', 'inherit'] });
          let out = '';
          child.stdout.on('data', (d) => { out += d; });
          const code = await new Promise((r) => child.on('close', r));
          await readerDone;
          if (code !== 0) throw new Error(`${recv} exited with ${code}`);
          const m = JSON.parse(out.trim());
          if (m.bytes !== total) throw new Error(`${recv}: ${m.bytes} of ${total} bytes`);
          if (reader === 'sha256sum' && digest.split(' ')[0] !== want) throw new Error(`${recv}: sha256 of what the reader got does not match what was sent`);
          const gb = m.bytes / 1e9;
          (results[`${recv} ${reader}`] ??= []).push({ cpu: (m.user + m.sys) / gb, user: m.user / gb, mbs: m.bytes / 1e6 / m.seconds });
          if (m.cipher) ciphers.add(`${recv}: ${m.cipher}`);
        }
      }
      console.error(`round ${round}/${rounds} done`);
    }
    plain.close();
    secure?.close();

    const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
    console.log(`${sizeMiB} MiB per transfer, ${rounds} rounds, medians (loadavg ${os.loadavg().map((x) => x.toFixed(2)).join(' ')})`);
    console.log('| receiver | reader | CPU s/GB | of it user | MB/s | runs (CPU s/GB) |');
    console.log('|---|---|---|---|---|---|');
    for (const [k, rs] of Object.entries(results)) {
      const [recv, reader] = k.split(' ');
      console.log(`| ${recv} | ${reader}${reader === 'sha256sum' ? ' (verified)' : ''} | ${median(rs.map((r) => r.cpu)).toFixed(2)} | ${median(rs.map((r) => r.user)).toFixed(2)} | ${median(rs.map((r) => r.mbs)).toFixed(0)} | ${rs.map((r) => r.cpu.toFixed(2)).join(' ')} |`);
    }
    if (ciphers.size) console.log(`negotiated: ${[...ciphers].join('; ')}`);
    const speed = spawnSync('openssl', ['speed', '-evp', 'aes-256-gcm', '-seconds', '2', '-bytes', '16384'], { encoding: 'utf8' });
    const line = speed.stdout?.split('\n').find((l) => /^AES-256-GCM/i.test(l));
    const kbs = line ? Number(line.trim().split(/\s+/).pop().replace(/k$/, '')) : NaN;
    if (Number.isFinite(kbs)) console.log(`AES-256-GCM alone (openssl speed, 16 KiB records): ${(kbs / 1e6).toFixed(2)} GB/s = ${(1 / (kbs / 1e6)).toFixed(2)} CPU s/GB`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
