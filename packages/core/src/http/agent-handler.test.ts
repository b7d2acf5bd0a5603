import { describe, expect, it, vi } from 'vitest';
import type { AgentPorts } from '../ports/index.js';
import { parseSseStream } from '../sse/index.js';
import {
  createMemoryInteractionStore,
  createScriptedBackendClient,
  functionCallChunk,
  thoughtChunk,
} from '../testing/index.js';
import { createAgentHandler } from './agent-handler.js';

const URL_BASE = 'http://agent.test/v1beta1/streamRunAgent?alt=sse';
/** The endpoint as a caller that did not ask for SSE uses it: request errors come back as JSON. */
const URL_JSON = 'http://agent.test/v1beta1/streamRunAgent';

async function wireEvents(response: Response): Promise<Array<Record<string, Record<string, unknown>>>> {
  const events = [];
  for await (const event of parseSseStream(response.body as ReadableStream<Uint8Array>)) events.push(JSON.parse(event.data));
  return events;
}

function post(body: string, headers: Record<string, string> = {}, url = URL_BASE): Request {
  return new Request(url, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
}

function setup(store: AgentPorts['store'] = createMemoryInteractionStore()) {
  const backend = createScriptedBackendClient((request) => {
    const answer = request.body.contents.at(-1)?.parts[0]?.functionResponse?.response?.user_input;
    return typeof answer === 'string'
      ? [functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${answer}` })]
      : [thoughtChunk('Asking'), functionCallChunk('chat_request_user_input', { user_message: 'Name?' })];
  });
  const tokens: Array<string | undefined> = [];
  const handler = createAgentHandler({
    createPorts: ({ accessToken }): AgentPorts => {
      tokens.push(accessToken);
      return { backend, store };
    },
  });
  return { handler, tokens, backend };
}

describe('createAgentHandler', () => {
  it('takes the Authorization header when the body has no token, or an empty one, on every endpoint', async () => {
    const { handler, tokens } = setup();
    const header = { authorization: 'Bearer header-token' };
    const start = JSON.stringify({ start: { segments: [{ textSegment: { text: 'Greet me' } }] }, accessToken: '' });
    const interactionId = (await wireEvents(await handler(post(start, header)))).at(-1)?.waitForInput?.interactionId as string;
    const resume = JSON.stringify({ resume: { interactionId, response: { input: { parts: [{ text: 'Ada' }] } } }, accessToken: '' });
    expect((await wireEvents(await handler(post(resume, header)))).at(-1)).toMatchObject({ complete: { result: { success: true } } });
    const created = await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }], accessToken: '' }), header, 'http://agent.test/v1beta1/sessions/new'));
    expect(created.status).toBe(200);
    expect(tokens).toEqual(['header-token', 'header-token', 'header-token']);
  });

  it('streams a run as SSE, suspends, and resumes from a second request', async () => {
    const { handler, tokens } = setup();
    const first = await handler(post(JSON.stringify({ start: { segments: [{ textSegment: { text: 'Greet me' } }] }, accessToken: 'tok' })));
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = await wireEvents(first);
    expect(events.map((event) => Object.keys(event)[0])).toEqual(['start', 'sendRequest', 'thought', 'functionCall', 'waitForInput']);
    const interactionId = events.at(-1)?.waitForInput?.interactionId as string;
    expect(typeof interactionId).toBe('string');

    const resumed = await handler(
      post(JSON.stringify({ resume: { interactionId, response: { input: { parts: [{ text: 'Ada' }] } } } }), { authorization: 'Bearer tok' }),
    );
    const tail = await wireEvents(resumed);
    expect(tail.at(-1)).toMatchObject({ complete: { result: { success: true, outcomes: { parts: [{ text: 'Hello Ada' }] } } } });
    expect(tokens).toEqual(['tok', 'tok']);

    const reused = await handler(post(JSON.stringify({ resume: { interactionId, response: {} } }), { authorization: 'Bearer tok' }));
    expect(await wireEvents(reused)).toEqual([{ error: { message: `Unknown interaction ID: ${interactionId}`, code: 'INTERACTION_NOT_FOUND' } }]);
  });

  it('refuses a resume by another token', async () => {
    const { handler } = setup();
    const events = await wireEvents(await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }], accessToken: 'alice' }))));
    const interactionId = events.at(-1)?.waitForInput?.interactionId as string;
    const stolen = await wireEvents(await handler(post(JSON.stringify({ interactionId, response: {}, accessToken: 'mallory' }))));
    expect(stolen).toEqual([{ error: { message: `Interaction ${interactionId} belongs to another user`, code: 'FORBIDDEN' } }]);
  });

  it('runs one of ten resumes sent at once, and tells the others in the protocol\'s words', async () => {
    // A store that answers a moment later, as one over a network does: the resumes overlap.
    const memory = createMemoryInteractionStore();
    const store = new Proxy(memory, {
      get: (target, key) => {
        const value = Reflect.get(target, key) as unknown;
        if (typeof value !== 'function') return value;
        return async (...args: unknown[]) => {
          await new Promise((resolve) => setTimeout(resolve, 1));
          return (value as (...all: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const { handler } = setup(store);
    const events = await wireEvents(await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }], accessToken: 'tok' }))));
    const interactionId = events.at(-1)?.waitForInput?.interactionId as string;
    const body = JSON.stringify({ interactionId, response: { input: { parts: [{ text: 'Ada' }] } }, accessToken: 'tok' });
    const answers = await Promise.all(Array.from({ length: 10 }, async () => wireEvents(await handler(post(body)))));
    expect(answers.filter((answer) => answer.at(-1)?.complete !== undefined)).toHaveLength(1);
    const refusals = answers.filter((answer) => answer.at(-1)?.complete === undefined).map((answer) => answer.map((event) => event.error?.message));
    const words = [`No suspended session for interaction: ${interactionId}`, `Unknown interaction ID: ${interactionId}`];
    expect(refusals).toEqual(Array.from({ length: 9 }, () => [expect.toBeOneOf(words)]));
  });

  it('answers a malformed body with 400 JSON naming the field', async () => {
    const { handler } = setup();
    const notJson = await handler(post('{"start":', {}, URL_JSON));
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toMatchObject({ error: { code: 'BAD_REQUEST', status: 400, message: expect.stringMatching(/^\(body\): not valid JSON/) } });
    const badSegment = await handler(post(JSON.stringify({ start: { segments: [{ type: 'bogus' }] } }), {}, URL_JSON));
    expect(badSegment.status).toBe(400);
    expect(await badSegment.json()).toMatchObject({ error: { message: 'start.segments[0].type: Unknown segment type: bogus' } });
  });

  it('refuses an oversized body with 413, unknown paths with 404 and other methods with 405', async () => {
    const store = createMemoryInteractionStore();
    const handler = createAgentHandler({ createPorts: () => ({ backend: createScriptedBackendClient([]), store }), maxBodyBytes: 100 });
    const big = await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x'.repeat(500) }] }), {}, URL_JSON));
    expect(big.status).toBe(413);
    expect((await big.json()).error).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', details: { path: '(body)', limit: 100 } });
    expect((await handler(post('{}', {}, 'http://agent.test/v1beta1/other'))).status).toBe(404);
    const get = await handler(new Request(URL_BASE));
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST, OPTIONS');
    // The sessions paths say which method they take, too.
    for (const [method, path, allow] of [['GET', 'new', 'POST, OPTIONS'], ['POST', 'abc/status', 'GET, HEAD, OPTIONS'], ['DELETE', 'abc', 'GET, HEAD, OPTIONS']] as const) {
      const wrong = await handler(new Request(`http://agent.test/v1beta1/sessions/${path}`, { method }));
      expect(wrong.status, path).toBe(405);
      expect(wrong.headers.get('allow'), path).toBe(allow);
    }
  });

  it('with maxRunning, refuses starts and resumes past it with 429 and takes them again once runs stop', async () => {
    let open = (): void => undefined;
    let gate = Promise.resolve();
    const hold = () => (gate = new Promise<void>((resolve) => (open = resolve)));
    const backend = createScriptedBackendClient(async (request) => {
      const answer = request.body.contents.at(-1)?.parts[0]?.functionResponse?.response?.user_input;
      if (typeof answer === 'string') return [functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${answer}` })];
      await gate;
      return [functionCallChunk('chat_request_user_input', { user_message: 'Name?' })];
    });
    const store = createMemoryInteractionStore();
    const handler = createAgentHandler({ createPorts: () => ({ backend, store }), maxRunning: 1 });
    const sessions = 'http://agent.test/v1beta1/sessions';
    const start = () => handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }] }), {}, `${sessions}/new`));
    const suspended = async (sessionId: string) => {
      await wireEvents(await handler(new Request(`${sessions}/${sessionId}?alt=sse`)));
      expect(await (await handler(new Request(`${sessions}/${sessionId}/status`))).json()).toMatchObject({ status: 'suspended' });
    };

    hold();
    const first = (await (await start()).json()) as { sessionId: string };
    const refused = await start();
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await refused.json()).toMatchObject({ error: { code: 'RATE_LIMITED', message: 'This server is running its most sessions at once (1); try again shortly' } });
    const legacy = await wireEvents(await handler(post(JSON.stringify({ start: { segments: [{ textSegment: { text: 'x' } }] } }))));
    expect(legacy).toEqual([{ error: { code: 'RATE_LIMITED', message: 'This server is running its most sessions at once (1); try again shortly' } }]);
    open();
    await suspended(first.sessionId);

    // The first run waits for its user now: it no longer counts, so a second one starts...
    hold();
    const second = await vi.waitFor(async () => {
      const answer = await start();
      expect(answer.status).toBe(200);
      return (await answer.json()) as { sessionId: string };
    });
    // ...and while it runs, the first cannot be resumed, but stays waiting for its answer.
    const resume = () => handler(post(JSON.stringify({ input: { role: 'user', parts: [{ text: 'Ada' }] } }), {}, `${sessions}/${first.sessionId}:resume`));
    expect((await resume()).status).toBe(429);
    expect(await (await handler(new Request(`${sessions}/${first.sessionId}/status`))).json()).toMatchObject({ status: 'suspended' });
    open();
    await suspended(second.sessionId);
    await vi.waitFor(async () => expect((await resume()).status).toBe(200));
    const tail = await wireEvents(await handler(new Request(`${sessions}/${first.sessionId}?alt=sse`)));
    expect(tail.find((event) => 'complete' in event)).toMatchObject({ complete: { result: { success: true, outcomes: { parts: [{ text: 'Hello Ada' }] } } } });
  });

  it('reads a :cancel body within the same limit, and takes an empty one with the token in the header', async () => {
    const store = createMemoryInteractionStore();
    const backend = createScriptedBackendClient(() => [functionCallChunk('chat_request_user_input', { user_message: 'Name?' })]);
    const handler = createAgentHandler({ createPorts: () => ({ backend, store }), maxBodyBytes: 100 });
    const sessions = 'http://agent.test/v1beta1/sessions';
    const created = await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }], accessToken: 'tok' }), {}, `${sessions}/new`));
    const { sessionId } = (await created.json()) as { sessionId: string };
    const big = await handler(post(JSON.stringify({ accessToken: 'tok', padding: 'x'.repeat(500) }), {}, `${sessions}/${sessionId}:cancel`));
    expect(big.status).toBe(413);
    const empty = await handler(post('', { authorization: 'Bearer tok' }, `${sessions}/${sessionId}:cancel`));
    expect(empty.status).toBe(200);
    expect(await empty.json()).toEqual({ sessionId, status: 'cancelled' });
  });

  it('serves the /api/agent/run alias', async () => {
    const { handler } = setup();
    const response = await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }] }), {}, 'http://agent.test/api/agent/run'));
    expect(response.status).toBe(200);
    expect((await wireEvents(response)).at(-1)).toHaveProperty('waitForInput');
  });

  it('cancels the run, and its model request, when the client goes away', async () => {
    const store = createMemoryInteractionStore();
    const backend = createScriptedBackendClient([[thoughtChunk('a'), thoughtChunk('b'), thoughtChunk('c'), thoughtChunk('d')]], {
      chunkDelayMs: 40,
    });
    const handler = createAgentHandler({ createPorts: () => ({ backend, store }) });
    const response = await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'slow' }] })));
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    await reader.cancel();
    await expect.poll(() => backend.abortedCount, { timeout: 5_000 }).toBe(1);
  });

  it('sends keep-alive comments while the run is quiet', async () => {
    const store = createMemoryInteractionStore();
    const backend = createScriptedBackendClient([[thoughtChunk('a')], []], { chunkDelayMs: 120 });
    const handler = createAgentHandler({ createPorts: () => ({ backend, store }), keepAliveMs: 30 });
    const response = await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }] })));
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!text.includes('"thought"')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    await reader.cancel();
    expect(text).toContain(': keep-alive\n\n');
  });
});

describe('createAgentHandler: errors for callers that asked for SSE', () => {
  const sseEvents = async (response: Response) => {
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    return wireEvents(response);
  };

  it('answers an empty segments list with ?alt=sse as one SSE error event coded BAD_REQUEST', async () => {
    const { handler } = setup();
    const events = await sseEvents(await handler(post(JSON.stringify({ start: { segments: [] } }))));
    expect(events).toEqual([{ error: { message: "start.segments: empty: Missing 'segments' in request body", code: 'BAD_REQUEST' } }]);
  });

  it('does the same for Accept: text/event-stream, for 413 and for 415', async () => {
    const store = createMemoryInteractionStore();
    const handler = createAgentHandler({ createPorts: () => ({ backend: createScriptedBackendClient([]), store }), maxBodyBytes: 100 });
    const accept = { accept: 'text/event-stream' };
    const big = await sseEvents(await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x'.repeat(500) }] }), accept, URL_JSON)));
    expect(big).toEqual([{ error: { message: '(body): the request body exceeds the limit of 100 bytes', code: 'PAYLOAD_TOO_LARGE' } }]);
    const text = await sseEvents(await handler(post('{}', { ...accept, 'content-type': 'text/plain' }, URL_JSON)));
    expect(text).toEqual([{ error: { message: 'content-type: expected application/json, got "text/plain"', code: 'UNSUPPORTED_MEDIA_TYPE' } }]);
  });
});

describe('createAgentHandler: input limits', () => {
  it('refuses a body that is not application/json with 415, before reading it', async () => {
    const { handler } = setup();
    for (const contentType of ['text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      const response = await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }] }), { 'content-type': contentType }, URL_JSON));
      expect(response.status).toBe(415);
      expect(await response.json()).toMatchObject({ error: { code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.stringMatching(/^content-type: expected application\/json/) } });
    }
    const missing = await handler(new Request(URL_JSON, { method: 'POST', body: new Blob(['{}']) }));
    expect(missing.status).toBe(415);
    expect((await missing.json()).error.message).toBe('content-type: missing; send the body as application/json');
    const withCharset = await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }] }), { 'content-type': 'Application/JSON; charset=utf-8' }));
    expect(withCharset.status).toBe(200);
    await wireEvents(withCharset);
  });

  it('refuses a body with 429 while others being read hold the in-flight budget, and takes it once they are done', async () => {
    const store = createMemoryInteractionStore();
    const backend = createScriptedBackendClient(() => [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Done' })]);
    const handler = createAgentHandler({ createPorts: () => ({ backend, store }), maxBodyBytesInFlight: 1_500 });
    const body = JSON.stringify({ segments: [{ type: 'text', text: 'x'.repeat(900) }] });
    // A client that sends its body's first 1,000 bytes, then waits.
    let finish: () => void = () => undefined;
    const slow = new ReadableStream<Uint8Array>({
      async start(controller) {
        const bytes = new TextEncoder().encode(body);
        controller.enqueue(bytes.subarray(0, 1_000));
        await new Promise<void>((resolve) => (finish = resolve));
        controller.enqueue(bytes.subarray(1_000));
        controller.close();
      },
    });
    const headers = { 'content-type': 'application/json' };
    const first = handler(new Request(URL_JSON, { method: 'POST', body: slow, headers, duplex: 'half' } as RequestInit));
    await new Promise((resolve) => setTimeout(resolve, 20));
    // A body announced past what is left, and one streamed past it: both refused at once.
    const announced = await handler(new Request(URL_JSON, { method: 'POST', body, headers: { ...headers, 'content-length': String(body.length) } }));
    expect(announced.status).toBe(429);
    expect((await announced.json()).error).toMatchObject({ code: 'RATE_LIMITED', details: { path: '(body)', limit: 1_500 } });
    const unannounced = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(body));
        controller.close();
      },
    });
    const streamed = await handler(new Request(URL_JSON, { method: 'POST', body: unannounced, headers, duplex: 'half' } as RequestInit));
    expect(streamed.status).toBe(429);
    finish();
    expect((await first).status).toBe(200);
    // The first body is read: the budget is free again.
    const later = await handler(new Request(URL_JSON, { method: 'POST', body, headers }));
    expect(later.status).toBe(200);
    await later.text();
  });

  it('refuses deep JSON and too many segments with 400 naming the limit, without running anything', async () => {
    const { handler, tokens } = setup();
    const deep = `{"segments":[{"type":"text","text":"x"}],"flags":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    const tooDeep = await handler(post(deep, {}, URL_JSON));
    expect(tooDeep.status).toBe(400);
    expect((await tooDeep.json()).error).toMatchObject({ code: 'BAD_REQUEST', message: '(body): JSON nests deeper than the limit of 64 levels' });
    const store = createMemoryInteractionStore();
    const limited = createAgentHandler({ createPorts: () => ({ backend: createScriptedBackendClient([]), store }), maxSegments: 2, maxJsonDepth: 4 });
    const many = await limited(post(JSON.stringify({ segments: Array.from({ length: 3 }, () => ({ type: 'text', text: 'x' })) }), {}, URL_JSON));
    expect((await many.json()).error.message).toBe('segments: holds 3 segments, more than the limit of 2');
    const nested = await limited(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }], flags: { a: { b: { c: {} } } } }), {}, URL_JSON));
    expect((await nested.json()).error.message).toBe('(body): JSON nests deeper than the limit of 4 levels');
    expect(tokens).toEqual([]);
  });

  it('keeps server file paths and secrets out of an unexpected failure', async () => {
    const handler = createAgentHandler({
      createPorts: () => {
        throw new Error("EACCES: permission denied, open '/srv/agent/keys/service.json' with key=AIzaSyA-1234567890abcdefghijklmnopqrst");
      },
    });
    const response = await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }] }), {}, URL_JSON));
    expect(response.status).toBe(500);
    const { error } = await response.json();
    expect(error.code).toBe('INTERNAL');
    expect(error.message).toBe("EACCES: permission denied, open '[path]' with key=[redacted]");
    // The sessions endpoints say the same.
    const sessions = 'http://agent.test/v1beta1/sessions';
    for (const [url, body] of [
      [`${sessions}/new`, { segments: [{ type: 'text', text: 'x' }] }],
      [`${sessions}/abc:resume`, { input: { parts: [{ text: 'x' }] } }],
      [`${sessions}/abc:cancel`, {}],
    ] as const) {
      const answer = await handler(post(JSON.stringify(body), {}, url));
      expect(answer.status, url).toBe(500);
      expect((await answer.json()).error.message, url).toBe("EACCES: permission denied, open '[path]' with key=[redacted]");
    }
  });
});

describe('createAgentHandler: CORS', () => {
  const SITE = 'https://app.example.com';
  const preflight = (origin: string, url = URL_BASE) =>
    new Request(url, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,authorization' },
    });
  const body = JSON.stringify({ segments: [{ type: 'text', text: 'x' }] });

  it('by default lets only the server\'s own pages call: another origin gets 403 and no allow headers', async () => {
    const { handler, tokens } = setup();
    const refusedPreflight = await handler(preflight(SITE));
    expect(refusedPreflight.status).toBe(403);
    expect(refusedPreflight.headers.get('access-control-allow-origin')).toBeNull();
    const refused = await handler(post(body, { origin: SITE }));
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ error: { code: 'FORBIDDEN', message: expect.stringContaining(SITE) } });
    expect(tokens).toEqual([]);
    // The same host (also behind a TLS-terminating proxy) and callers without Origin are served.
    const callers: Array<Record<string, string>> = [{ origin: 'http://agent.test' }, { origin: 'https://agent.test' }, {}];
    for (const headers of callers) {
      const response = await handler(post(body, headers));
      expect(response.status).toBe(200);
      expect(response.headers.get('access-control-allow-origin')).toBeNull();
      await wireEvents(response);
    }
  });

  it('answers preflights of allowed origins with 204 and puts the headers on streams and errors', async () => {
    const store = createMemoryInteractionStore();
    const backend = createScriptedBackendClient(() => [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'done' })]);
    const handler = createAgentHandler({ createPorts: () => ({ backend, store }), cors: { origins: [SITE], maxAgeSeconds: 60 } });
    const answer = await handler(preflight(SITE));
    expect(answer.status).toBe(204);
    expect(Object.fromEntries(answer.headers)).toMatchObject({
      'access-control-allow-origin': SITE,
      'access-control-allow-methods': 'GET, POST, OPTIONS',
      'access-control-allow-headers': 'content-type, authorization, last-event-id',
      'access-control-max-age': '60',
    });
    expect(answer.headers.get('vary')).toMatch(/Origin/);
    expect(answer.headers.get('access-control-allow-credentials')).toBeNull();
    const stream = await handler(post(body, { origin: SITE }));
    expect(stream.headers.get('access-control-allow-origin')).toBe(SITE);
    expect((await wireEvents(stream)).at(-1)).toMatchObject({ complete: { result: { success: true } } });
    const error = await handler(post('{', { origin: SITE }, URL_JSON));
    expect(error.status).toBe(400);
    expect(error.headers.get('access-control-allow-origin')).toBe(SITE);
    expect((await handler(preflight('https://other.example.com'))).status).toBe(403);
  });

  it('allows every origin with "*", and echoes the origin when credentials are allowed', async () => {
    const store = createMemoryInteractionStore();
    const anyone = createAgentHandler({ createPorts: () => ({ backend: createScriptedBackendClient([]), store }), cors: { origins: '*' } });
    expect((await anyone(preflight(SITE))).headers.get('access-control-allow-origin')).toBe('*');
    const withCookies = createAgentHandler({
      createPorts: () => ({ backend: createScriptedBackendClient([]), store }),
      cors: { origins: '*', credentials: true },
    });
    const answer = await withCookies(preflight(SITE));
    expect(answer.headers.get('access-control-allow-origin')).toBe(SITE);
    expect(answer.headers.get('access-control-allow-credentials')).toBe('true');
    const privateNetwork = await anyone(
      new Request(URL_BASE, { method: 'OPTIONS', headers: { origin: SITE, 'access-control-request-method': 'POST', 'access-control-request-private-network': 'true' } }),
    );
    expect(privateNetwork.headers.get('access-control-allow-private-network')).toBe('true');
  });
});

describe('createAgentHandler: methods on every path', () => {
  const SESSIONS = 'http://agent.test/v1beta1/sessions';

  it('answers OPTIONS with the methods each path takes, and HEAD as GET without a body', async () => {
    const { handler } = setup();
    for (const [path, allow] of [
      ['http://agent.test/v1beta1/streamRunAgent', 'POST, OPTIONS'],
      [`${SESSIONS}/new`, 'POST, OPTIONS'],
      [`${SESSIONS}/abc:resume`, 'POST, OPTIONS'],
      [`${SESSIONS}/abc:cancel`, 'POST, OPTIONS'],
      [`${SESSIONS}/abc/status`, 'GET, HEAD, OPTIONS'],
      [`${SESSIONS}/abc`, 'GET, HEAD, OPTIONS'],
    ] as const) {
      const options = await handler(new Request(path, { method: 'OPTIONS' }));
      expect(options.status, path).toBe(204);
      expect(options.headers.get('allow'), path).toBe(allow);
    }

    const created = await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }] }), {}, `${SESSIONS}/new`));
    const { sessionId } = (await created.json()) as { sessionId: string };
    const status = await handler(new Request(`${SESSIONS}/${sessionId}/status`, { method: 'HEAD' }));
    expect(status.status).toBe(200);
    expect(status.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await status.text()).toBe('');
    const stream = await handler(new Request(`${SESSIONS}/${sessionId}?alt=sse`, { method: 'HEAD' }));
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(await stream.text()).toBe('');
    const unknown = await handler(new Request(`${SESSIONS}/nope/status`, { method: 'HEAD' }));
    expect(unknown.status).toBe(404);
    expect(await unknown.text()).toBe('');
    // The run endpoint takes no GET, so no HEAD either.
    const run = await handler(new Request(URL_JSON, { method: 'HEAD' }));
    expect(run.status).toBe(405);
    expect(run.headers.get('allow')).toBe('POST, OPTIONS');
    expect(await run.text()).toBe('');
  });
});

describe('createAgentHandler: request bodies', () => {
  const SESSIONS = 'http://agent.test/v1beta1/sessions';
  const segments = [{ type: 'text', text: 'x' }];

  it('names the field of every wrong type with a coded 400, in the envelope and the flat forms', async () => {
    const { handler, tokens } = setup();
    const cases: Array<[unknown, string]> = [
      [[], '(root)'],
      [7, '(root)'],
      [null, '(root)'],
      [{}, 'segments'],
      [{ segments: 'x' }, 'segments'],
      [{ segments: [] }, 'segments'],
      [{ segments: [1] }, 'segments[0]'],
      [{ segments: [{ type: 'text', text: 5 }] }, 'segments[0].text'],
      [{ segments: [{ textSegment: 'x' }] }, 'segments[0].textSegment'],
      [{ segments: [{ inputSegment: { content: { parts: [5] } } }] }, 'segments[0].inputSegment.content.parts[0]'],
      [{ segments, flags: [] }, 'flags'],
      [{ segments, graph: { url: 5 } }, 'graph.url'],
      [{ segments, kind: 5 }, 'kind'],
      [{ segments, accessToken: 5 }, 'accessToken'],
      [{ start: null }, 'start'],
      [{ start: { segments: [{ type: 'bogus' }] } }, 'start.segments[0].type'],
      [{ resume: null }, 'resume'],
      [{ resume: {} }, 'resume.interactionId'],
      [{ resume: { interactionId: 5 } }, 'resume.interactionId'],
      [{ resume: { interactionId: 'x', response: [] } }, 'resume.response'],
      [{ resume: { interactionId: 'x', response: { input: { parts: 'Ada' } } } }, 'resume.response.input.parts'],
      [{ resume: { interactionId: 'x', response: { input: { parts: [{ text: 5 }] } } } }, 'resume.response.input.parts[0].text'],
      // A flat resume whose id is of another type, or empty, names the id rather than missing segments.
      [{ interactionId: 5, response: {} }, 'interactionId'],
      [{ interactionId: '', response: {} }, 'interactionId'],
    ];
    for (const [body, path] of cases) {
      const response = await handler(post(JSON.stringify(body), {}, URL_JSON));
      expect(response.status, JSON.stringify(body)).toBe(400);
      const { error } = await response.json();
      expect(error, JSON.stringify(body)).toMatchObject({ code: 'BAD_REQUEST', details: { path } });
      expect(error.message.startsWith(`${path}: `), error.message).toBe(true);
    }
    // sessions/new names the field of a resume body, and :resume the field of a wrong answer.
    const resumeToNew = await handler(post(JSON.stringify({ resume: { interactionId: 'x' } }), {}, `${SESSIONS}/new`));
    expect((await resumeToNew.json()).error).toMatchObject({ code: 'BAD_REQUEST', details: { path: 'resume' } });
    expect(tokens).toEqual([]);
    // Answers the reference passes through to the run as they are: not refused (this id is unknown).
    for (const response of [{ input: 'Ada' }, { input: null }, { input: {} }, { selected: ['a'] }, { consent: 'yes' }]) {
      const events = await wireEvents(await handler(post(JSON.stringify({ resume: { interactionId: 'x', response } }))));
      expect(events, JSON.stringify(response)).toEqual([{ error: { message: 'Unknown interaction ID: x', code: 'INTERACTION_NOT_FOUND' } }]);
    }
  });

  it('ignores fields it does not know, in both forms', async () => {
    const { handler } = setup();
    for (const body of [
      { segments, futureField: { nested: true } },
      { start: { segments: [{ textSegment: { text: 'x', emphasis: 'bold' } }], future: 1 }, clientVersion: '2' },
    ]) {
      const events = await wireEvents(await handler(post(JSON.stringify(body))));
      expect(events.at(-1), JSON.stringify(body)).toHaveProperty('waitForInput');
    }
  });

  it('applies maxSegments to sessions/new as to streamRunAgent', async () => {
    const store = createMemoryInteractionStore();
    const handler = createAgentHandler({ createPorts: () => ({ backend: createScriptedBackendClient([]), store }), maxSegments: 2 });
    const body = JSON.stringify({ segments: [segments[0], segments[0], segments[0]] });
    for (const url of [URL_JSON, `${SESSIONS}/new`]) {
      const response = await handler(post(body, {}, url));
      expect(response.status, url).toBe(400);
      expect((await response.json()).error.message, url).toBe('segments: holds 3 segments, more than the limit of 2');
    }
  });

  it('refuses a compressed body with 415 naming content-encoding, and takes identity', async () => {
    const { handler, tokens } = setup();
    const body = JSON.stringify({ segments });
    const gzip = new Uint8Array(await new Response(new Blob([body]).stream().pipeThrough(new CompressionStream('gzip'))).arrayBuffer());
    const compressed = await handler(new Request(URL_JSON, { method: 'POST', body: gzip, headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } }));
    expect(compressed.status).toBe(415);
    expect((await compressed.json()).error).toMatchObject({
      code: 'UNSUPPORTED_MEDIA_TYPE',
      message: 'content-encoding: "gzip" is not supported; send the body uncompressed',
      details: { path: 'content-encoding' },
    });
    const sessions = await handler(new Request(`${SESSIONS}/new`, { method: 'POST', body: gzip, headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } }));
    expect(sessions.status).toBe(415);
    expect(tokens).toEqual([]);
    const identity = await handler(post(body, { 'content-encoding': 'identity' }));
    expect((await wireEvents(identity)).at(-1)).toHaveProperty('waitForInput');
  });

  it('refuses bytes that are not UTF-8 with 400 instead of running on replaced text, whatever the charset says', async () => {
    const { handler, backend } = setup();
    const latin1 = new Uint8Array([...new TextEncoder().encode('{"segments":[{"type":"text","text":"caf'), 0xe9, ...new TextEncoder().encode('"}]}')]);
    for (const contentType of ['application/json', 'application/json; charset=iso-8859-1']) {
      const response = await handler(new Request(URL_JSON, { method: 'POST', body: latin1, headers: { 'content-type': contentType } }));
      expect(response.status, contentType).toBe(400);
      expect((await response.json()).error, contentType).toMatchObject({ code: 'BAD_REQUEST', message: '(body): not valid UTF-8; send JSON as UTF-8' });
    }
    expect(backend.requests).toHaveLength(0);
    // JSON is UTF-8 whatever charset a client names (RFC 8259), and a byte order mark is skipped.
    const body = `\ufeff${JSON.stringify({ segments: [{ type: 'text', text: 'café ☕' }] })}`;
    const events = await wireEvents(await handler(post(body, { 'content-type': 'application/json; charset=UTF-16' })));
    expect(JSON.stringify(events[0])).toContain('café ☕');
  });

  it('keeps the body, and the token in it, out of the message about JSON it cannot parse', async () => {
    const { handler } = setup();
    // A token templated in without its quotes: the parser stops on its first character.
    for (const body of ['{"accessToken":s3cret-t0ken}', `{"segments":[{"type":"text","text":"x"}],"accessToken":s3cret-t0ken${' '.repeat(200)}}`]) {
      const response = await handler(post(body, {}, URL_JSON));
      expect(response.status).toBe(400);
      const text = await response.text();
      expect(text).toMatch(/\(body\): not valid JSON \(Unexpected token/);
      expect(text).not.toContain('s3cret');
    }
  });
});

describe('createAgentHandler: resuming', () => {
  const SESSIONS = 'http://agent.test/v1beta1/sessions';
  const answer = { input: { role: 'user', parts: [{ text: 'Ada' }] } };

  it('refuses an answer of the wrong type before spending the interaction, which a good answer then resumes', async () => {
    const { handler, backend } = setup();
    const first = await wireEvents(await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }] }))));
    const interactionId = first.at(-1)?.waitForInput?.interactionId as string;
    const wrong = await wireEvents(await handler(post(JSON.stringify({ resume: { interactionId, response: { input: { parts: 'Ada' } } } }))));
    expect(wrong).toEqual([{ error: { code: 'BAD_REQUEST', message: 'resume.response.input.parts: Invalid input: expected array, received string' } }]);
    expect(backend.requests).toHaveLength(1);
    const good = await wireEvents(await handler(post(JSON.stringify({ resume: { interactionId, response: answer } }))));
    expect(good.at(-1)).toMatchObject({ complete: { result: { success: true, outcomes: { parts: [{ text: 'Hello Ada' }] } } } });

    // The same on sessions: the session keeps waiting for its answer.
    const { sessionId } = (await (await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }] }), {}, `${SESSIONS}/new`))).json()) as { sessionId: string };
    await wireEvents(await handler(new Request(`${SESSIONS}/${sessionId}?alt=sse`)));
    const refused = await handler(post(JSON.stringify({ input: { parts: 'Ada' } }), {}, `${SESSIONS}/${sessionId}:resume`));
    expect(refused.status).toBe(400);
    expect((await refused.json()).error).toMatchObject({ code: 'BAD_REQUEST', details: { path: 'input.parts' } });
    expect(await (await handler(new Request(`${SESSIONS}/${sessionId}/status`))).json()).toMatchObject({ status: 'suspended' });
    expect((await handler(post(JSON.stringify(answer), {}, `${SESSIONS}/${sessionId}:resume`))).status).toBe(200);
  });

  it('answers unknown and odd interaction ids with the protocol\'s error event, and an over-long one with 400', async () => {
    const { handler } = setup();
    for (const interactionId of ['no-such-id', '../../etc/passwd', 'a/b?c#d', 'ü🙂', 'a\u0000b', 'x'.repeat(256)]) {
      const events = await wireEvents(await handler(post(JSON.stringify({ resume: { interactionId, response: answer } }))));
      expect(events, interactionId.slice(0, 20)).toEqual([{ error: { message: `Unknown interaction ID: ${interactionId}`, code: 'INTERACTION_NOT_FOUND' } }]);
    }
    const long = await handler(post(JSON.stringify({ resume: { interactionId: 'x'.repeat(257), response: answer } }), {}, URL_JSON));
    expect(long.status).toBe(400);
    expect((await long.json()).error).toMatchObject({ code: 'BAD_REQUEST', details: { path: 'resume.interactionId' } });
  });

  it('runs one of two :resume requests sent at once to a session, and refuses the other with 409', async () => {
    const { handler, backend } = setup();
    const { sessionId } = (await (await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }] }), {}, `${SESSIONS}/new`))).json()) as { sessionId: string };
    await wireEvents(await handler(new Request(`${SESSIONS}/${sessionId}?alt=sse`)));
    const answers = await Promise.all([0, 1].map(() => handler(post(JSON.stringify(answer), {}, `${SESSIONS}/${sessionId}:resume`))));
    expect(answers.map((response) => response.status).sort()).toEqual([200, 409]);
    const conflict = answers.find((response) => response.status === 409) as Response;
    expect((await conflict.json()).error).toMatchObject({ code: 'CONFLICT', message: `Session ${sessionId} is already running` });
    const tail = await wireEvents(await handler(new Request(`${SESSIONS}/${sessionId}?alt=sse`)));
    expect(tail.filter((event) => 'complete' in event)).toHaveLength(1);
    expect(backend.requests).toHaveLength(2);
  });

  it('keeps the work of a resumed run whose client left: the same id resumes it', async () => {
    const store = createMemoryInteractionStore();
    const backend = createScriptedBackendClient(
      (request) => {
        const user = request.body.contents.at(-1)?.parts[0]?.functionResponse?.response?.user_input;
        return typeof user === 'string'
          ? [thoughtChunk('a'), thoughtChunk('b'), thoughtChunk('c'), functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${user}` })]
          : [functionCallChunk('chat_request_user_input', { user_message: 'Name?' })];
      },
      { chunkDelayMs: 30 },
    );
    const handler = createAgentHandler({ createPorts: () => ({ backend, store }) });
    const first = await wireEvents(await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }] }))));
    const interactionId = first.at(-1)?.waitForInput?.interactionId as string;
    const body = JSON.stringify({ resume: { interactionId, response: answer } });
    const reader = ((await handler(post(body))).body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    await reader.cancel();
    await expect.poll(() => backend.abortedCount, { timeout: 5_000 }).toBe(1);
    const again = await wireEvents(await vi.waitFor(async () => {
      const response = await handler(post(body));
      const events = await wireEvents(response.clone());
      expect(events[0]).not.toHaveProperty('error');
      return response;
    }));
    expect(again.at(-1)).toMatchObject({ complete: { result: { success: true, outcomes: { parts: [{ text: 'Hello Ada' }] } } } });
  });

  it('keeps a session running when its stream is closed', async () => {
    const store = createMemoryInteractionStore();
    const backend = createScriptedBackendClient(
      [[thoughtChunk('a'), thoughtChunk('b'), thoughtChunk('c'), functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Done' })]],
      { chunkDelayMs: 30 },
    );
    const handler = createAgentHandler({ createPorts: () => ({ backend, store }) });
    const { sessionId } = (await (await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }] }), {}, `${SESSIONS}/new`))).json()) as { sessionId: string };
    const reader = ((await handler(new Request(`${SESSIONS}/${sessionId}?alt=sse`))).body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    await reader.cancel();
    await expect.poll(async () => ((await (await handler(new Request(`${SESSIONS}/${sessionId}/status`))).json()) as { status: string }).status, { timeout: 5_000 }).toBe('completed');
    expect(backend.abortedCount).toBe(0);
  });
});

describe('createAgentHandler: SSE framing', () => {
  const SESSIONS = 'http://agent.test/v1beta1/sessions';

  it('writes each event as one single-line data frame, ending with the suspend event, with no-cache, no-buffering headers', async () => {
    const { handler } = setup();
    const response = await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'line one\nline two' }] })));
    expect(Object.fromEntries(response.headers)).toMatchObject({
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      'x-accel-buffering': 'no',
    });
    const text = await response.text();
    expect(text.endsWith('\n\n')).toBe(true);
    const frames = text.slice(0, -2).split('\n\n');
    for (const frame of frames) expect(frame).toMatch(/^data: \{[^\n]*\}$/);
    const keys = frames.map((frame) => Object.keys(JSON.parse(frame.slice('data: '.length)))[0]);
    expect(keys).toEqual(['start', 'sendRequest', 'thought', 'functionCall', 'waitForInput']);
  });

  it('frames a session stream as start, numbered events and done', async () => {
    const { handler } = setup();
    const { sessionId } = (await (await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }] }), {}, `${SESSIONS}/new`))).json()) as { sessionId: string };
    const response = await handler(new Request(`${SESSIONS}/${sessionId}?alt=sse`));
    expect(response.headers.get('cache-control')).toBe('no-cache, no-transform');
    const frames = (await response.text()).slice(0, -2).split('\n\n');
    expect(frames[0]).toBe(`event: start\ndata: {"sessionId":"${sessionId}"}`);
    expect(frames.at(-1)).toBe('event: done\ndata: {}');
    const events = frames.slice(1, -1);
    events.forEach((frame, index) => expect(frame).toMatch(new RegExp(`^event: event\\nid: ${index}\\ndata: \\{[^\\n]*\\}$`)));
    expect(events.at(-1)).toContain('"waitForInput"');
  });
});
