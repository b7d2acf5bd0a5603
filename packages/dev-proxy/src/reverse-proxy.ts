import type { IncomingMessage, ServerResponse } from 'node:http';
import { Agent, request as undiciRequest, type Dispatcher } from 'undici';
import { AgentError } from '@org/core';

/** Headers that describe one connection, never forwarded (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
]);

/** Options of {@link createReverseProxy}. */
export interface ReverseProxyOptions {
  /** Where requests go, e.g. `https://backend.example.com`. */
  upstreamUrl: string;
  /** undici dispatcher; default a pooled keep-alive agent. */
  dispatcher?: Dispatcher;
}

/**
 * Forwards a request to the upstream and streams the answer back: method, path, query, headers
 * and bodies both ways. Bodies pass through as bytes, so a compressed answer keeps its
 * `content-encoding` and always matches its headers. An unreachable upstream is a 502 naming it.
 */
export function createReverseProxy(options: ReverseProxyOptions): (request: IncomingMessage, response: ServerResponse) => Promise<void> {
  const upstream = new URL(options.upstreamUrl);
  const dispatcher = options.dispatcher ?? new Agent({ keepAliveTimeout: 10_000 });
  return async (incoming, outgoing) => {
    const target = new URL(incoming.url ?? '/', upstream);
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(incoming.headers)) {
      if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
    }
    const hasBody = incoming.method !== 'GET' && incoming.method !== 'HEAD';
    try {
      const answer = await undiciRequest(target, {
        method: (incoming.method ?? 'GET') as Dispatcher.HttpMethod,
        headers,
        body: hasBody ? incoming : null,
        dispatcher,
      });
      const responseHeaders: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(answer.headers)) {
        if (value !== undefined && !HOP_BY_HOP.has(name)) responseHeaders[name] = value;
      }
      outgoing.writeHead(answer.statusCode, responseHeaders);
      outgoing.flushHeaders();
      outgoing.on('close', () => {
        if (!outgoing.writableFinished) answer.body.destroy();
      });
      for await (const chunk of answer.body) {
        if (!outgoing.write(chunk)) await new Promise((resolve) => outgoing.once('drain', resolve));
      }
      outgoing.end();
    } catch (error) {
      if (outgoing.headersSent) {
        outgoing.destroy(error instanceof Error ? error : undefined);
        return;
      }
      const reason = (error as { code?: string; message?: string }).code ?? (error as Error).message;
      const failure = new AgentError('UPSTREAM_ERROR', `Upstream ${upstream.origin} is unreachable: ${reason}`);
      outgoing.writeHead(failure.status, { 'content-type': 'application/json; charset=utf-8' });
      outgoing.end(JSON.stringify(failure.toJSON()));
    }
  };
}
