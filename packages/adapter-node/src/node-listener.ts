import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { AgentError } from '@org/core';

/** A Web-standard request handler, such as the one `createAgentHandler` returns. */
export type WebHandler = (request: Request) => Promise<Response>;

/** Options of {@link createNodeListener}. */
export interface NodeListenerOptions {
  /**
   * How long a response's bytes may wait for more before they are written, in ms: what a body
   * yields within this window (a burst of events, the status and headers before the first of
   * them) goes to the socket in one write. Each write to a socket costs the server a system call
   * and the client a wake-up, so a few milliseconds here save much CPU on streamed responses.
   * `0` writes on the next turn of the event loop. Default 5.
   */
  flushDelayMs?: number;
  /**
   * The host names this server answers to; a request whose `Host` names another gets 403 before
   * it reaches the handler. Set it on a server that listens on a developer's machine: a page
   * whose domain is re-pointed at 127.0.0.1 (DNS rebinding) calls it as its own origin, so CORS
   * never stops it, but its requests still carry that domain in `Host`. `localhost`, its
   * subdomains and IP addresses always pass; a name starting with `.` also lets its subdomains
   * pass (`.example.test`). A request without `Host` passes. Default: every host passes (a
   * server behind a reverse proxy sees its public names).
   */
  allowedHosts?: readonly string[];
}

/** Default of {@link NodeListenerOptions.flushDelayMs}. */
const DEFAULT_FLUSH_DELAY_MS = 5;

/**
 * Puts a Web handler behind `node:http`: the request body is streamed in, the response streamed
 * out with backpressure, and a client that goes away aborts the request's signal. Only
 * origin-form targets (`/path?query`) without dot segments reach the handler; an absolute-form
 * target (`http://other-host/...`), `..` or `.` segments (also percent-encoded) get 400, so the
 * URL the handler sees is always this server's and its path is the one the client sent.
 *
 * @example
 * ```ts
 * http.createServer(createNodeListener(createAgentHandler({ createPorts }))).listen(8080);
 * ```
 */
export function createNodeListener(
  handler: WebHandler,
  options: NodeListenerOptions = {},
): (request: IncomingMessage, response: ServerResponse) => void {
  const flushDelayMs = nonNegative(options.flushDelayMs, DEFAULT_FLUSH_DELAY_MS, 'flushDelayMs');
  const isAllowedHost = options.allowedHosts ? hostFilter(options.allowedHosts) : undefined;
  return (incoming, outgoing) => {
    const refusal = refuseTarget(incoming);
    if (refusal) {
      const error = new AgentError('BAD_REQUEST', refusal, { details: { path: '(request target)' } });
      outgoing.writeHead(error.status, { 'content-type': 'application/json; charset=utf-8', connection: 'close' });
      outgoing.end(JSON.stringify(error.toJSON()));
      return;
    }
    if (isAllowedHost && !isAllowedHost(incoming.headers.host)) {
      const name = hostName(incoming.headers.host ?? '').slice(0, 200);
      const error = new AgentError('FORBIDDEN', `This server does not answer to the host "${name}"; add it to the allowed hosts`, {
        details: { header: 'host' },
      });
      outgoing.writeHead(error.status, { 'content-type': 'application/json; charset=utf-8', connection: 'close' });
      outgoing.end(JSON.stringify(error.toJSON()));
      return;
    }
    const method = (incoming.method ?? 'GET').toUpperCase();
    if (UNSERVED_METHODS.has(method)) {
      // A Web `Request` cannot carry these methods, so no handler could answer them.
      const error = new AgentError('METHOD_NOT_ALLOWED', `${method} requests are not served`, { details: { method } });
      outgoing.writeHead(error.status, { 'content-type': 'application/json; charset=utf-8', connection: 'close' });
      outgoing.end(JSON.stringify(error.toJSON()));
      return;
    }
    const controller = new AbortController();
    outgoing.on('close', () => {
      if (!outgoing.writableFinished) controller.abort(new Error('Client disconnected'));
    });
    void serveOne(handler, incoming, outgoing, controller, flushDelayMs).catch((error: unknown) => {
      if (outgoing.destroyed) return;
      if (!outgoing.headersSent) {
        // The handler failed without an answer; its message may name files or secrets, so it stays here.
        const failure = new AgentError('INTERNAL', 'The server failed to answer this request');
        outgoing.writeHead(failure.status, { 'content-type': 'application/json; charset=utf-8' });
        outgoing.end(JSON.stringify(failure.toJSON()));
      } else {
        outgoing.destroy(error instanceof Error ? error : new Error(String(error)));
      }
    });
  };
}

/** Methods the Fetch standard forbids in a `Request`. */
const UNSERVED_METHODS: ReadonlySet<string> = new Set(['CONNECT', 'TRACE', 'TRACK']);

/** Whether a `Host` header names a host of {@link NodeListenerOptions.allowedHosts}. */
function hostFilter(allowed: readonly string[]): (host: string | undefined) => boolean {
  const exact = new Set<string>();
  const suffixes: string[] = ['.localhost'];
  for (const entry of allowed) {
    const name = entry.trim().toLowerCase();
    if (name.startsWith('.')) {
      suffixes.push(name);
      exact.add(name.slice(1));
    } else if (name) {
      exact.add(name);
    }
  }
  return (host) => {
    if (host === undefined) return true;
    const name = hostName(host);
    return name === 'localhost' || isIpAddress(name) || exact.has(name) || suffixes.some((suffix) => name.endsWith(suffix));
  };
}

/** The name of a `Host` header, lower case, without its port (an IPv6 address keeps its brackets). */
function hostName(host: string): string {
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.replace(/:\d*$/, '');
  return name.toLowerCase().replace(/\.$/, '');
}

/** An IPv4 address in dotted form or a bracketed IPv6 address: no DNS name a page could re-point. */
function isIpAddress(name: string): boolean {
  return /^\d{1,3}(\.\d{1,3}){3}$/.test(name) || /^\[[0-9a-f:.]+\]$/.test(name);
}

/** Why a request target is refused, or `undefined` when it is a plain origin-form path. */
function refuseTarget(incoming: IncomingMessage): string | undefined {
  const target = incoming.url ?? '/';
  if (!target.startsWith('/')) {
    return 'The request target must be a path starting with "/"; absolute URLs and authority forms are not served';
  }
  const queryAt = target.search(/[?#]/);
  const path = queryAt === -1 ? target : target.slice(0, queryAt);
  for (const segment of path.split(/[/\\]/)) {
    const decoded = segment.replace(/%2e/gi, '.');
    if (decoded === '.' || decoded === '..') return 'The request path must not hold "." or ".." segments (plain or percent-encoded)';
  }
  return undefined;
}

async function serveOne(
  handler: WebHandler,
  incoming: IncomingMessage,
  outgoing: ServerResponse,
  controller: AbortController,
  flushDelayMs: number,
): Promise<void> {
  // Joined as text, never resolved against a base: a path such as `//other-host/x` stays a path.
  const host = validHost(incoming.headers.host);
  const url = new URL(`http://${host}${incoming.url ?? '/'}`);
  const headers = new Headers();
  for (const [name, value] of Object.entries(incoming.headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const item of value) headers.append(name, item);
    else headers.set(name, value);
  }
  const hasBody = incoming.method !== 'GET' && incoming.method !== 'HEAD';
  const init: RequestInit & { duplex?: 'half' } = { method: incoming.method ?? 'GET', headers, signal: controller.signal };
  if (hasBody) {
    init.body = Readable.toWeb(incoming) as ReadableStream<Uint8Array>;
    init.duplex = 'half';
  }
  const response = await handler(new Request(url, init));
  const responseHeaders: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => {
    if (name === 'set-cookie') return;
    responseHeaders[name] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) responseHeaders['set-cookie'] = cookies;
  outgoing.writeHead(response.status, responseHeaders);
  if (!response.body) {
    outgoing.end();
    return;
  }
  const reader = response.body.getReader();
  const stop = (): void => {
    void reader.cancel(controller.signal.reason).catch(() => undefined);
  };
  controller.signal.addEventListener('abort', stop, { once: true });
  try {
    await writeBatched(reader, outgoing, controller.signal, flushDelayMs);
  } finally {
    controller.signal.removeEventListener('abort', stop);
  }
}

/** Most bytes gathered before they are written without waiting out the flush delay. */
const MAX_BATCH_BYTES = 64 * 1024;

/**
 * Copies a response body to the socket, gathering what the body yields within `flushDelayMs` (up
 * to {@link MAX_BATCH_BYTES}) into one write: a stream of many small events costs one socket write
 * per burst, not one per event. The status and headers go out with the first bytes, or on their
 * own once the delay passes without any. Backpressure holds: once the socket's buffer is full,
 * nothing more is read from the body until it drains, so a slow client never makes the server
 * buffer without bound.
 */
async function writeBatched(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  outgoing: ServerResponse,
  signal: AbortSignal,
  flushDelayMs: number,
): Promise<void> {
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  let scheduled: ReturnType<typeof setTimeout> | undefined;
  let blocked: Promise<void> | undefined;
  let wroteAny = false;
  const waitForDrain = (): Promise<void> =>
    new Promise<void>((resolve) => {
      const settle = (): void => {
        outgoing.off('drain', settle);
        outgoing.off('close', settle);
        blocked = undefined;
        resolve();
      };
      outgoing.on('drain', settle);
      outgoing.on('close', settle);
    });
  const take = (): Uint8Array | undefined => {
    if (pendingBytes === 0) return undefined;
    const batch = pending.length === 1 ? (pending[0] as Uint8Array) : Buffer.concat(pending, pendingBytes);
    pending = [];
    pendingBytes = 0;
    return batch;
  };
  const flush = (): void => {
    if (scheduled !== undefined) clearTimeout(scheduled);
    scheduled = undefined;
    if (outgoing.destroyed) return;
    const batch = take();
    // Nothing yet: the status and headers go alone, so the client learns them without waiting for a body.
    if (batch === undefined) {
      if (!wroteAny) outgoing.flushHeaders();
    } else if (!outgoing.write(batch)) {
      blocked ??= waitForDrain();
    }
    wroteAny = true;
  };
  scheduled = setTimeout(flush, flushDelayMs);
  try {
    for (;;) {
      if (blocked) await blocked;
      if (signal.aborted) return;
      const { done, value } = await reader.read();
      if (done) break;
      if (value.byteLength === 0) continue;
      pending.push(value);
      pendingBytes += value.byteLength;
      if (pendingBytes >= MAX_BATCH_BYTES) flush();
      else scheduled ??= setTimeout(flush, flushDelayMs);
    }
    if (signal.aborted) return;
    // The last bytes and the end of the response in one write.
    outgoing.end(take());
  } finally {
    if (scheduled !== undefined) clearTimeout(scheduled);
  }
}

/** A running server. */
export interface RunningServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** Options of {@link serve}. */
export interface ServeOptions {
  handler: WebHandler;
  /** `0` (default) picks a free port. */
  port?: number;
  host?: string;
  /** A client must send all request headers within this many ms, else it gets 408. Default 15 000. */
  headersTimeoutMs?: number;
  /**
   * A client must send the whole request, body included, within this many ms, else it gets 408
   * and the connection is closed; the response may then stream for as long as it needs. Default 60 000.
   */
  requestTimeoutMs?: number;
  /** An idle kept-alive connection is closed after this many ms. Default 5 000. */
  keepAliveTimeoutMs?: number;
  /**
   * Most open connections; more are closed as they arrive, so a flood of sockets cannot use up
   * the process's file descriptors (which runs need for models and stores). Default 4 096.
   */
  maxConnections?: number;
  /** How long a response's bytes may wait for more before one write; see {@link NodeListenerOptions.flushDelayMs}. Default 5. */
  flushDelayMs?: number;
  /** The host names the server answers to (a guard against DNS rebinding); see {@link NodeListenerOptions.allowedHosts}. Default: any. */
  allowedHosts?: readonly string[];
}

/** Default limits of {@link serve}. */
const SERVE_DEFAULTS = {
  headersTimeoutMs: 15_000,
  requestTimeoutMs: 60_000,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 4096,
} as const;

/**
 * Serves a Web handler on `node:http`, with limits on how long a client may take to send a
 * request, how long an idle connection stays open, and how many connections may be open.
 *
 * @example
 * ```ts
 * const server = await serve({ handler, port: 8080, requestTimeoutMs: 30_000 });
 * console.log(server.url);
 * ```
 */
export function serve(options: ServeOptions): Promise<RunningServer> {
  const requestTimeout = positive(options.requestTimeoutMs, SERVE_DEFAULTS.requestTimeoutMs, 'requestTimeoutMs');
  const headersTimeout = Math.min(positive(options.headersTimeoutMs, SERVE_DEFAULTS.headersTimeoutMs, 'headersTimeoutMs'), requestTimeout);
  const keepAliveTimeout = positive(options.keepAliveTimeoutMs, SERVE_DEFAULTS.keepAliveTimeoutMs, 'keepAliveTimeoutMs');
  const maxConnections = positive(options.maxConnections, SERVE_DEFAULTS.maxConnections, 'maxConnections');
  const listenerOptions: NodeListenerOptions = { flushDelayMs: nonNegative(options.flushDelayMs, DEFAULT_FLUSH_DELAY_MS, 'flushDelayMs') };
  if (options.allowedHosts) listenerOptions.allowedHosts = options.allowedHosts;
  // Loaded here rather than with the package: a process that only uses the fetch or the stores
  // never pays for loading node:http.
  return import('node:http').then(({ createServer }) => {
    const server = createServer(
      {
        headersTimeout,
        requestTimeout,
        keepAliveTimeout,
        // How often Node looks for requests over their time; by default only every 30 s.
        connectionsCheckingInterval: Math.min(30_000, Math.max(50, Math.floor(headersTimeout / 4))),
      },
      createNodeListener(options.handler, listenerOptions),
    );
    server.maxConnections = maxConnections;
    const host = options.host ?? '127.0.0.1';
    return new Promise<RunningServer>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, host, () => {
        server.off('error', reject);
        const address = server.address();
        const port = typeof address === 'object' && address ? address.port : (options.port ?? 0);
        const urlHost = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? 'localhost' : host;
        resolve({
          url: `http://${urlHost}:${port}`,
          port,
          close: () =>
            new Promise<void>((done) => {
              server.closeAllConnections();
              server.close(() => done());
            }),
        });
      });
    });
  });
}

function nonNegative(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < 0) throw new RangeError(`${name} must be a number of milliseconds of at least 0, got ${value}`);
  return value;
}

function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0) throw new RangeError(`serve: ${name} must be a positive number, got ${value}`);
  return value;
}

/** The `Host` header when it is a plain host and port, else `localhost`. */
function validHost(host: string | undefined): string {
  return host !== undefined && /^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/.test(host) ? host : 'localhost';
}
