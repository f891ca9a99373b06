/**
 * Egress proxies from the environment, as curl and the AWS CLI read them, for every request
 * sluice makes to S3: the SDK's (listing, HEAD, STS for web identity) and the data path's own
 * sockets (./wire.ts) and undici streams.
 *
 *  - Which proxy: for an http:// target `http_proxy`, else `HTTP_PROXY`; for https://
 *    `https_proxy`, else `HTTPS_PROXY`; then `all_proxy` / `ALL_PROXY`. Lower case first, as
 *    curl and Python (the AWS CLI) do; unlike curl, upper-case `HTTP_PROXY` is honoured, as
 *    the AWS CLI honours it. An empty value is unset. A proxy is `http://[user:pass@]host[:port]`
 *    (no scheme means http://, no port means 80, as the AWS CLI has it; curl would say 1080).
 *  - `no_proxy` / `NO_PROXY` (curl's rules, and Go's for ports): entries split on commas or
 *    spaces, case-insensitive; `*` alone matches every host; a host name matches itself and
 *    every name under it (`example.com` and `.example.com` both match `s3.example.com`; a
 *    leading `*.` is read as `.`); an IP address matches itself, a CIDR block (`10.0.0.0/8`,
 *    `fd00::/8`) the literal addresses in it (names are not resolved); `host:port` or
 *    `[v6]:port` matches that port only.
 *  - Loopback is NOT exempt: curl and the AWS CLI send `localhost` through a proxy unless
 *    NO_PROXY names it, and so do we (docs/CONFIGURATION.md).
 *  - How: an http:// target is asked in absolute form (`GET http://host:port/path`) of the
 *    proxy; an https:// target through a CONNECT tunnel (connectTunnel), TLS end to end, so
 *    the proxy sees neither bytes nor signatures. `Proxy-Authorization: Basic` from the
 *    proxy URL's user and password.
 *  - Not proxied: the SDK's credential endpoints on link-local or loopback addresses (EC2
 *    instance metadata 169.254.169.254, ECS/EKS pod identity 169.254.170.2/23, fd00:ec2::/32)
 *    use their own clients, which connect directly: a proxy could not reach them anyway.
 */
import type http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { ConfigError, InvalidArgumentError } from '../errors.js';

/** The proxy settings of a process: one proxy per scheme (or none) and the NO_PROXY rules. */
export interface ProxySettings {
  http?: URL | undefined;
  https?: URL | undefined;
  /** Whether any NO_PROXY entry is `*` (nothing is proxied). */
  noneProxied: boolean;
  rules: NoProxyRule[];
}

interface NoProxyRule {
  /** A host name suffix (lower case, no leading dot), an IP literal, or a CIDR BlockList. */
  host?: string;
  cidr?: net.BlockList;
  /** Only this port, when given. */
  port?: number;
}

/**
 * 16 KiB: a proxy's reply to CONNECT is a status line and a few headers; more than this is not
 * a proxy we can talk to.
 */
const MAX_CONNECT_REPLY = 16 * 1024;

/** The first of `names` set to a non-empty value in `e`: [name, value]. */
function env(e: NodeJS.ProcessEnv, ...names: string[]): [string, string] | undefined {
  for (const n of names) {
    const v = e[n]?.trim();
    if (v) return [n, v];
  }
  return undefined;
}

/** Parses a proxy variable's value; a bad one is one line naming the variable. */
export function parseProxyUrl(value: string, name: string): URL {
  let url: URL;
  try {
    url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`);
  } catch {
    throw new InvalidArgumentError(`bad proxy in ${name}: ${JSON.stringify(value)} is not a URL`, { hint: `Set ${name}=http://host:port` });
  }
  if (url.protocol !== 'http:') {
    throw new InvalidArgumentError(`proxy ${url.protocol}// in ${name} is not supported: sluice talks to HTTP proxies only (CONNECT for https:// endpoints)`, { hint: `Set ${name}=http://host:port` });
  }
  return url;
}

function parseRule(raw: string): NoProxyRule | undefined {
  let entry = raw.toLowerCase();
  if (entry === '') return undefined;
  let port: number | undefined;
  // [v6]:port, [v6], host:port; a bare IPv6 literal has colons but no port.
  const bracket = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  if (bracket) {
    entry = bracket[1]!;
    if (bracket[2] !== undefined) port = Number(bracket[2]);
  } else if (net.isIP(entry) === 0 && !entry.includes('/')) {
    const hp = /^(.*):(\d+)$/.exec(entry);
    if (hp) { entry = hp[1]!; port = Number(hp[2]); }
  }
  const slash = entry.indexOf('/');
  if (slash > 0) {
    const ip = entry.slice(0, slash);
    const bits = Number(entry.slice(slash + 1));
    const family = net.isIP(ip);
    if (family === 0 || !Number.isInteger(bits)) return undefined; // not a CIDR block: ignored, as curl does
    const cidr = new net.BlockList();
    try { cidr.addSubnet(ip, bits, family === 6 ? 'ipv6' : 'ipv4'); } catch { return undefined; }
    return { cidr, ...(port !== undefined ? { port } : {}) };
  }
  entry = entry.replace(/^\*?\./, '').replace(/\.$/, '');
  if (entry === '') return undefined;
  return { host: entry, ...(port !== undefined ? { port } : {}) };
}

/** The proxy settings in `e` (default process.env). Throws InvalidArgumentError on a bad proxy URL. */
export function proxySettingsFromEnv(e: NodeJS.ProcessEnv = process.env): ProxySettings {
  const all = env(e, 'all_proxy', 'ALL_PROXY');
  const http = env(e, 'http_proxy', 'HTTP_PROXY') ?? all;
  const secure = env(e, 'https_proxy', 'HTTPS_PROXY') ?? all;
  const entries = (env(e, 'no_proxy', 'NO_PROXY')?.[1] ?? '').split(/[\s,]+/).filter((s) => s !== '');
  const rules: NoProxyRule[] = [];
  for (const s of entries) {
    const r = parseRule(s);
    if (r) rules.push(r);
  }
  return {
    http: http !== undefined ? parseProxyUrl(http[1], http[0]) : undefined,
    https: secure !== undefined ? parseProxyUrl(secure[1], secure[0]) : undefined,
    noneProxied: entries.includes('*'),
    rules,
  };
}

/** Whether NO_PROXY exempts `hostname` (brackets allowed) on `port`. */
export function bypassesProxy(hostname: string, port: number, s: ProxySettings): boolean {
  if (s.noneProxied) return true;
  const host = hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '').toLowerCase();
  const family = net.isIP(host);
  for (const r of s.rules) {
    if (r.port !== undefined && r.port !== port) continue;
    if (r.cidr) {
      if (family !== 0 && r.cidr.check(host, family === 6 ? 'ipv6' : 'ipv4')) return true;
      continue;
    }
    const h = r.host!;
    if (host === h) return true;
    if (family === 0 && host.endsWith(`.${h}`)) return true;
    if (family !== 0 && net.isIP(h) === family && normalizeIp(h) === normalizeIp(host)) return true;
  }
  return false;
}

function normalizeIp(ip: string): string {
  if (net.isIP(ip) !== 6) return ip;
  const b = new net.SocketAddress({ address: ip, family: 'ipv6' });
  return b.address;
}

/** The proxy a request to `target` (scheme://host[:port]) goes through, or undefined for a direct one. */
export function proxyFor(target: URL | string, s: ProxySettings): URL | undefined {
  const url = typeof target === 'string' ? new URL(target) : target;
  const secure = url.protocol === 'https:';
  const proxy = secure ? s.https : s.http;
  if (proxy === undefined) return undefined;
  const port = Number(url.port || (secure ? 443 : 80));
  return bypassesProxy(url.hostname, port, s) ? undefined : proxy;
}

/** `host:port` of a proxy URL, for connecting to it. */
export function proxyAddress(proxy: URL): { host: string; port: number } {
  return { host: proxy.hostname.replace(/^\[|\]$/g, ''), port: Number(proxy.port || 80) };
}

/** The Proxy-Authorization header value for a proxy URL with a user, or undefined. */
export function proxyAuthorization(proxy: URL): string | undefined {
  if (proxy.username === '' && proxy.password === '') return undefined;
  const user = decodeURIComponent(proxy.username);
  const pass = decodeURIComponent(proxy.password);
  return `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
}

/** What a proxy's refusal of CONNECT becomes: final for 4xx (ACL, authentication), retried as unreachable for 5xx. */
function connectRefused(proxy: URL, authority: string, status: number, reason: string): Error {
  const shown = `${proxy.protocol}//${proxy.host}`;
  if (status === 407) {
    return new ConfigError(`proxy ${shown} asks for authentication to CONNECT to ${authority} (407 ${reason})`, { hint: 'Put the user and password in the proxy URL: HTTPS_PROXY=http://user:password@host:port' });
  }
  if (status >= 400 && status < 500) {
    return new ConfigError(`proxy ${shown} refused CONNECT to ${authority} (${status} ${reason})`, { hint: 'Ask for the S3 endpoint to be allowed by the proxy, or exempt it with NO_PROXY' });
  }
  // 502/503/504: the proxy could not reach the endpoint; retried as an unreachable endpoint.
  return Object.assign(new Error(`proxy ${shown} could not reach ${authority} (${status} ${reason})`), { code: 'EHOSTUNREACH' });
}

/**
 * Opens a TCP connection to `proxy` and asks it to CONNECT to host:port. Calls `done` once:
 * with the connected socket (paused, nothing read beyond the proxy's reply) when the proxy
 * answered 2xx, else with an error. Returns the socket at once, so the caller can destroy it
 * while the tunnel is being set up.
 */
export function connectTunnel(proxy: URL, host: string, port: number, done: (err: Error | undefined, sock?: net.Socket) => void): net.Socket {
  const authority = `${net.isIP(host) === 6 ? `[${host}]` : host}:${port}`;
  const sock = net.connect(proxyAddress(proxy));
  let head: Buffer = Buffer.alloc(0);
  let settled = false;
  const settle = (err: Error | undefined) => {
    if (settled) return;
    settled = true;
    sock.off('data', onData);
    sock.off('error', onFail);
    sock.off('close', onClose);
    if (err) { sock.destroy(); done(err); return; }
    sock.pause();
    done(undefined, sock);
  };
  const onFail = (err: Error) => settle(err);
  const onClose = () => settle(Object.assign(new Error(`proxy ${proxy.host} closed the connection during CONNECT to ${authority}`), { code: 'ECONNRESET' }));
  const onData = (d: Buffer) => {
    head = head.length === 0 ? d : Buffer.concat([head, d]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) {
      if (head.length > MAX_CONNECT_REPLY) settle(Object.assign(new Error(`proxy ${proxy.host} sent a CONNECT reply longer than ${MAX_CONNECT_REPLY} bytes`), { code: 'EPROTO' }));
      return;
    }
    const m = /^HTTP\/1\.[01] (\d{3}) ?([^\r\n]*)/.exec(head.toString('latin1', 0, end));
    if (!m) { settle(Object.assign(new Error(`proxy ${proxy.host} answered CONNECT with no HTTP status line`), { code: 'EPROTO' })); return; }
    const status = Number(m[1]);
    if (status < 200 || status >= 300) { settle(connectRefused(proxy, authority, status, m[2] ?? '')); return; }
    if (end + 4 < head.length) { settle(Object.assign(new Error(`proxy ${proxy.host} sent bytes after its CONNECT reply`), { code: 'EPROTO' })); return; }
    settle(undefined);
  };
  sock.on('data', onData);
  sock.on('error', onFail);
  sock.on('close', onClose);
  sock.once('connect', () => {
    const auth = proxyAuthorization(proxy);
    sock.write(`CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\n${auth !== undefined ? `proxy-authorization: ${auth}\r\n` : ''}\r\n`);
  });
  return sock;
}

/**
 * An https.Agent that reaches each origin through the proxy the settings pick for it (a
 * CONNECT tunnel, then TLS with the agent's options), or directly. Node's Agent accepts a
 * socket handed to createConnection's callback later.
 */
export class ProxyHttpsAgent extends https.Agent {
  constructor(private readonly settings: ProxySettings, opts: https.AgentOptions) {
    super(opts);
  }

  override createConnection(options: http.RequestOptions, cb?: (err: Error | null, stream: Duplex) => void): Duplex | null | undefined {
    const host = (options.host ?? 'localhost').replace(/^\[|\]$/g, '');
    const port = Number(options.port ?? 443);
    const proxy = proxyFor(`https://${net.isIP(host) === 6 ? `[${host}]` : host}:${port}`, this.settings);
    const connect = (https.Agent.prototype as unknown as { createConnection: (o: unknown) => net.Socket }).createConnection;
    if (proxy === undefined) return connect.call(this, options);
    connectTunnel(proxy, host, port, (err, raw) => {
      if (err) { cb?.(err, undefined as unknown as Duplex); return; }
      cb?.(null, connect.call(this, { ...options, socket: raw! }));
    });
    return undefined;
  }
}
