/**
 * A forward HTTP proxy of our own on 127.0.0.1, for tests of HTTP(S)_PROXY: it forwards
 * absolute-form requests (`GET http://host:port/path`) and CONNECT tunnels, and records
 * each one. An origin-form request (what a client that ignores the proxy protocol would
 * send) is refused with 400, so a test sees that requests were really proxied. With
 * `auth` set, every request must carry that Proxy-Authorization, else 407.
 */
import http from 'node:http';
import net from 'node:net';

export interface ProxiedRequest { method: string; url: string; range?: string | undefined }

export interface ForwardProxy {
  /** http://127.0.0.1:<port> */
  url: string;
  /** Absolute-form requests forwarded, in order. */
  readonly requests: ProxiedRequest[];
  /** CONNECT targets (host:port), in order. */
  readonly connects: string[];
  close(): Promise<void>;
}

export async function startForwardProxy(opts: { auth?: string } = {}): Promise<ForwardProxy> {
  const requests: ProxiedRequest[] = [];
  const connects: string[] = [];
  const sockets = new Set<net.Socket>();
  const authorized = (h: http.IncomingHttpHeaders) => opts.auth === undefined || h['proxy-authorization'] === opts.auth;
  const server = http.createServer((req, res) => {
    if (!authorized(req.headers)) { res.writeHead(407, { 'proxy-authenticate': 'Basic realm="test"' }).end(); return; }
    if (!/^http:\/\//.test(req.url ?? '')) { res.writeHead(400).end('absolute-form only'); return; }
    const target = new URL(req.url!);
    requests.push({ method: req.method ?? '', url: req.url!, range: req.headers.range });
    const headers = { ...req.headers };
    delete headers['proxy-authorization'];
    delete headers['proxy-connection'];
    const up = http.request({ host: target.hostname, port: target.port || 80, method: req.method, path: target.pathname + target.search, headers }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      ur.pipe(res);
    });
    up.on('error', () => { if (!res.headersSent) res.writeHead(502).end(); else res.destroy(); });
    req.pipe(up);
  });
  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => {});
    if (!authorized(req.headers)) { client.end('HTTP/1.1 407 Proxy Authentication Required\r\n\r\n'); return; }
    connects.push(req.url ?? '');
    const [host, port] = [(req.url ?? '').replace(/:\d+$/, '').replace(/^\[|\]$/g, ''), Number(/:(\d+)$/.exec(req.url ?? '')?.[1] ?? 443)];
    const up = net.connect(port, host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) up.write(head);
      up.pipe(client).pipe(up);
    });
    sockets.add(up);
    up.on('close', () => { sockets.delete(up); client.destroy(); });
    up.on('error', () => client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n'));
    client.on('close', () => up.destroy());
  });
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    requests, connects,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
