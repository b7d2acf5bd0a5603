import { Agent, createServer, request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AgentError } from '@org/core';
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

/** Like {@link rawExchange}, but also resolves when the connection ends in an error (a reset), with what arrived before. */
function rawAnswer(port: number, text: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(received));
  });
}

/**
 * Sends everything before reading anything, as many simple clients do (they read the answer once
 * the request is out), and resolves with what the server sent until it closed, and the error, if any.
 */
function sendAllThenRead(port: number, text: string): Promise<{ received: string; error: string | undefined }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.pause();
    let received = '';
    let error: string | undefined;
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', (failure: NodeJS.ErrnoException) => (error ??= failure.code ?? failure.message));
    socket.on('close', () => resolve({ received, error }));
    socket.write(text, (failure) => {
      if (!failure) socket.resume();
    });
  });
}

/** Waits, turn by turn of the event loop (no timers), until `check` holds; whether it did. */
async function settles(check: () => boolean): Promise<boolean> {
  for (let turn = 0; turn < 2000 && !check(); turn += 1) await new Promise((resolve) => setImmediate(resolve));
  return check();
}

/** A model that thinks for a long time, one short thought after another. */
function endlessThinker() {
  return createScriptedBackendClient(() => Array.from({ length: 2000 }, (_, index) => thoughtChunk(`t${index}`)), { chunkDelayMs: 20 });
}

const START_BODY = JSON.stringify({ segments: [{ type: 'text', text: 'think' }] });
const START_REQUEST = `POST /v1beta1/streamRunAgent HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/json\r\ncontent-length: ${START_BODY.length}\r\n\r\n${START_BODY}`;

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

  it('answers TRACE and CONNECT, which a Web Request cannot carry, with 405 without calling the handler', async () => {
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
    // Node hands CONNECT to the server's `connect` event, never to the handler.
    const tunnel = await rawExchange(server.port, 'CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n');
    expect(tunnel).toMatch(/^HTTP\/1\.1 405 /);
    expect(tunnel).toContain('"code":"METHOD_NOT_ALLOWED","message":"CONNECT requests are not served"');
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
    const reported: unknown[] = [];
    server = await serve({
      handler: async () => {
        throw new Error("ENOENT: no such file or directory, open '/srv/secret/state.json' (key=AIzaSyA-123)");
      },
      onError: (error) => reported.push(error),
    });
    const response = await fetch(`${server.url}/x`);
    expect(response.status).toBe(500);
    expect(await response.json()).toEqual({ error: { code: 'INTERNAL', message: 'The server failed to answer this request', status: 500 } });
    // The operator learns what the client is not told.
    expect(reported).toEqual([expect.objectContaining({ message: expect.stringContaining('/srv/secret/state.json') })]);
  });
  it('answers two Host headers, or one that names no host, with 400, and gives the handler any host name the client sent', async () => {
    const seen: string[] = [];
    server = await serve({
      handler: async (request) => {
        seen.push(new URL(request.url).host);
        return new Response('ok');
      },
    });
    const ask = (hostLines: string, version = '1.1'): Promise<string> =>
      rawExchange(server!.port, `GET /x HTTP/${version}\r\n${hostLines}Connection: close\r\n\r\n`);
    for (const host of ['x:99999', '[::1]:70000', '1.2.3.4.5', 'exa mple', 'user@example.test', 'example.test/evil', '[::1']) {
      const answer = await ask(`Host: ${host}\r\n`);
      expect(answer, host).toMatch(/^HTTP\/1\.1 400 /);
      expect(answer, host).toContain(`"code":"BAD_REQUEST","message":"The Host header \\"${host}\\" is not a host name or address with an optional port"`);
    }
    const twice = await ask('Host: example.test\r\nHost: other.test\r\n');
    expect(twice).toMatch(/^HTTP\/1\.1 400 /);
    expect(twice).toContain('"message":"The request has more than one Host header"');
    // Node's parser refuses an HTTP/1.1 request without one.
    expect(await ask('')).toMatch(/^HTTP\/1\.1 400 /);
    expect(seen).toEqual([]);
    for (const host of ['my_service:8080', 'Example.Test', '127.0.0.1:1', '[::1]:8080']) {
      expect(await ask(`Host: ${host}\r\n`), host).toMatch(/^HTTP\/1\.1 200 /);
    }
    // HTTP/1.0 may leave it out.
    expect(await ask('', '1.0')).toMatch(/^HTTP\/1\.1 200 /);
    expect(seen).toEqual(['my_service:8080', 'example.test', '127.0.0.1:1', '[::1]:8080', 'localhost']);
  });

  it('lets a page served under a host name with an underscore call the agent as its own origin', async () => {
    server = await serve({ handler: createAgentHandler({ createPorts: greeterPorts() }) });
    const body = JSON.stringify({ start: { segments: [{ textSegment: { text: 'Greet me' } }] } });
    const answer = await rawExchange(
      server.port,
      `POST /v1beta1/streamRunAgent?alt=sse HTTP/1.1\r\nHost: agent_dev:8080\r\nOrigin: http://agent_dev:8080\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toContain('"waitForInput"');
  });

  it('answers malformed messages with 400 before the handler, and fails the body a handler reads when it turns malformed', async () => {
    let called = 0;
    let bodyFailures = 0;
    server = await serve({
      handler: async (request) => {
        called += 1;
        await request.text().catch(() => (bodyFailures += 1));
        return new Response('ok');
      },
    });
    const malformed = {
      'Content-Length and Transfer-Encoding': 'POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n',
      'two Content-Lengths': 'POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd',
      'a folded header': 'GET /x HTTP/1.1\r\nHost: localhost\r\nX-A: a\r\n  folded\r\n\r\n',
      'NUL in a header': 'GET /x HTTP/1.1\r\nHost: localhost\r\nX-A: a\0b\r\n\r\n',
      'bare line feeds': 'GET /x HTTP/1.1\nHost: localhost\n\n',
      'an unknown method': 'BREW /x HTTP/1.1\r\nHost: localhost\r\n\r\n',
      'not HTTP at all': '\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03',
    };
    for (const [name, text] of Object.entries(malformed)) expect(await rawAnswer(server.port, text), name).toMatch(/^HTTP\/1\.1 400 /);
    expect(called).toBe(0);
    // Chunked bodies that are malformed from the start, or turn so while the handler reads them:
    // the client gets 400 and the handler's read fails rather than hangs.
    const bad = 'POST /x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n';
    expect(await rawAnswer(server.port, bad)).toMatch(/^HTTP\/1\.1 400 /);
    expect(await settles(() => bodyFailures === 1)).toBe(true);
    const broken = new Promise<string>((resolve) => {
      const socket = connect(server!.port, '127.0.0.1', () => socket.write('POST /x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n'));
      let received = '';
      socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
      socket.on('error', () => undefined);
      socket.on('close', () => resolve(received));
      void settles(() => called === 2).then(() => socket.write('zz\r\nnot a chunk\r\n'));
    });
    expect(await broken).toMatch(/^HTTP\/1\.1 400 /);
    expect(await settles(() => bodyFailures === 2)).toBe(true);
    expect(await (await fetch(`${server.url}/x`)).text()).toBe('ok');
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

  it('answers headers sent a byte at a time, a body that trickles and a connection that sends nothing with 408, while others are served', async () => {
    server = await serve({ handler: async (request) => new Response(`ok ${(await request.text()).length}`), headersTimeoutMs: 300, requestTimeoutMs: 600 });
    const port = server.port;
    /** Opens a connection that sends `text` one byte every few ms, for ever; resolves with the answer once the server closes it. */
    const drip = (text: string): Promise<string> =>
      new Promise((resolve) => {
        const socket = connect(port, '127.0.0.1');
        let sent = 0;
        let received = '';
        const timer = setInterval(() => {
          if (!socket.destroyed) socket.write(text.charAt(sent++ % text.length));
        }, 5);
        socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
        socket.on('error', () => undefined);
        socket.on('close', () => {
          clearInterval(timer);
          resolve(received);
        });
      });
    const slowloris = drip(`GET / HTTP/1.1\r\nHost: localhost\r\n${'X-Padding: 0\r\n'.repeat(1000)}`);
    const trickle = drip(`POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000000\r\n\r\n${'x'.repeat(100_000)}`);
    const silent = rawAnswer(port, '');
    expect(await (await fetch(`${server.url}/`, { method: 'POST', body: 'hello' })).text()).toBe('ok 5');
    expect(await slowloris).toMatch(/^HTTP\/1\.1 408 /);
    expect(await silent).toMatch(/^HTTP\/1\.1 408 /);
    expect(await trickle).toMatch(/^HTTP\/1\.1 408 /);
    expect(await (await fetch(`${server.url}/`, { method: 'POST', body: 'again' })).text()).toBe('ok 5');
  });

  it('answers huge headers, too many headers and a URL of megabytes with 431 without calling the handler', async () => {
    let called = 0;
    server = await serve({
      handler: async () => {
        called += 1;
        return new Response('ok');
      },
    });
    const requests = {
      'a 20 KB header': `GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      '5,000 headers': `GET / HTTP/1.1\r\nHost: localhost\r\n${'X-A: b\r\n'.repeat(5000)}\r\n`,
      'a 2 MB URL': `GET /${'a'.repeat(2_000_000)} HTTP/1.1\r\nHost: localhost\r\n\r\n`,
    };
    for (const [name, text] of Object.entries(requests)) expect(await rawAnswer(server.port, text), name).toMatch(/^HTTP\/1\.1 431 /);
    expect(called).toBe(0);
    // Many headers that fit in the limit are served.
    expect(await rawExchange(server.port, `GET / HTTP/1.1\r\nHost: localhost\r\n${'X-A: b\r\n'.repeat(1000)}Connection: close\r\n\r\n`)).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('answers a body over the limit with 413 even to a client that sends all of it before reading, declared or chunked, and keeps the connection', async () => {
    server = await serve({ handler: createAgentHandler({ createPorts: greeterPorts(), maxBodyBytes: 1000 }) });
    const big = 'x'.repeat(4 * 1024 * 1024);
    const head = 'POST /v1beta1/streamRunAgent HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/json\r\n';
    const bodies = {
      declared: `${head}content-length: ${big.length}\r\n\r\n${big}`,
      chunked: `${head}transfer-encoding: chunked\r\n\r\n${big.length.toString(16)}\r\n${big}\r\n0\r\n\r\n`,
    };
    // A second request on the same connection once the body is out.
    const next = 'GET /v1beta1/streamRunAgent HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n';
    for (const [name, text] of Object.entries(bodies)) {
      const { received, error } = await sendAllThenRead(server.port, text + next);
      expect(error, name).toBeUndefined();
      expect(received, name).toMatch(/^HTTP\/1\.1 413 [\s\S]*"code":"PAYLOAD_TOO_LARGE"/);
      expect(received, name).toMatch(/HTTP\/1\.1 405 [\s\S]*"code":"METHOD_NOT_ALLOWED"/);
    }
  });

  it('fails a read of the request body that goes on after the response ended, rather than leave it waiting', async () => {
    let late: Promise<string> | undefined;
    server = await serve({
      handler: async (request) => {
        const reader = (request.body as ReadableStream<Uint8Array>).getReader();
        await reader.read();
        late = (async () => {
          while (!(await reader.read()).done);
          return 'ended';
        })().catch((error: Error) => `failed: ${error.message}`);
        return new Response('early');
      },
    });
    const socket = connect(server.port, '127.0.0.1', () =>
      socket.write('POST /x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n'),
    );
    socket.on('error', () => undefined);
    let received = '';
    await new Promise<void>((resolve) =>
      socket.on('data', (chunk: Buffer) => {
        received += chunk.toString();
        if (received.includes('early')) resolve();
      }),
    );
    try {
      expect(await late).toBe('failed: The response ended before the request body was read');
    } finally {
      socket.destroy();
    }
  });

  it('refuses timeouts and caps that are not positive numbers', () => {
    expect(() => serve({ handler: async () => new Response(), requestTimeoutMs: 0 })).toThrow(/requestTimeoutMs must be a positive number/);
    expect(() => serve({ handler: async () => new Response(), maxConnections: Number.NaN })).toThrow(/maxConnections/);
    expect(() => serve({ handler: async () => new Response(), flushDelayMs: -1 })).toThrow(/flushDelayMs must be a number of milliseconds of at least 0/);
    expect(() => serve({ handler: async () => new Response(), sendTimeoutMs: 0 })).toThrow(/sendTimeoutMs must be a positive number/);
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
  it('disconnects a client that reads nothing for sendTimeoutMs, aborting its request and cancelling the body', async () => {
    let aborted = false;
    let cancelled = false;
    const chunk = new Uint8Array(64 * 1024).fill(97);
    server = await serve({
      sendTimeoutMs: 200,
      handler: async (request) => {
        request.signal.addEventListener('abort', () => (aborted = true));
        return new Response(
          new ReadableStream<Uint8Array>({
            pull(controller) {
              controller.enqueue(chunk);
            },
            cancel() {
              cancelled = true;
            },
          }),
        );
      },
    });
    const socket = connect(server.port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.write('GET /endless HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n');
    socket.pause();
    await expect.poll(() => aborted && cancelled, { timeout: 10_000 }).toBe(true);
    // Once it reads again, the client finds the connection closed.
    const closed = new Promise((resolve) => socket.on('close', resolve));
    socket.resume();
    await closed;
  });

  it('cancels the run of each client that leaves mid-stream, and keeps no timer or socket of theirs', async () => {
    const backend = endlessThinker();
    server = await serve({ handler: createAgentHandler({ createPorts: () => ({ backend, store: createMemoryInteractionStore() }) }) });
    const resources = (): { timers: number; sockets: number } => {
      const names = process.getActiveResourcesInfo();
      return { timers: names.filter((name) => name === 'Timeout').length, sockets: names.filter((name) => name === 'TCPSocketWrap').length };
    };
    const before = resources();
    const leavers = Array.from(
      { length: 20 },
      () =>
        new Promise<void>((resolve, reject) => {
          const socket = connect(server!.port, '127.0.0.1', () => socket.write(START_REQUEST));
          let text = '';
          socket.on('data', (chunk: Buffer) => {
            text += chunk.toString();
            if (!text.includes('"thought"')) return;
            socket.destroy();
            resolve();
          });
          socket.on('error', reject);
        }),
    );
    await Promise.all(leavers);
    expect(await settles(() => backend.abortedCount === 20)).toBe(true);
    // Nothing of theirs is left: not a keep-alive timer, not a socket.
    expect(await settles(() => resources().timers <= before.timers && resources().sockets <= before.sockets)).toBe(true);
  });

  it('writes what a body yielded before it failed, then cuts the response so the client sees it incomplete', async () => {
    const encoder = new TextEncoder();
    const reported: unknown[] = [];
    server = await serve({
      flushDelayMs: 1000,
      onError: (error) => reported.push(error),
      handler: async () =>
        new Response(
          new ReadableStream<Uint8Array>({
            async start(controller) {
              controller.enqueue(encoder.encode('data: 1\n\n'));
              controller.enqueue(encoder.encode('data: 2\n\n'));
              await new Promise((resolve) => setImmediate(resolve));
              controller.error(new Error("ENOENT: open '/srv/secret/state.json'"));
            },
          }),
          { headers: { 'content-type': 'text/event-stream' } },
        ),
    });
    const answer = await rawAnswer(server.port, 'GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(chunkFrames(answer).join('')).toBe('data: 1\n\ndata: 2\n\n');
    // No last chunk: the client can tell the response did not end.
    expect(answer.endsWith('0\r\n\r\n')).toBe(false);
    expect(answer).not.toContain('/srv/secret');
    expect(reported).toHaveLength(1);
  });
});

describe('adapter-node: closing', () => {
  it('ends open event streams cleanly, cancels their runs, closes idle and half-sent connections, and resolves', async () => {
    const backend = endlessThinker();
    const running = await serve({ handler: createAgentHandler({ createPorts: () => ({ backend, store: createMemoryInteractionStore() }) }) });
    const agent = new Agent({ keepAlive: true });
    try {
      // A kept-alive connection, idle in the client's pool after its answer.
      let idle: Socket | undefined;
      await new Promise<void>((resolve, reject) => {
        const request = httpRequest(`${running.url}/nowhere`, { agent }, (response) => {
          response.resume();
          response.on('end', resolve);
        });
        request.on('socket', (socket) => (idle = socket as Socket));
        request.on('error', reject);
        request.end();
      });
      const idleClosed = new Promise((resolve) => idle?.once('close', resolve));
      // A connection still sending its request.
      const halfSent = rawAnswer(running.port, 'POST /v1beta1/streamRunAgent HTTP/1.1\r\nHost: localhost\r\n');
      // An event stream in full flow.
      const stream = new Promise<{ text: string; complete: boolean; aborted: boolean }>((resolve, reject) => {
        const request = httpRequest(
          `${running.url}/v1beta1/streamRunAgent`,
          { method: 'POST', agent, headers: { 'content-type': 'application/json' } },
          (response) => {
            let text = '';
            let aborted = false;
            let closing: Promise<void> | undefined;
            response.on('data', (chunk: Buffer) => {
              text += chunk.toString();
              if (text.includes('"thought"')) closing ??= running.close();
            });
            response.on('aborted', () => (aborted = true));
            response.on('error', () => undefined);
            response.on('close', () => void closing?.then(() => resolve({ text, complete: response.complete, aborted })));
          },
        );
        request.on('error', reject);
        request.end(START_BODY);
      });
      const { text, complete, aborted } = await stream;
      expect({ complete, aborted }).toEqual({ complete: true, aborted: false });
      expect(text).toContain('"thought"');
      expect(backend.abortedCount).toBe(1);
      await idleClosed;
      expect(await halfSent).toBe('');
    } finally {
      agent.destroy();
      await running.close();
    }
  });

  it('does not wait for a client that reads nothing', async () => {
    const chunk = new Uint8Array(64 * 1024).fill(97);
    let produced = 0;
    const running = await serve({
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
    const socket = connect(running.port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.write('GET /endless HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n');
    socket.pause();
    await expect
      .poll(
        async () => {
          const before = produced;
          await new Promise((resolve) => setTimeout(resolve, 100));
          return produced === before && produced > 0;
        },
        { timeout: 10_000, interval: 10 },
      )
      .toBe(true);
    await running.close();
    socket.destroy();
  });
});

/** Resolves with what the server sent on `socket` once `done` holds for it, or the connection closed. */
function readUntil(socket: Socket, done: (received: string) => boolean): Promise<string> {
  return new Promise((resolve) => {
    let received = '';
    const finish = (): void => {
      socket.off('data', onData);
      socket.off('close', finish);
      resolve(received);
    };
    const onData = (chunk: Buffer): void => {
      received += chunk.toString('latin1');
      if (done(received)) finish();
    };
    socket.on('data', onData);
    socket.on('close', finish);
  });
}

describe('adapter-node: handler failures', () => {
  it('tells onError once of a handler that throws and of a body that fails, while the client still sees no detail', async () => {
    const reported: Array<{ message: string; path: string }> = [];
    server = await serve({
      onError: (error, request) => reported.push({ message: (error as Error).message, path: new URL(request.url).pathname }),
      handler: async (request) => {
        if (new URL(request.url).pathname === '/throws') throw new Error("ENOENT: open '/srv/secret/state.json'");
        return new Response(
          new ReadableStream<Uint8Array>({
            async start(controller) {
              controller.enqueue(new TextEncoder().encode('data: 1\n\n'));
              await new Promise((resolve) => setImmediate(resolve));
              controller.error(new Error('The model stream broke'));
            },
          }),
        );
      },
    });
    const thrown = await fetch(`${server.url}/throws`);
    expect(thrown.status).toBe(500);
    expect(await thrown.text()).not.toContain('/srv/secret');
    expect(reported).toEqual([{ message: "ENOENT: open '/srv/secret/state.json'", path: '/throws' }]);
    const cut = await rawAnswer(server.port, 'GET /stream HTTP/1.1\r\nHost: localhost\r\n\r\n');
    expect(cut).toMatch(/^HTTP\/1\.1 200 /);
    expect(await settles(() => reported.length === 2)).toBe(true);
    expect(reported[1]).toEqual({ message: 'The model stream broke', path: '/stream' });
    // Once each, never again for the same failure.
    expect(await settles(() => reported.length > 2)).toBe(false);
  });

  it('keeps serving when onError itself throws or rejects', async () => {
    let calls = 0;
    server = await serve({
      onError: (error) => {
        calls += 1;
        if (calls === 1) throw new Error('The log sink is down');
        return Promise.reject(error) as unknown as void;
      },
      handler: async (request) => {
        if (new URL(request.url).pathname === '/ok') return new Response('fine');
        throw new Error('boom');
      },
    });
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const response = await fetch(`${server.url}/fails`);
      expect(response.status).toBe(500);
      expect(await response.json()).toMatchObject({ error: { code: 'INTERNAL' } });
    }
    expect(calls).toBe(2);
    expect(await (await fetch(`${server.url}/ok`)).text()).toBe('fine');
  });

  it('reports to console.error by default with the method and path only, never the query, headers or body', async () => {
    const spy = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      server = await serve({
        handler: async () => {
          throw new Error('boom');
        },
      });
      const response = await fetch(`${server.url}/v1beta1/files?key=AIzaSyA-query-secret`, {
        method: 'POST',
        headers: { authorization: 'Bearer header-secret' },
        body: 'body-secret',
      });
      expect(response.status).toBe(500);
      expect(spy).toHaveBeenCalledTimes(1);
      const [line, error] = spy.mock.calls[0] as [string, Error];
      expect(line).toContain('POST /v1beta1/files');
      expect(error.message).toBe('boom');
      const logged = JSON.stringify(spy.mock.calls.map((call) => call.map((part) => String(part))));
      for (const secret of ['query-secret', 'header-secret', 'body-secret']) expect(logged).not.toContain(secret);
    } finally {
      spy.mockRestore();
    }
  });

  it('answers an AgentError a handler throws with its code status and JSON, and reports only the 5xx ones', async () => {
    const reported: unknown[] = [];
    const errors: Record<string, AgentError> = {
      '/limited': new AgentError('RATE_LIMITED', 'Too many runs for this user; try again shortly'),
      '/missing': new AgentError('NOT_FOUND', 'No session s-1', { details: { session: 's-1' } }),
      '/store': new AgentError('STORE_ERROR', 'Could not save interaction i-1 (redis: ECONNREFUSED)'),
    };
    server = await serve({
      onError: (error) => reported.push(error),
      handler: async (request) => {
        throw errors[new URL(request.url).pathname];
      },
    });
    const limited = await fetch(`${server.url}/limited`);
    expect(limited.status).toBe(429);
    expect(limited.headers.get('content-type')).toMatch(/^application\/json/);
    expect(limited.headers.get('retry-after')).toBe('1');
    expect(await limited.json()).toEqual({ error: { code: 'RATE_LIMITED', message: 'Too many runs for this user; try again shortly', status: 429 } });
    const missing = await fetch(`${server.url}/missing`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: { code: 'NOT_FOUND', message: 'No session s-1', status: 404, details: { session: 's-1' } } });
    const store = await fetch(`${server.url}/store`);
    expect(store.status).toBe(500);
    expect(await store.json()).toMatchObject({ error: { code: 'STORE_ERROR', status: 500 } });
    expect(reported).toEqual([errors['/store']]);
  });
});

describe('adapter-node: Expect: 100-continue', () => {
  it('answers a declared body over the handler limit with 413 and no 100 Continue, and invites a body under it', async () => {
    server = await serve({ handler: createAgentHandler({ createPorts: greeterPorts(), maxBodyBytes: 1000 }) });
    const head = 'POST /v1beta1/streamRunAgent HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/json\r\nexpect: 100-continue\r\n';
    const over = connect(server.port, '127.0.0.1', () => over.write(`${head}content-length: 5000\r\n\r\n`));
    over.on('error', () => undefined);
    const refused = await readUntil(over, (received) => received.includes('"code"'));
    over.destroy();
    expect(refused).toMatch(/^HTTP\/1\.1 413 [\s\S]*"code":"PAYLOAD_TOO_LARGE"/);
    expect(refused).not.toContain('100 Continue');
    // Under the limit: the client is invited, sends its body, and the run is served.
    const under = connect(server.port, '127.0.0.1', () => under.write(`${head}content-length: ${START_BODY.length}\r\nconnection: close\r\n\r\n`));
    under.on('error', () => undefined);
    expect(await readUntil(under, (received) => received.includes('\r\n\r\n'))).toBe('HTTP/1.1 100 Continue\r\n\r\n');
    under.write(START_BODY);
    const answer = await readUntil(under, () => false);
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toContain('"thought"');
  });
});
