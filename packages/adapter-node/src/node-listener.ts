import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { AgentError, isAgentError } from '@org/core';
import { errorResponse } from '@org/core/http';

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
  /**
   * How long a response may wait for a client that reads none of it, in ms: when the socket's
   * buffer is full and the client takes nothing more for this long, the connection is closed and
   * the request's signal aborts, as when a client goes away (a legacy run is cancelled). Without it
   * a client that never reads would hold its connection and the response's stream for good. A
   * client that reads, however slowly, is not cut off. Default 60 000.
   */
  sendTimeoutMs?: number;
  /**
   * Told of each request the handler failed to serve, once: the handler threw something other than
   * an `AgentError` (the client gets a bare 500), threw an `AgentError` whose status is 500 or more,
   * or its response body failed (the client sees the response cut). Not told of failures after the
   * request's signal aborted (the client went away, the server is closing). The client never sees
   * the error; this is where an operator learns why. A hook that throws is ignored. Default: one
   * line on `console.error` with the method and path (no query, headers or body, which may hold
   * tokens) and the error.
   */
  onError?: (error: unknown, request: Request) => void;
}

/** Default of {@link NodeListenerOptions.onError}: the method and path only, since the query, headers and body may hold tokens. */
function logError(error: unknown, request: Request): void {
  console.error(`@org/adapter-node: ${request.method} ${new URL(request.url).pathname} failed:`, error);
}

/** Default of {@link NodeListenerOptions.flushDelayMs}. */
const DEFAULT_FLUSH_DELAY_MS = 5;

/** Default of {@link NodeListenerOptions.sendTimeoutMs}. */
const DEFAULT_SEND_TIMEOUT_MS = 60_000;

/** What the writer of one response needs to know. */
interface WriteSettings {
  flushDelayMs: number;
  sendTimeoutMs: number;
}

/** A request being answered, as {@link serve} sees it when it closes. */
interface Exchange {
  /**
   * For a server that closes: a response being streamed stops where it stands and ends cleanly,
   * then its socket closes; that socket is returned. A request without an answer yet returns
   * nothing (its socket is destroyed).
   */
  close(): Socket | undefined;
}

/**
 * Puts a Web handler behind `node:http`: the request body is streamed in, the response streamed
 * out with backpressure, and a client that goes away (or reads nothing for `sendTimeoutMs`) aborts
 * the request's signal. Only origin-form targets (`/path?query`) without dot segments reach the
 * handler; an absolute-form target (`http://other-host/...`), `..` or `.` segments (also
 * percent-encoded), two `Host` headers or one that names no host get 400, so the URL the handler
 * sees is always this server's and its path is the one the client sent. What the handler leaves
 * of a request body when it answers is read and dropped, so a client still sending it gets the
 * answer rather than a reset connection. A handler that throws an `AgentError` is answered with its
 * code's status and JSON; anything else it throws gets a bare 500, and `onError` learns why.
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
  return listener(handler, options, undefined);
}

/** {@link createNodeListener}, telling `exchanges` (when given) of every request being answered. */
function listener(
  handler: WebHandler,
  options: NodeListenerOptions,
  exchanges: Set<Exchange> | undefined,
): (request: IncomingMessage, response: ServerResponse, continueOnRead?: boolean) => void {
  const settings: WriteSettings = {
    flushDelayMs: nonNegative(options.flushDelayMs, DEFAULT_FLUSH_DELAY_MS, 'flushDelayMs'),
    sendTimeoutMs: positive(options.sendTimeoutMs, DEFAULT_SEND_TIMEOUT_MS, 'sendTimeoutMs'),
  };
  const isAllowedHost = options.allowedHosts ? hostFilter(options.allowedHosts) : undefined;
  const onError = options.onError ?? logError;
  const report = (error: unknown, request: Request): void => {
    try {
      const reported = onError(error, request) as unknown;
      // An async hook's rejection is its own, as a synchronous hook's throw is.
      if (reported instanceof Promise) reported.catch(() => undefined);
    } catch {
      // The hook failing must not cost the server its next request.
    }
  };
  // `continueOnRead`: the client waits for `100 Continue` before it sends the body (`serve()` takes
  // Node's `checkContinue` event), which it gets only once the handler reads the body.
  return (incoming, outgoing, continueOnRead = false) => {
    const refusal = refuseTarget(incoming);
    if (refusal) {
      refuse(outgoing, new AgentError('BAD_REQUEST', refusal, { details: { path: '(request target)' } }));
      return;
    }
    const url = requestUrl(incoming);
    if (typeof url === 'string') {
      refuse(outgoing, new AgentError('BAD_REQUEST', url, { details: { header: 'host' } }));
      return;
    }
    if (isAllowedHost && !isAllowedHost(incoming.headers.host)) {
      const name = hostName(incoming.headers.host ?? '').slice(0, 200);
      refuse(
        outgoing,
        new AgentError('FORBIDDEN', `This server does not answer to the host "${name}"; add it to the allowed hosts`, { details: { header: 'host' } }),
      );
      return;
    }
    const method = (incoming.method ?? 'GET').toUpperCase();
    if (UNSERVED_METHODS.has(method)) {
      // A Web `Request` cannot carry these methods, so no handler could answer them.
      refuse(outgoing, new AgentError('METHOD_NOT_ALLOWED', `${method} requests are not served`, { details: { method } }));
      return;
    }
    const controller = new AbortController();
    // Set when the server closes while the response streams: the response then ends where it stands.
    let closing = false;
    let closingScheduled = false;
    /** Closes the socket once the ended response has reached it, or after `sendTimeoutMs` if the client stops taking it. */
    const closeWhenSent = (socket: Socket): void => {
      if (closingScheduled || socket.destroyed) return;
      closingScheduled = true;
      const stalled = setTimeout(() => socket.destroy(), settings.sendTimeoutMs);
      socket.once('close', () => clearTimeout(stalled));
      outgoing.once('finish', () => {
        clearTimeout(stalled);
        socket.destroy();
      });
    };
    const exchange: Exchange | undefined = exchanges && {
      close: () => {
        const socket = outgoing.socket;
        if (!socket || !outgoing.headersSent || outgoing.writableFinished) return undefined;
        closing = true;
        if (!outgoing.writableEnded) controller.abort(new AgentError('ABORTED', 'The server is closing'));
        // Ended, but its last bytes wait for a client that takes nothing.
        else if (socket.writableNeedDrain) socket.destroy();
        else closeWhenSent(socket);
        return socket;
      },
    };
    if (exchange) exchanges?.add(exchange);
    outgoing.on('close', () => {
      if (exchange) exchanges?.delete(exchange);
      if (!outgoing.writableFinished) controller.abort(new Error('Client disconnected'));
    });
    const socket = outgoing.socket;
    let request: Request | undefined;
    const served = (async () => {
      request = toRequest(incoming, outgoing, url, controller.signal, continueOnRead);
      let response: Response;
      try {
        response = await handler(request);
      } catch (error) {
        if (!isAgentError(error)) throw error;
        // An AgentError is the handler's answer: its code's status and JSON, as core's own handler gives.
        response = errorResponse(error);
        if (response.status >= 500 && !controller.signal.aborted) report(error, request);
      }
      await writeResponse(response, outgoing, controller, settings, () => closing);
    })();
    void served.then(
      () => {
        if (closing && socket) closeWhenSent(socket);
      },
      (error: unknown) => {
        if (request && !controller.signal.aborted) report(error, request);
        if (outgoing.destroyed) return;
        if (!outgoing.headersSent) {
          // The handler failed without an answer; its message may name files or secrets, so it stays here.
          const failure = new AgentError('INTERNAL', 'The server failed to answer this request');
          outgoing.writeHead(failure.status, { 'content-type': 'application/json; charset=utf-8' });
          outgoing.end(JSON.stringify(failure.toJSON()));
        } else {
          outgoing.destroy(error instanceof Error ? error : new Error(String(error)));
        }
      },
    );
  };
}

/** Answers a request the handler never sees with the error's status and JSON, and closes the connection. */
function refuse(outgoing: ServerResponse, error: AgentError): void {
  outgoing.writeHead(error.status, { 'content-type': 'application/json; charset=utf-8', connection: 'close' });
  outgoing.end(JSON.stringify(error.toJSON()));
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

/**
 * A `Host` header value as RFC 3986 allows it: a bracketed IP literal or a registered name (letters,
 * digits, `-._~`, sub-delimiters, percent-escapes), then an optional port. No `/`, `?`, `#`, `@`,
 * `\\` or white space, so joined to a path it can only be the URL's host.
 */
const HOST_PATTERN = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]+)(?::\d*)?$/;

/**
 * The URL the handler sees, or why the `Host` header names no host: more than one `Host`, or one
 * that is not a host and port, gets 400 (RFC 9112, section 3.2). Without one (HTTP/1.0) or with
 * an empty one, the URL names `localhost`.
 */
function requestUrl(incoming: IncomingMessage): URL | string {
  const raw = incoming.rawHeaders;
  let hosts = 0;
  for (let index = 0; index < raw.length; index += 2) {
    const name = raw[index] as string;
    if (name.length === 4 && name.toLowerCase() === 'host') hosts += 1;
  }
  if (hosts > 1) return 'The request has more than one Host header';
  const host = incoming.headers.host;
  const target = incoming.url ?? '/';
  // Joined as text, never resolved against a base: a path such as `//other-host/x` stays a path.
  if (host === undefined || host === '') return new URL(`http://localhost${target}`);
  const invalid = `The Host header "${host.slice(0, 200)}" is not a host name or address with an optional port`;
  if (!HOST_PATTERN.test(host)) return invalid;
  try {
    // A port over 65535 or a malformed address fails here.
    return new URL(`http://${host}${target}`);
  } catch {
    return invalid;
  }
}

/** The Web `Request` the handler gets: the body streamed from `incoming`, the signal the exchange's. */
function toRequest(incoming: IncomingMessage, outgoing: ServerResponse, url: URL, signal: AbortSignal, continueOnRead: boolean): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(incoming.headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const item of value) headers.append(name, item);
    else headers.set(name, value);
  }
  const hasBody = incoming.method !== 'GET' && incoming.method !== 'HEAD';
  const init: RequestInit & { duplex?: 'half' } = { method: incoming.method ?? 'GET', headers, signal };
  if (hasBody) {
    init.body = requestBody(incoming, outgoing, continueOnRead);
    init.duplex = 'half';
  }
  return new Request(url, init);
}

/** Writes a handler's response: status and headers, then its body with {@link writeBatched}. */
async function writeResponse(
  response: Response,
  outgoing: ServerResponse,
  controller: AbortController,
  settings: WriteSettings,
  isClosing: () => boolean,
): Promise<void> {
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
    await writeBatched(reader, outgoing, controller.signal, settings, isClosing);
  } finally {
    controller.signal.removeEventListener('abort', stop);
  }
}

/**
 * The request body as a Web stream that reads the socket only as fast as the handler reads it.
 * Nothing is read before the handler asks. A handler that stops reading (cancels the stream) or
 * answers before reading it all leaves the rest to be read and dropped, never the connection reset:
 * a client that sends its whole body before it reads the answer (as many do) gets the answer, for
 * as long as the server's request timeout lets it send, and the connection stays usable. With
 * `continueOnRead`, the first read sends `100 Continue` (RFC 9110, section 10.1.1): a handler that
 * answers without reading (a 413 for a declared length over its limit) never invites the body.
 */
function requestBody(incoming: IncomingMessage, outgoing: ServerResponse, continueOnRead: boolean): ReadableStream<Uint8Array> {
  let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  let reading = false;
  const onData = (chunk: Buffer): void => {
    // A copy, as `Readable.toWeb` makes: the chunk shares its memory with the socket's read buffer.
    controller?.enqueue(new Uint8Array(chunk));
    if ((controller?.desiredSize ?? 0) <= 0) incoming.pause();
  };
  const onEnd = (): void => {
    stopReading();
    controller?.close();
  };
  const onError = (error: Error): void => {
    stopReading();
    controller?.error(error);
  };
  const onClose = (): void => {
    stopReading();
    controller?.error(new Error('The client closed the connection before the request body ended'));
  };
  const stopReading = (): void => {
    incoming.off('data', onData);
    incoming.off('end', onEnd);
    incoming.off('error', onError);
    incoming.off('close', onClose);
    outgoing.off('finish', onAnswered);
  };
  // What the handler left unread is read and dropped, so the client can finish sending and read the answer.
  const drop = (): void => {
    stopReading();
    incoming.resume();
  };
  const onAnswered = (): void => {
    drop();
    // A read still waiting learns that the rest of the body will not come.
    controller?.error(new Error('The response ended before the request body was read'));
  };
  return new ReadableStream<Uint8Array>(
    {
      start(streamController) {
        controller = streamController;
      },
      pull() {
        if (!reading) {
          reading = true;
          // Never after the answer's head (a 100 must come first); Node closes that connection once the answer ends.
          if (continueOnRead && !outgoing.headersSent) outgoing.writeContinue();
          incoming.on('data', onData);
          incoming.once('end', onEnd);
          incoming.once('error', onError);
          incoming.once('close', onClose);
          outgoing.once('finish', onAnswered);
        }
        incoming.resume();
      },
      cancel() {
        drop();
      },
    },
    // Read on demand only: Node's own buffer of the request is the read-ahead.
    { highWaterMark: 0 },
  );
}

/** Most bytes gathered before they are written without waiting out the flush delay. */
const MAX_BATCH_BYTES = 64 * 1024;

/**
 * Copies a response body to the socket, gathering what the body yields within `flushDelayMs` (up
 * to {@link MAX_BATCH_BYTES}) into one write: a stream of many small events costs one socket write
 * per burst, not one per event. The status and headers go out with the first bytes, or on their
 * own once the delay passes without any. Backpressure holds: once the socket's buffer is full,
 * nothing more is read from the body until it drains, so a slow client never makes the server
 * buffer without bound; a client that takes nothing for `sendTimeoutMs` is disconnected. When the
 * signal aborts, the response is left as it is (the client is gone), or ended where it stands when
 * `endOnAbort()` says so (the server is closing). Bytes the body yielded before it failed are
 * written before the failure is passed on.
 */
async function writeBatched(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  outgoing: ServerResponse,
  signal: AbortSignal,
  settings: WriteSettings,
  endOnAbort: () => boolean,
): Promise<void> {
  const { flushDelayMs, sendTimeoutMs } = settings;
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  let scheduled: ReturnType<typeof setTimeout> | undefined;
  let blocked: Promise<void> | undefined;
  let wroteAny = false;
  // Set when the signal aborted while the client was taking nothing.
  let stuck = false;
  const waitForDrain = (): Promise<void> =>
    new Promise<void>((resolve) => {
      // One timer per wait, not per write: a client that takes nothing for this long is cut off.
      const stalled = setTimeout(() => outgoing.destroy(), sendTimeoutMs);
      const settle = (): void => {
        clearTimeout(stalled);
        outgoing.off('drain', settle);
        outgoing.off('close', settle);
        signal.removeEventListener('abort', abandon);
        blocked = undefined;
        resolve();
      };
      const abandon = (): void => {
        stuck = true;
        settle();
      };
      outgoing.on('drain', settle);
      outgoing.on('close', settle);
      signal.addEventListener('abort', abandon);
    });
  /** Resolves once `batch` has reached the socket (or the connection is gone, or the client stalled). */
  const written = (batch: Uint8Array): Promise<void> =>
    new Promise<void>((resolve) => {
      const stalled = setTimeout(() => outgoing.destroy(), sendTimeoutMs);
      const settle = (): void => {
        clearTimeout(stalled);
        outgoing.off('close', settle);
        resolve();
      };
      outgoing.on('close', settle);
      outgoing.write(batch, settle);
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
      if (signal.aborted) break;
      let result: Awaited<ReturnType<typeof reader.read>>;
      try {
        result = await reader.read();
      } catch (error) {
        // What the body gave before it failed still reaches the client, then the response is cut.
        if (scheduled !== undefined) clearTimeout(scheduled);
        scheduled = undefined;
        const batch = take();
        if (batch !== undefined && !outgoing.destroyed) await written(batch);
        throw error;
      }
      const { done, value } = result;
      if (done) break;
      if (value.byteLength === 0) continue;
      pending.push(value);
      pendingBytes += value.byteLength;
      if (pendingBytes >= MAX_BATCH_BYTES) flush();
      else scheduled ??= setTimeout(flush, flushDelayMs);
    }
    if (signal.aborted) {
      if (!endOnAbort()) return;
      // The server is closing: a client that takes nothing gets no clean end to wait for.
      if (stuck) {
        outgoing.destroy();
        return;
      }
    }
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
  /** How long a response may wait for a client that reads none of it; see {@link NodeListenerOptions.sendTimeoutMs}. Default 60 000. */
  sendTimeoutMs?: number;
  /** Told of each request the handler failed to serve; see {@link NodeListenerOptions.onError}. Default: a line on `console.error`. */
  onError?: (error: unknown, request: Request) => void;
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
 * `CONNECT` requests get 405. A client that sends `Expect: 100-continue` is sent `100 Continue` only
 * when the handler reads the body, so a handler that refuses it unread never invites it. `close()` stops taking connections, ends the responses being
 * streamed where they stand (cleanly, so a client sees the end of the stream, and the requests'
 * signals abort as when a client goes away), closes every other connection, and resolves once all
 * are closed.
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
  const listenerOptions: NodeListenerOptions = {
    flushDelayMs: nonNegative(options.flushDelayMs, DEFAULT_FLUSH_DELAY_MS, 'flushDelayMs'),
    sendTimeoutMs: positive(options.sendTimeoutMs, DEFAULT_SEND_TIMEOUT_MS, 'sendTimeoutMs'),
  };
  if (options.allowedHosts) listenerOptions.allowedHosts = options.allowedHosts;
  if (options.onError) listenerOptions.onError = options.onError;
  // Loaded here rather than with the package: a process that only uses the fetch or the stores
  // never pays for loading node:http.
  return import('node:http').then(({ createServer }) => {
    const exchanges = new Set<Exchange>();
    const sockets = new Set<Socket>();
    const handle = listener(options.handler, listenerOptions, exchanges);
    const server = createServer(
      {
        headersTimeout,
        requestTimeout,
        keepAliveTimeout,
        // How often Node looks for requests over their time; by default only every 30 s.
        connectionsCheckingInterval: Math.min(30_000, Math.max(50, Math.floor(headersTimeout / 4))),
      },
      handle,
    );
    // Without this, Node sends `100 Continue` before the handler sees the request, inviting a body
    // the handler may refuse (413 for its declared length); now it goes only when the handler reads.
    server.on('checkContinue', (incoming: IncomingMessage, outgoing: ServerResponse) => handle(incoming, outgoing, true));
    server.maxConnections = maxConnections;
    server.on('connection', (socket: Socket) => {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
    });
    // Node hands CONNECT to this event, not to the handler, and drops the connection when nobody listens.
    server.on('connect', (_request: IncomingMessage, socket: Duplex) => refuseConnect(socket));
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
              server.close(() => done());
              // Streamed responses end where they stand; every other connection (idle, still
              // sending its request, or waiting for the handler's answer) is closed at once.
              const ending = new Set<Socket>();
              for (const exchange of exchanges) {
                const socket = exchange.close();
                if (socket) ending.add(socket);
              }
              for (const socket of sockets) if (!ending.has(socket)) socket.destroy();
            }),
        });
      });
    });
  });
}

/** Answers a CONNECT request (a tunnel, which this server never opens) with 405 and closes the connection. */
function refuseConnect(socket: Duplex): void {
  socket.on('error', () => socket.destroy());
  const error = new AgentError('METHOD_NOT_ALLOWED', 'CONNECT requests are not served', { details: { method: 'CONNECT' } });
  const body = JSON.stringify(error.toJSON());
  socket.end(
    `HTTP/1.1 405 Method Not Allowed\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
}

function nonNegative(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < 0) throw new RangeError(`${name} must be a number of milliseconds of at least 0, got ${value}`);
  return value;
}

function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0) throw new RangeError(`${name} must be a positive number, got ${value}`);
  return value;
}
