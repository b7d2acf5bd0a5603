import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentClientError, createAgentClient, type AgentClientOptions, type AgentRun } from './index.js';
import { read } from '../../test/client-runs.js';
import { MAX_UNREAD_EVENTS } from './agent-run.js';

// What a client meets on the wire besides a well-behaved agent server: proxies' pages, answers that
// are not event streams, streams cut or gone silent, events of a newer server. Each answer is
// written by hand on a loopback server, through the legacy protocol (one POST per segment).

const TOKEN = 'ya29.secret-token';

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers) server.closeAllConnections();
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

type Handler = (incoming: IncomingMessage, outgoing: ServerResponse) => void | Promise<void>;

/** A loopback server that reads each request's body, then hands the exchange to `handler`. */
async function listen(handler: Handler): Promise<string> {
  const server = createServer((incoming, outgoing) => {
    incoming.resume();
    incoming.on('end', () => {
      Promise.resolve(handler(incoming, outgoing)).catch(() => outgoing.destroy());
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function client(baseUrl: string, options: Partial<AgentClientOptions> = {}) {
  return createAgentClient({ baseUrl, getAccessToken: () => TOKEN, ...options });
}

async function failureOf(run: AgentRun): Promise<AgentClientError> {
  const error = await run.result.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(AgentClientError);
  return error as AgentClientError;
}

const data = (event: object): string => `data: ${JSON.stringify(event)}\n\n`;
const thought = (text: string): object => ({ thought: { text } });
const complete = { complete: { result: { success: true, outcomes: { parts: [{ text: 'ok' }] } } } };

function openStream(outgoing: ServerResponse): void {
  outgoing.writeHead(200, { 'content-type': 'text/event-stream' });
}

const NGINX_502 = `<html>
<head><title>502 Bad Gateway</title></head>
<body>
<center><h1>502 Bad Gateway</h1></center>
<hr><center>nginx</center>
</body>
</html>
`;

describe('the client facing a hostile or broken server', () => {
  it('reports a JSON refusal with its message and code', async () => {
    const baseUrl = await listen((incoming, outgoing) => {
      outgoing.writeHead(403, { 'content-type': 'application/json' });
      outgoing.end(JSON.stringify({ error: { code: 'FORBIDDEN', message: 'This run belongs to someone else', status: 403 } }));
    });
    expect(await failureOf(client(baseUrl).startRun('go'))).toMatchObject({
      kind: 'http',
      status: 403,
      code: 'FORBIDDEN',
      message: '403: This run belongs to someone else',
    });
  });

  it("reports a proxy's HTML error page by its title, not its markup", async () => {
    const baseUrl = await listen((incoming, outgoing) => {
      outgoing.writeHead(502, { 'content-type': 'text/html' });
      outgoing.end(NGINX_502);
    });
    expect(await failureOf(client(baseUrl).startRun('go'))).toMatchObject({
      kind: 'http',
      status: 502,
      code: 'UPSTREAM_ERROR',
      message: '502: Bad Gateway',
    });
  });

  it('reports a refusal with an empty body by its status text', async () => {
    const baseUrl = await listen((incoming, outgoing) => {
      outgoing.writeHead(500);
      outgoing.end();
    });
    expect(await failureOf(client(baseUrl).startRun('go'))).toMatchObject({
      kind: 'http',
      status: 500,
      code: 'INTERNAL',
      message: '500: Internal Server Error',
    });
  });

  it('reads only the start of an endless error body, and shortens it', async () => {
    let closed!: () => void;
    const gone = new Promise<void>((resolve) => (closed = resolve));
    const baseUrl = await listen(async (incoming, outgoing) => {
      outgoing.on('close', closed);
      outgoing.writeHead(500, { 'content-type': 'text/plain' });
      const line = `${'stack frame '.repeat(100)}\n`;
      while (!outgoing.destroyed) {
        if (!outgoing.write(line)) await new Promise((resolve) => setTimeout(resolve, 1));
      }
    });
    const error = await failureOf(client(baseUrl).startRun('go'));
    expect(error).toMatchObject({ kind: 'http', status: 500, code: 'INTERNAL' });
    expect(error.message.startsWith('500: stack frame stack frame')).toBe(true);
    expect(error.message.length).toBeLessThan(320);
    await gone;
  });

  it('refuses a 200 answer that is not an event stream, saying what it was', async () => {
    const baseUrl = await listen((incoming, outgoing) => {
      if (incoming.url?.startsWith('/json')) {
        outgoing.writeHead(200, { 'content-type': 'application/json' });
        outgoing.end(JSON.stringify({ error: { code: 'UNAUTHENTICATED', message: 'Sign in first' } }));
        return;
      }
      outgoing.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      outgoing.end('<!doctype html><html><head><title>Sign in - Corporate SSO</title></head><body><form></form></body></html>');
    });
    expect(await failureOf(client(baseUrl, { path: '/json' }).startRun('go'))).toMatchObject({
      kind: 'protocol',
      code: 'UNAUTHENTICATED',
      message: `${baseUrl}/json answered 200 with application/json, not an event stream: Sign in first`,
    });
    expect(await failureOf(client(baseUrl, { path: '/sso' }).startRun('go'))).toMatchObject({
      kind: 'protocol',
      message: `${baseUrl}/sso answered 200 with text/html, not an event stream: Sign in - Corporate SSO`,
    });
  });

  it('reads a stream written like sse-starlette: CRLF, a byte order mark, ping comments, data without a space', async () => {
    const baseUrl = await listen((incoming, outgoing) => {
      openStream(outgoing);
      outgoing.write(`\uFEFF: ping\r\n\r\ndata:${JSON.stringify(thought('one'))}\r\n\r\n`);
      outgoing.write(`: ping - 2024-01-01 00:00:00\r\n\r\ndata: ${JSON.stringify(thought('two'))}\r`);
      outgoing.end(`\n\r\ndata: ${JSON.stringify(complete)}\r\n\r\n`);
    });
    expect(await read(client(baseUrl).startRun('go'))).toEqual({ seen: ['one', 'two', 'complete'], error: undefined });
  });

  it('still takes a last event the server did not close with a blank line', async () => {
    const baseUrl = await listen((incoming, outgoing) => {
      openStream(outgoing);
      outgoing.end(data(thought('one')) + `data: ${JSON.stringify(complete)}`);
    });
    const run = client(baseUrl).startRun('go');
    expect(await read(run)).toEqual({ seen: ['one', 'complete'], error: undefined });
    expect((await run.result).success).toBe(true);
  });

  it('fails a stream cut in the middle of an event with a network error, not a complaint about its JSON', async () => {
    const baseUrl = await listen((incoming, outgoing) => {
      openStream(outgoing);
      outgoing.end(`${data(thought('one'))}data: {"thought":{"te`);
    });
    const { seen, error } = await read(client(baseUrl).startRun('go'));
    expect(seen).toEqual(['one']);
    expect(error).toMatchObject({ kind: 'network', message: `The event stream from ${baseUrl}/v1beta1/streamRunAgent ended in the middle of an event` });
  });

  it('fails a stream that goes silent, and a server that never answers, after the idle timeout with TIMEOUT', async () => {
    const baseUrl = await listen((incoming, outgoing) => {
      if (incoming.url?.startsWith('/mute')) return; // Not even a status line.
      openStream(outgoing);
      outgoing.write(data(thought('one')));
      // Then nothing, with the connection open.
    });
    const options = { reconnect: { idleTimeoutMs: 150 } };
    const silent = await read(client(baseUrl, options).startRun('go'));
    expect(silent.seen).toEqual(['one']);
    expect(silent.error).toMatchObject({ kind: 'network', code: 'TIMEOUT', message: `The event stream from ${baseUrl}/v1beta1/streamRunAgent sent nothing for 150 ms` });
    const mute = await failureOf(client(baseUrl, { ...options, path: '/mute' }).startRun('go'));
    expect(mute).toMatchObject({ kind: 'network', code: 'TIMEOUT', message: `${baseUrl}/mute sent no answer for 150 ms` });
  });

  it('passes over an event of a type it does not know, and fails on one that is not JSON', async () => {
    const baseUrl = await listen((incoming, outgoing) => {
      openStream(outgoing);
      if (incoming.url?.startsWith('/garbage')) {
        outgoing.end(data(thought('one')) + 'data: <b>oops</b>\n\n' + data(complete));
        return;
      }
      outgoing.end(data(thought('one')) + data({ hologram: { frames: 3 } }) + data(thought('two')) + data(complete));
    });
    const newer = client(baseUrl).startRun('go');
    expect(await read(newer)).toEqual({ seen: ['one', 'two', 'complete'], error: undefined });
    expect((await newer.result).success).toBe(true);
    const { seen, error } = await read(client(baseUrl, { path: '/garbage' }).startRun('go'));
    expect(seen).toEqual(['one']);
    expect(error).toMatchObject({ kind: 'protocol', message: 'The server sent an event that is not JSON: <b>oops</b>' });
  });

  it('fails a line of many megabytes at limits.maxEventBytes and reads no further', async () => {
    let written = 0;
    let closed!: () => void;
    const gone = new Promise<void>((resolve) => (closed = resolve));
    const baseUrl = await listen(async (incoming, outgoing) => {
      outgoing.on('close', closed);
      openStream(outgoing);
      outgoing.write('data: "');
      const chunk = 'x'.repeat(64 * 1024);
      // An endless line: only the client can end it.
      while (!outgoing.destroyed) {
        written += chunk.length;
        if (!outgoing.write(chunk)) await new Promise((resolve) => setTimeout(resolve, 1));
      }
    });
    const { seen, error } = await read(client(baseUrl, { limits: { maxEventBytes: 4 * 1024 * 1024 } }).startRun('go'));
    expect(seen).toEqual([]);
    expect(error).toMatchObject({ kind: 'protocol', code: 'PAYLOAD_TOO_LARGE' });
    await gone;
    // The limit and what the sockets hold in between, not an ever-growing buffer.
    expect(written).toBeLessThan(16 * 1024 * 1024);
  });

  it('delivers a hundred thousand tiny events in order', async () => {
    const count = 100_000;
    const baseUrl = await listen((incoming, outgoing) => {
      openStream(outgoing);
      let text = '';
      for (let index = 0; index < count; index += 1) text += `data: {"thought":{"text":"${index}"}}\n\n`;
      outgoing.end(text + data(complete));
    });
    let expected = 0;
    let inOrder = true;
    for await (const event of client(baseUrl).startRun('go').events) {
      if (event.type !== 'thought') continue;
      if (event.text !== String(expected)) inOrder = false;
      expected += 1;
    }
    expect(expected).toBe(count);
    expect(inOrder).toBe(true);
  });

  it('stops reading a fast stream while the app is far behind in run.events, and loses nothing', async () => {
    const count = 5_000;
    // Every frame the same length, so the bytes the client took from the body say how many events.
    const frameOf = (index: number): string => data(thought(`${String(index).padStart(5, '0')}${'x'.repeat(1_000)}`));
    const frameBytes = frameOf(0).length;
    const baseUrl = await listen(async (incoming, outgoing) => {
      openStream(outgoing);
      for (let index = 0; index < count; index += 1) {
        if (!outgoing.write(frameOf(index))) await new Promise((resolve) => outgoing.once('drain', resolve));
      }
      outgoing.end(data(complete));
    });
    // The bytes the client pulled from the body, one chunk at a time as it asks for them.
    let pulled = 0;
    const counting: AgentClientOptions['fetch'] = async (input, init) => {
      const response = await fetch(input, init);
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      const body = new ReadableStream<Uint8Array>(
        {
          async pull(controller) {
            const { done, value } = await reader.read();
            if (done) controller.close();
            else {
              pulled += value.byteLength;
              controller.enqueue(value);
            }
          },
          cancel: (reason) => reader.cancel(reason),
        },
        { highWaterMark: 0 },
      );
      return new Response(body, { status: response.status, headers: response.headers });
    };
    const run = client(baseUrl, { fetch: counting }).startRun('go');
    const events = run.events[Symbol.asyncIterator]();
    expect((await events.next()).done).toBe(false);
    // The app dawdles over its first event: wait until the client has pulled as far as the bound
    // and then no more for a while (a busy machine may pause it earlier), or has pulled it all.
    const aheadNow = () => Math.floor(pulled / frameBytes) - 1;
    for (let last = -1, still = 0; (still < 5 || aheadNow() < MAX_UNREAD_EVENTS - 1) && pulled < count * frameBytes; ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      still = pulled === last ? still + 1 : 0;
      last = pulled;
    }
    const ahead = aheadNow();
    // One chunk of the body (64 KiB at most) beyond the bound, not the whole stream.
    expect(ahead).toBeLessThan(MAX_UNREAD_EVENTS + 100);
    let seen = 1;
    let inOrder = true;
    for (let next = await events.next(); !next.done; next = await events.next()) {
      if (next.value.type !== 'thought') continue;
      if (next.value.text.slice(0, 5) !== String(seen).padStart(5, '0')) inOrder = false;
      seen += 1;
    }
    expect(seen).toBe(count);
    expect(inOrder).toBe(true);
    expect((await run.result).success).toBe(true);
  });

  it('does not wait for an app that does not read run.events, or that stopped reading them', async () => {
    const count = 3 * MAX_UNREAD_EVENTS;
    const baseUrl = await listen((incoming, outgoing) => {
      openStream(outgoing);
      let text = '';
      for (let index = 0; index < count; index += 1) text += data(thought(String(index)));
      outgoing.end(text + data(complete));
    });
    expect((await client(baseUrl).startRun('go').result).success).toBe(true);
    const run = client(baseUrl).startRun('go');
    for await (const event of run.events) {
      if (event.type === 'thought') break;
    }
    expect((await run.result).success).toBe(true);
  });

  it('keeps the token and the query of a URL out of its messages', async () => {
    const baseUrl = await listen((incoming, outgoing) => {
      if (incoming.url?.startsWith('/v1beta1/streamRunAgent')) {
        // A redirect to a signed location, whose stream then breaks.
        outgoing.writeHead(307, { location: `/signed/stream?sig=${TOKEN.slice(5)}-signature&alt=sse` });
        outgoing.end();
        return;
      }
      openStream(outgoing);
      outgoing.write(data(thought('one')));
      setTimeout(() => outgoing.destroy(), 20);
    });
    const { seen, error } = await read(client(baseUrl).startRun('go'));
    expect(seen).toEqual(['one']);
    expect(error).toMatchObject({ kind: 'network' });
    expect(error?.message).toContain(`The event stream from ${baseUrl}/signed/stream broke`);
    expect(error?.message).not.toContain('signature');

    const closed = await listen(() => undefined);
    await new Promise((resolve) => servers.pop()?.close(resolve));
    const unreachable = await failureOf(client(closed).startRun('go'));
    expect(unreachable).toMatchObject({ kind: 'network' });
    expect(unreachable.message.startsWith(`Could not reach ${closed}/v1beta1/streamRunAgent: `)).toBe(true);
    expect(unreachable.message).not.toContain('alt=sse');
    expect(unreachable.message).not.toContain(TOKEN);
  });
});
