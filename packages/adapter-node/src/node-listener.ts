import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';

/** A Web-standard request handler, such as the one `createAgentHandler` returns. */
export type WebHandler = (request: Request) => Promise<Response>;

/**
 * Puts a Web handler behind `node:http`: the request body is streamed in, the response streamed
 * out with backpressure, and a client that goes away aborts the request's signal.
 *
 * @example
 * ```ts
 * http.createServer(createNodeListener(createAgentHandler({ createPorts }))).listen(8080);
 * ```
 */
export function createNodeListener(handler: WebHandler): (request: IncomingMessage, response: ServerResponse) => void {
  return (incoming, outgoing) => {
    const controller = new AbortController();
    outgoing.on('close', () => {
      if (!outgoing.writableFinished) controller.abort(new Error('Client disconnected'));
    });
    void serveOne(handler, incoming, outgoing, controller).catch((error: unknown) => {
      if (!outgoing.headersSent) {
        outgoing.writeHead(500, { 'content-type': 'application/json; charset=utf-8' });
        outgoing.end(JSON.stringify({ error: { code: 'INTERNAL', message: messageOf(error), status: 500 } }));
      } else {
        outgoing.destroy(error instanceof Error ? error : new Error(messageOf(error)));
      }
    });
  };
}

async function serveOne(
  handler: WebHandler,
  incoming: IncomingMessage,
  outgoing: ServerResponse,
  controller: AbortController,
): Promise<void> {
  const host = incoming.headers.host ?? 'localhost';
  const url = new URL(incoming.url ?? '/', `http://${host}`);
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
  outgoing.flushHeaders();
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
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!outgoing.write(value)) {
        await new Promise<void>((resolve) => {
          const settle = (): void => {
            outgoing.off('drain', settle);
            outgoing.off('close', settle);
            resolve();
          };
          outgoing.on('drain', settle);
          outgoing.on('close', settle);
        });
      }
      if (controller.signal.aborted) return;
    }
    outgoing.end();
  } finally {
    controller.signal.removeEventListener('abort', stop);
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
}

/**
 * Serves a Web handler on `node:http`.
 *
 * @example
 * ```ts
 * const server = await serve({ handler, port: 8080 });
 * console.log(server.url);
 * ```
 */
export function serve(options: ServeOptions): Promise<RunningServer> {
  const server = createServer(createNodeListener(options.handler));
  const host = options.host ?? '127.0.0.1';
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : (options.port ?? 0);
      resolve({
        url: `http://${host}:${port}`,
        port,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
