import { createServer } from 'node:http';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgentHandler } from '@org/core/http';
import { createMemoryInteractionStore, createScriptedBackendClient, functionCallChunk, thoughtChunk } from '@org/core/testing';
import { createHandler } from './create-handler.js';
import { serve, type RunningServer } from './node-listener.js';

let server: RunningServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function readEvents(response: Response): Promise<Array<Record<string, Record<string, unknown>>>> {
  const text = await response.text();
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice(6)));
}

describe('adapter-node', () => {
  it('serves a run over real HTTP, and a resume from a second server sharing the store', async () => {
    const store = createMemoryInteractionStore();
    const backend = createScriptedBackendClient((request) => {
      const answer = request.body.contents.at(-1)?.parts[0]?.functionResponse?.response?.user_input;
      return typeof answer === 'string'
        ? [functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${answer}` })]
        : [thoughtChunk('Asking'), functionCallChunk('chat_request_user_input', { user_message: 'Name?' })];
    });
    const createPorts = () => ({ backend, store });
    server = await serve({ handler: createAgentHandler({ createPorts }) });
    const other = createServer(createHandler({ createPorts }));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const otherPort = (other.address() as { port: number }).port;
    try {
      const first = await fetch(`${server.url}/v1beta1/streamRunAgent?alt=sse`, {
        method: 'POST',
        headers: { authorization: 'Bearer t', 'content-type': 'application/json' },
        body: JSON.stringify({ start: { segments: [{ textSegment: { text: 'Greet me' } }] } }),
      });
      expect(first.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const events = await readEvents(first);
      const interactionId = events.at(-1)?.waitForInput?.interactionId as string;
      expect(interactionId).toBeTruthy();
      const second = await fetch(`http://127.0.0.1:${otherPort}/api/agent/run`, {
        method: 'POST',
        headers: { authorization: 'Bearer t', 'content-type': 'application/json' },
        body: JSON.stringify({ resume: { interactionId, response: { input: { parts: [{ text: 'Ada' }] } } } }),
      });
      expect((await readEvents(second)).at(-1)).toMatchObject({ complete: { result: { success: true } } });
    } finally {
      other.closeAllConnections();
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it('answers a malformed body with 400 JSON', async () => {
    server = await serve({
      handler: createAgentHandler({ createPorts: () => ({ backend: createScriptedBackendClient([]), store: createMemoryInteractionStore() }) }),
    });
    const response = await fetch(`${server.url}/v1beta1/streamRunAgent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"segments": 5}',
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { code: 'BAD_REQUEST', message: expect.stringMatching(/^segments: /) } });
  });

  it('streams events before the run ends and cancels the model request when the client disconnects', async () => {
    const backend = createScriptedBackendClient([[thoughtChunk('a'), thoughtChunk('b'), thoughtChunk('c'), thoughtChunk('d'), thoughtChunk('e')]], {
      chunkDelayMs: 60,
    });
    server = await serve({ handler: createAgentHandler({ createPorts: () => ({ backend, store: createMemoryInteractionStore() }) }) });
    const controller = new AbortController();
    const response = await fetch(`${server.url}/v1beta1/streamRunAgent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ segments: [{ type: 'text', text: 'slow' }] }),
      signal: controller.signal,
    });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    while (!text.includes('"thought"')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).toContain('"thought":{"text":"a"}');
    controller.abort();
    await expect.poll(() => backend.abortedCount, { timeout: 5_000 }).toBe(1);
  });
});

/** Sends raw bytes on one socket and resolves with everything the server sent until it closed. */
function rawExchange(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
    socket.on('error', reject);
    socket.on('close', () => resolve(received));
  });
}

function greeterPorts() {
  const store = createMemoryInteractionStore();
  const backend = createScriptedBackendClient((request) => {
    const answer = request.body.contents.at(-1)?.parts[0]?.functionResponse?.response?.user_input;
    return typeof answer === 'string'
      ? [functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${answer}` })]
      : [thoughtChunk('Asking'), functionCallChunk('chat_request_user_input', { user_message: 'Name?' })];
  });
  return () => ({ backend, store });
}

async function normalRun(url: string): Promise<Array<Record<string, Record<string, unknown>>>> {
  const response = await fetch(`${url}/v1beta1/streamRunAgent?alt=sse`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ start: { segments: [{ textSegment: { text: 'Greet me' } }] } }),
  });
  return readEvents(response);
}

describe('adapter-node: request targets', () => {
  it('refuses absolute-form targets, dot segments and their encodings with 400, and keeps //host a path', async () => {
    const seen: string[] = [];
    server = await serve({
      handler: async (request) => {
        seen.push(request.url);
        return new Response(new URL(request.url).pathname);
      },
    });
    const refused = [
      'GET http://127.0.0.1:1/v1beta1/x HTTP/1.1',
      'GET /v1beta1/../../etc/passwd HTTP/1.1',
      'GET /v1beta1/%2e%2e/admin HTTP/1.1',
      'GET /v1beta1/.%2E/admin HTTP/1.1',
      'GET /v1beta1/./x HTTP/1.1',
      'GET /v1beta1\\..\\admin HTTP/1.1',
    ];
    for (const line of refused) {
      const answer = await rawExchange(server.port, `${line}\r\nHost: localhost\r\n\r\n`);
      expect(answer, line).toMatch(/^HTTP\/1\.1 400 /);
      expect(answer, line).toContain('"code":"BAD_REQUEST"');
    }
    // Node's parser itself refuses the authority form.
    expect(await rawExchange(server.port, 'GET 127.0.0.1:1 HTTP/1.1\r\nHost: localhost\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /);
    expect(seen).toEqual([]);
    const doubleSlash = await rawExchange(server.port, 'GET //127.0.0.1:1/v1beta1/x HTTP/1.1\r\nHost: localhost:9\r\nConnection: close\r\n\r\n');
    expect(doubleSlash).toMatch(/^HTTP\/1\.1 200 /);
    expect(seen).toEqual(['http://localhost:9//127.0.0.1:1/v1beta1/x']);
    expect(doubleSlash).toContain('//127.0.0.1:1/v1beta1/x');
  });

  it('answers TRACE, which a Web Request cannot carry, with 405 without calling the handler', async () => {
    let called = 0;
    server = await serve({
      handler: async () => {
        called += 1;
        return new Response('ok');
      },
    });
    const answer = await rawExchange(server.port, 'TRACE /v1beta1/streamRunAgent HTTP/1.1\r\nHost: localhost\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 405 /);
    expect(answer).toContain('"code":"METHOD_NOT_ALLOWED","message":"TRACE requests are not served"');
    expect(called).toBe(0);
    expect(await (await fetch(`${server.url}/x`)).text()).toBe('ok');
  });

  it('with allowedHosts, refuses a request for another host (a page re-pointed at loopback) with 403', async () => {
    let called = 0;
    server = await serve({
      allowedHosts: ['agent.example.test', '.dev.test'],
      handler: async () => {
        called += 1;
        return new Response('ok');
      },
    });
    const answered = async (host: string): Promise<string> =>
      rawExchange(server!.port, `GET /v1beta1/x HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    for (const host of ['localhost:1', 'LOCALHOST', 'app.localhost', '127.0.0.1:8080', '[::1]:8080', 'agent.example.test', 'Agent.Example.Test.:80', 'dev.test', 'a.b.dev.test']) {
      expect(await answered(host), host).toMatch(/^HTTP\/1\.1 200 /);
    }
    expect(called).toBe(9);
    for (const host of ['evil.example:8080', 'agent.example.test.evil.example', 'notdev.test', 'localhost.evil.example', '127.0.0.1.nip.io']) {
      const answer = await answered(host);
      expect(answer, host).toMatch(/^HTTP\/1\.1 403 /);
      expect(answer, host).toContain(`"code":"FORBIDDEN","message":"This server does not answer to the host \\"${host.replace(/:\d+$/, '')}\\"; add it to the allowed hosts"`);
    }
    expect(called).toBe(9);
    // Without the option every host is served, as behind a reverse proxy.
    await server.close();
    server = await serve({ handler: async () => new Response('ok') });
    expect(await rawExchange(server.port, 'GET /x HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('answers a handler that throws with a 500 that names no file and no secret', async () => {
    server = await serve({
      handler: async () => {
        throw new Error("ENOENT: no such file or directory, open '/srv/secret/state.json' (key=AIzaSyA-123)");
      },
    });
    const response = await fetch(`${server.url}/x`);
    expect(response.status).toBe(500);
    expect(await response.json()).toEqual({ error: { code: 'INTERNAL', message: 'The server failed to answer this request', status: 500 } });
  });
});

describe('adapter-node: connection limits', () => {
  it('closes 1,000 never-ending bodies with 408 after the request timeout, while a normal run goes through', async () => {
    server = await serve({ handler: createAgentHandler({ createPorts: greeterPorts() }), requestTimeoutMs: 1500, headersTimeoutMs: 1000 });
    const port = server.port;
    const opened = performance.now();
    const slow = Array.from({ length: 1000 }, () =>
      new Promise<{ answer: string; closedAfterMs: number }>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () =>
          socket.write(
            'POST /v1beta1/streamRunAgent HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\n\r\n{"start":',
          ),
        );
        let answer = '';
        socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
        socket.on('error', reject);
        socket.on('close', () => resolve({ answer, closedAfterMs: performance.now() - opened }));
      }),
    );
    // While every slow socket is still open, a run starts and suspends as usual.
    const events = await normalRun(server.url);
    expect(events.at(-1)).toHaveProperty('waitForInput');
    const results = await Promise.all(slow);
    expect(results.every((result) => result.answer.startsWith('HTTP/1.1 408'))).toBe(true);
    const closing = results.map((result) => result.closedAfterMs).sort((a, b) => a - b);
    console.info(`1000 slow bodies closed with 408 between ${Math.round(closing[0] ?? 0)} and ${Math.round(closing.at(-1) ?? 0)} ms (request timeout 1500 ms)`);
    // And the server is as good as new afterwards.
    expect((await normalRun(server.url)).at(-1)).toHaveProperty('waitForInput');
  }, 20_000);

  it('holds at most maxConnections sockets, and serves again once slow ones time out', async () => {
    server = await serve({ handler: async () => new Response('ok'), maxConnections: 3, headersTimeoutMs: 500, requestTimeoutMs: 500 });
    const port = server.port;
    const holders = Array.from({ length: 3 }, () =>
      new Promise<string>((resolve) => {
        const socket = connect(port, '127.0.0.1', () => socket.write('GET / HTTP/1.1\r\nHost: localhost\r\n'));
        let answer = '';
        socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
        socket.on('error', () => undefined);
        socket.on('close', () => resolve(answer));
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    // A fourth connection is closed at once, with nothing read.
    expect(await rawExchange(port, 'GET / HTTP/1.1\r\nHost: localhost\r\n\r\n')).toBe('');
    expect((await Promise.all(holders)).every((answer) => answer.startsWith('HTTP/1.1 408'))).toBe(true);
    expect(await (await fetch(`${server.url}/`)).text()).toBe('ok');
  });

  it('refuses timeouts and caps that are not positive numbers', () => {
    expect(() => serve({ handler: async () => new Response(), requestTimeoutMs: 0 })).toThrow(/requestTimeoutMs must be a positive number/);
    expect(() => serve({ handler: async () => new Response(), maxConnections: Number.NaN })).toThrow(/maxConnections/);
    expect(() => serve({ handler: async () => new Response(), flushDelayMs: -1 })).toThrow(/flushDelayMs must be a number of milliseconds of at least 0/);
  });
});

/** Sends a raw GET and reads the raw answer until the connection closes. */
function rawGet(url: string, path: string): Promise<string> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
    socket.write(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n`);
  });
}

/** The chunk frames of a chunked HTTP/1.1 body, in order. */
function chunkFrames(raw: string): string[] {
  let rest = raw.slice(raw.indexOf('\r\n\r\n') + 4);
  const frames: string[] = [];
  for (;;) {
    const lineEnd = rest.indexOf('\r\n');
    const size = Number.parseInt(rest.slice(0, lineEnd), 16);
    if (!(size > 0)) return frames;
    frames.push(rest.slice(lineEnd + 2, lineEnd + 2 + size));
    rest = rest.slice(lineEnd + 2 + size + 2);
  }
}

describe('adapter-node: streaming responses', () => {
  it('writes the events a body yields at once as one chunk, in order, and the rest as they come', async () => {
    const encoder = new TextEncoder();
    server = await serve({
      handler: async () =>
        new Response(
          new ReadableStream<Uint8Array>({
            async start(controller) {
              for (let index = 0; index < 1000; index += 1) controller.enqueue(encoder.encode(`data: {"n":${index}}\n\n`));
              await new Promise((resolve) => setTimeout(resolve, 30));
              controller.enqueue(encoder.encode('data: "late"\n\n'));
              controller.close();
            },
          }),
          { headers: { 'content-type': 'text/event-stream' } },
        ),
    });
    const frames = chunkFrames(await rawGet(server.url, '/events'));
    const expected = Array.from({ length: 1000 }, (_, index) => `data: {"n":${index}}\n\n`).join('');
    expect(frames).toEqual([expected, 'data: "late"\n\n']);
  });

  it('gathers what a body yields within the flush delay into one write, and writes each event alone without one', async () => {
    const encoder = new TextEncoder();
    const trickle = async () =>
      new Response(
        new ReadableStream<Uint8Array>({
          async start(controller) {
            for (let index = 0; index < 20; index += 1) {
              controller.enqueue(encoder.encode(`data: {"n":${index}}\n\n`));
              await new Promise((resolve) => setTimeout(resolve, 2));
            }
            controller.close();
          },
        }),
        { headers: { 'content-type': 'text/event-stream' } },
      );
    const expected = Array.from({ length: 20 }, (_, index) => `data: {"n":${index}}\n\n`);
    server = await serve({ handler: trickle, flushDelayMs: 1000 });
    expect(chunkFrames(await rawGet(server.url, '/events'))).toEqual([expected.join('')]);
    await server.close();
    server = await serve({ handler: trickle, flushDelayMs: 0 });
    const frames = chunkFrames(await rawGet(server.url, '/events'));
    expect(frames.join('')).toBe(expected.join(''));
    expect(frames.length).toBeGreaterThan(5);
  });

  it('sends the status and headers alone when the body has nothing within the flush delay', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    server = await serve({
      flushDelayMs: 5,
      handler: async () =>
        new Response(
          new ReadableStream<Uint8Array>({
            async start(controller) {
              await held;
              controller.enqueue(new TextEncoder().encode('data: "late"\n\n'));
              controller.close();
            },
          }),
          { status: 202, headers: { 'content-type': 'text/event-stream' } },
        ),
    });
    // The response (status and headers) arrives while the body is still held.
    const response = await fetch(`${server.url}/events`);
    expect(response.status).toBe(202);
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    release();
    expect(await response.text()).toBe('data: "late"\n\n');
  });

  it('stops reading the body while a client does not read, so the server never buffers without bound', async () => {
    let produced = 0;
    const chunk = new Uint8Array(64 * 1024).fill(97);
    server = await serve({
      handler: async () =>
        new Response(
          new ReadableStream<Uint8Array>({
            pull(controller) {
              produced += chunk.byteLength;
              controller.enqueue(chunk);
            },
          }),
        ),
    });
    const { port } = new URL(server.url);
    const socket = connect(Number(port), '127.0.0.1');
    socket.write('GET /endless HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n');
    socket.pause();
    try {
      // Whatever the kernel's socket buffers take, the body stops being read once they are full.
      let settled = -1;
      await expect
        .poll(async () => {
          const before = produced;
          await new Promise((resolve) => setTimeout(resolve, 150));
          settled = produced;
          return produced === before && produced > 0;
        }, { timeout: 10_000, interval: 10 })
        .toBe(true);
      expect(settled).toBeLessThan(64 * 1024 * 1024);
    } finally {
      socket.destroy();
    }
  });
});
