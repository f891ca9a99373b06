/**
 * The SDK's request handler with proxies (./proxy.ts has the rules). Its own module since
 * issue 44: it extends the SDK's NodeHttpHandler, and the SDK is loaded only when a request
 * needs it (./s3-client.ts), so importing ./proxy.ts (the wire client does) loads no SDK code.
 */
import net from 'node:net';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { proxyAddress, proxyAuthorization, proxyFor, ProxyHttpsAgent, type ProxySettings } from './proxy.js';

type SmithyRequest = Parameters<NodeHttpHandler['handle']>[0];

/**
 * The SDK's request handler with proxies: https:// requests go through ProxyHttpsAgent (a
 * CONNECT tunnel); http:// requests that a proxy takes are sent to it in absolute form, the
 * signed Host header unchanged. Requests NO_PROXY exempts go as they would without a proxy.
 */
export class ProxyRequestHandler extends NodeHttpHandler {
  constructor(private readonly settings: ProxySettings, ca: string | undefined) {
    super({ httpsAgent: new ProxyHttpsAgent(settings, { keepAlive: true, ...(ca !== undefined ? { ca } : {}) }) });
  }

  override handle(request: SmithyRequest, opts?: Parameters<NodeHttpHandler['handle']>[1]): ReturnType<NodeHttpHandler['handle']> {
    if (request.protocol === 'http:' && this.settings.http !== undefined) {
      const hostname = request.hostname.replace(/^\[|\]$/g, '');
      const authority = `${net.isIP(hostname) === 6 ? `[${hostname}]` : hostname}${request.port ? `:${request.port}` : ''}`;
      const proxy = proxyFor(`http://${authority}`, this.settings);
      if (proxy !== undefined) {
        const { host, port } = proxyAddress(proxy);
        const auth = proxyAuthorization(proxy);
        const headers: Record<string, string> = { ...request.headers };
        if (!Object.keys(headers).some((k) => k.toLowerCase() === 'host')) headers.host = authority;
        if (auth !== undefined) headers['proxy-authorization'] = auth;
        const proxied = Object.assign(Object.create(Object.getPrototypeOf(request) as object) as SmithyRequest, request, {
          hostname: host, port, path: `http://${authority}${request.path}`, headers,
        });
        return super.handle(proxied, opts);
      }
    }
    return super.handle(request, opts);
  }
}
