/**
 * The metrics endpoint: a small node:http server over the one registry of
 * metrics.ts.
 *
 *   GET /metrics  Prometheus text exposition of every sluice metric.
 *   GET /healthz  200 while the process is alive (the event loop answers).
 *   GET /readyz   200 when every registered readiness name is ready and at least one is
 *                 registered; otherwise 503 with the names still waiting, one per line.
 *
 * Readiness names are whatever the caller registers with setReady(): one per channel
 * ("channel train mounted", "pipe train fifo"), so a Kubernetes readiness probe on
 * /readyz gates the training container until all input is there.
 *
 * It binds 127.0.0.1 unless told otherwise: an endpoint is exposed beyond the host
 * only on purpose (--metrics-host 0.0.0.0, for a Prometheus scraping the pod).
 * Port 0 picks a free port (tests); the chosen one is in `port` and `url`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { InvalidArgumentError } from '../errors.js';
import { registry } from './metrics.js';

export interface MetricsServerOptions {
  /** Address to bind. Default 127.0.0.1. */
  host?: string;
  /** TCP port; 0 picks a free one. */
  port: number;
  /**
   * When `port` is in use, try the next ports up to port + fallbackPorts (the default port,
   * not one the user chose: several sluice processes on one node). Default 0: fail at once.
   */
  fallbackPorts?: number;
}

/**
 * Ports tried after the default one when it is taken: 16 sluice processes per node (a mount
 * per channel of a few jobs) fit, and `sluice status` probes no more than these.
 */
export const METRICS_PORT_FALLBACKS = 16;

export interface MetricsServer {
  /** The port actually bound (useful with port 0). */
  port: number;
  /** Base URL, without a path, e.g. http://127.0.0.1:9400 (append /metrics, /readyz, /healthz). */
  url: string;
  /** Register `name` (first call) and set whether it is ready. */
  setReady(name: string, ready: boolean): void;
  /** Stop listening and drop open connections. */
  close(): Promise<void>;
}

/** Default bind address: loopback, so metrics are not exposed off the host by accident. */
export const DEFAULT_METRICS_HOST = '127.0.0.1';

/**
 * Idle keep-alive connections are dropped after this long. Prometheus scrapes every
 * 15-60 s and reconnects cheaply; a short timeout keeps close() quick.
 */
const KEEP_ALIVE_MS = 5_000;

function hostForUrl(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

class PortInUse extends Error {}

/** Binds `server` to one port; a taken port rejects with PortInUse, other failures with their one-line errors. */
function listen(server: http.Server, port: number, host: string, asked: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      server.off('listening', onListening);
      if (err.code === 'EADDRINUSE') {
        reject(new PortInUse());
      } else if (err.code === 'EADDRNOTAVAIL' || err.code === 'ENOTFOUND') {
        reject(new InvalidArgumentError(`cannot bind the metrics endpoint to ${host}: it is not an address of this host`, { hint: 'Pass --metrics-host 127.0.0.1 or 0.0.0.0' }));
      } else if (err.code === 'EACCES') {
        reject(new InvalidArgumentError(`not allowed to bind the metrics endpoint to port ${asked}`, { hint: 'Use a port above 1023' }));
      } else {
        reject(err);
      }
    };
    const onListening = () => { server.off('error', onError); resolve(); };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}

export async function startMetricsServer(opts: MetricsServerOptions): Promise<MetricsServer> {
  const host = opts.host ?? DEFAULT_METRICS_HOST;
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) {
    throw new InvalidArgumentError(`metrics port ${opts.port} is not a TCP port`, { hint: 'Use --metrics-port between 0 and 65535 (0 picks a free port, -1 disables)' });
  }
  // INVARIANT: a name, once registered, stays registered; readiness can go back to false.
  const readiness = new Map<string, boolean>();

  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('method not allowed\n');
      return;
    }
    if (path === '/metrics') {
      registry.metrics().then(
        (text) => { res.writeHead(200, { 'content-type': registry.contentType }).end(text); },
        (err: unknown) => { res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics collection failed: ${String(err)}\n`); },
      );
    } else if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (path === '/readyz') {
      const waiting = [...readiness].filter(([, ready]) => !ready).map(([name]) => name);
      if (readiness.size > 0 && waiting.length === 0) {
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ready\n');
      } else {
        const body = readiness.size === 0 ? 'not ready: nothing registered yet\n' : `not ready:\n${waiting.join('\n')}\n`;
        res.writeHead(503, { 'content-type': 'text/plain' }).end(body);
      }
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /metrics, /healthz or /readyz\n');
    }
  });
  server.keepAliveTimeout = KEEP_ALIVE_MS;

  const last = opts.port === 0 ? 0 : Math.min(65535, opts.port + (opts.fallbackPorts ?? 0));
  for (let port = opts.port; ; port++) {
    try {
      await listen(server, port, host, opts.port);
      break;
    } catch (err) {
      if (!(err instanceof PortInUse) || port >= last) {
        if (err instanceof PortInUse) {
          throw new InvalidArgumentError(last > opts.port ? `metrics ports ${opts.port}-${last} on ${host} are all in use` : `metrics port ${opts.port} on ${host} is already in use`, { hint: 'Pass another --metrics-port, 0 for a free one, or -1 to disable metrics' });
        }
        throw err;
      }
    }
  }

  const port = (server.address() as AddressInfo).port;
  let closed: Promise<void> | undefined;
  return {
    port,
    url: `http://${hostForUrl(host)}:${port}`,
    setReady(name: string, ready: boolean) {
      readiness.set(name, ready);
    },
    close() {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closed;
    },
  };
}
