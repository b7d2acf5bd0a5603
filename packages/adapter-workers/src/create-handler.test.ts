import { env, exports } from 'cloudflare:workers';
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import type { AgentPorts, InteractionStore } from '@org/core';
import { createAgentHandler } from '@org/core/http';
import { createMemoryInteractionStore, createScriptedBackendClient, functionCallChunk, thoughtChunk } from '@org/core/testing';
import { agentJsonRequest, agentRequest, typesOf, wireEvents } from '../test/helpers.js';
import { createHandler, type WorkerHandlerOptions } from './create-handler.js';
import { createDurableObjectInteractionStore } from './durable-object-interaction-store.js';
import { createKvInteractionStore } from './kv-interaction-store.js';
import type { SessionObject } from './session-object.js';

type TestEnv = Cloudflare.Env;

/** A model that asks for a name, then greets whoever answered. Fresh per request, like a real backend client. */
function greeterBackend() {
  return createScriptedBackendClient((request) => {
    const answer = request.body.contents.at(-1)?.parts[0]?.functionResponse?.response?.user_input;
    return typeof answer === 'string'
      ? [functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${answer}` })]
      : [thoughtChunk('I need a name'), functionCallChunk('chat_request_user_input', { user_message: 'Your name?' })];
  });
}

/**
 * One Worker instance, as a separate isolate or deployment would build it, serving runs in the
 * Worker itself (no session objects), so each run uses the store under test.
 */
function greeterWorker(createStore: (env: TestEnv) => InteractionStore, extra: Partial<WorkerHandlerOptions<TestEnv>> = {}) {
  return createHandler<TestEnv>({
    createPorts: (workerEnv): AgentPorts => ({ backend: greeterBackend(), store: createStore(workerEnv) }),
    sessionNamespace: () => undefined,
    ...extra,
  });
}

/** Sends one request through `worker.fetch` with its own execution context, waiting for its `waitUntil` work. */
async function send(worker: ExportedHandler<TestEnv>, request: Request): Promise<Response> {
  const executionContext = createExecutionContext();
  const response = await worker.fetch?.(request as Request<unknown, IncomingRequestCfProperties>, env, executionContext);
  if (!response) throw new Error('the worker has no fetch handler');
  const body = await response.arrayBuffer();
  await waitOnExecutionContext(executionContext);
  // A 204 has no body at all: an empty one makes workerd warn.
  return new Response(response.status === 204 ? null : body, response);
}

const START = { start: { segments: [{ textSegment: { text: 'Greet me by name' } }] }, accessToken: 'user-token' };
const resumeBody = (interactionId: string, name: string) => ({
  resume: { interactionId, response: { input: { role: 'user', parts: [{ text: name }] } } },
  accessToken: 'user-token',
});

const STORES: Array<[string, (env: TestEnv) => InteractionStore]> = [
  ['Durable Object store', (workerEnv) => createDurableObjectInteractionStore(workerEnv.INTERACTIONS)],
  ['KV store', (workerEnv) => createKvInteractionStore(workerEnv.INTERACTIONS_KV)],
];

describe('createHandler', () => {
  for (const [name, createStore] of STORES) {
    it(`suspends a run in one request and completes it in another (${name})`, async () => {
      const first = await send(greeterWorker(createStore), agentRequest(START));
      expect(first.status).toBe(200);
      expect(first.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const started = await wireEvents(first);
      expect(typesOf(started)).toEqual(['start', 'sendRequest', 'thought', 'functionCall', 'waitForInput']);
      const interactionId = started.at(-1)?.waitForInput?.interactionId as string;
      expect(interactionId).toMatch(/^[0-9a-f-]{36}$/);
      expect(await createStore(env).get(interactionId)).toBeDefined();

      // A different Worker instance: nothing is shared with the first request except the store.
      const resumed = await wireEvents(await send(greeterWorker(createStore), agentRequest(resumeBody(interactionId, 'Ada'))));
      expect(typesOf(resumed)).toContain('functionResult');
      expect(resumed.slice(-2)).toEqual([
        { finish: {} },
        { complete: { result: { success: true, outcomes: { parts: [{ text: 'Hello Ada' }], role: 'user' } } } },
      ]);
      expect(await createStore(env).get(interactionId)).toBeUndefined();

      const again = await wireEvents(await send(greeterWorker(createStore), agentRequest(resumeBody(interactionId, 'Eve'))));
      expect(again).toEqual([{ error: { message: `Unknown interaction ID: ${interactionId}`, code: 'INTERACTION_NOT_FOUND' } }]);
    });
  }

  it('lets only one of two simultaneous resumes of one interaction run (Durable Object store)', async () => {
    const createStore = (workerEnv: TestEnv) => createDurableObjectInteractionStore(workerEnv.INTERACTIONS);
    const started = await wireEvents(await send(greeterWorker(createStore), agentRequest(START)));
    const interactionId = started.at(-1)?.waitForInput?.interactionId as string;
    const outcomes = await Promise.all(
      ['Ada', 'Eve'].map(async (name) => wireEvents(await send(greeterWorker(createStore), agentRequest(resumeBody(interactionId, name))))),
    );
    const completed = outcomes.filter((events) => typesOf(events).includes('complete'));
    // The other one finds the run held by the first (CONFLICT), or already finished.
    const refused = outcomes.filter(
      (events) => events.length === 1 && ['CONFLICT', 'INTERACTION_NOT_FOUND'].includes(String(events[0]?.error?.code)),
    );
    expect([completed.length, refused.length]).toEqual([1, 1]);
    expect(typesOf(refused[0] ?? [])).toEqual(['error']);
  });

  it('refuses a resume by another user and keeps the run for its owner', async () => {
    const createStore = (workerEnv: TestEnv) => createDurableObjectInteractionStore(workerEnv.INTERACTIONS);
    const started = await wireEvents(await send(greeterWorker(createStore), agentRequest(START)));
    const interactionId = started.at(-1)?.waitForInput?.interactionId as string;
    const stolen = await wireEvents(
      await send(greeterWorker(createStore), agentRequest({ ...resumeBody(interactionId, 'Mallory'), accessToken: 'other-token' })),
    );
    expect(stolen).toEqual([{ error: { message: `Interaction ${interactionId} belongs to another user`, code: 'FORBIDDEN' } }]);
    const owner = await wireEvents(await send(greeterWorker(createStore), agentRequest(resumeBody(interactionId, 'Ada'))));
    expect(owner.at(-1)).toMatchObject({ complete: { result: { success: true } } });
  });

  it('answers a malformed body with the same 400 JSON as the core handler used on Node', async () => {
    const nodeHandler = createAgentHandler({ createPorts: () => ({ backend: greeterBackend(), store: createMemoryInteractionStore() }) });
    const bodies = ['{"start":', JSON.stringify({ start: { segments: [{ bogus: {} }] } }), JSON.stringify({ resume: { interactionId: 7 } })];
    for (const body of bodies) {
      const fromWorker = await exports.default.fetch(agentJsonRequest(body));
      const fromCore = await nodeHandler(agentJsonRequest(body));
      expect(fromWorker.status).toBe(400);
      expect(fromWorker.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(await fromWorker.text()).toBe(await fromCore.text());
    }
    // A caller that asked for SSE (the Opal client) gets the error as an event it can show.
    expect(await wireEvents(await exports.default.fetch(agentRequest({ start: { segments: [{ type: 'bogus' }] } })))).toEqual([
      { error: { message: 'start.segments[0].type: Unknown segment type: bogus', code: 'BAD_REQUEST' } },
    ]);
    const response = await exports.default.fetch(agentJsonRequest({ start: { segments: [{ type: 'bogus' }] } }));
    expect(await response.json()).toEqual({
      error: {
        code: 'BAD_REQUEST',
        message: 'start.segments[0].type: Unknown segment type: bogus',
        status: 400,
        details: { path: 'start.segments[0].type' },
      },
    });
  });

  it('refuses a body that would pass the bytes it may read at once with 429, as its limit says', async () => {
    const worker = greeterWorker(() => createMemoryInteractionStore(), { maxBodyBytesInFlight: 1000 });
    const response = await send(worker, agentJsonRequest({ start: { segments: [{ type: 'text', text: 'x'.repeat(2000) }] } }));
    expect(response.status).toBe(429);
    expect(await response.json()).toMatchObject({ error: { code: 'RATE_LIMITED' } });
    const small = await send(worker, agentJsonRequest({ start: { segments: [{ type: 'text', text: 'Greet me' }] } }));
    expect(small.status).toBe(200);
    await small.text();
  });

  it('answers browsers from the origins given in cors, and refuses others', async () => {
    const worker = greeterWorker((workerEnv) => createKvInteractionStore(workerEnv.INTERACTIONS_KV), { cors: { origins: ['https://app.example.com'] } });
    const preflight = (origin: string) =>
      new Request('https://agent.test/v1beta1/streamRunAgent', { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST' } });
    const allowed = await send(worker, preflight('https://app.example.com'));
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    expect((await send(worker, preflight('https://elsewhere.example.com'))).status).toBe(403);
    const stream = await send(worker, agentRequest(START, { origin: 'https://app.example.com' }));
    expect(stream.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    expect(typesOf(await wireEvents(stream)).at(-1)).toBe('waitForInput');
  });

  it('says which secret is missing when GEMINI_API_KEY is not set', async () => {
    const worker = createHandler<TestEnv>();
    const response = await worker.fetch?.(
      agentJsonRequest(START) as Request<unknown, IncomingRequestCfProperties>,
      { ...env, GEMINI_API_KEY: undefined, SESSIONS: undefined as never },
      createExecutionContext(),
    );
    expect(response?.status).toBe(500);
    expect(await response?.json()).toMatchObject({
      error: { code: 'INTERNAL', message: expect.stringContaining('GEMINI_API_KEY is not set for this Worker') },
    });
  });

  it('runs with the default ports: Gemini from env over the global fetch, the INTERACTIONS Durable Object store, SESSIONS objects', async () => {
    // test/wrangler.jsonc's Worker is `createHandler()` with SESSIONS bound, so each request is served by a
    // SessionObject; vitest.config.ts routes the objects' outbound fetch to a simulated Gemini.
    const started = await wireEvents(await exports.default.fetch(agentRequest({ ...START, start: { segments: [{ type: 'text', text: 'Ask my name, then greet me' }] } })));
    const interactionId = started.at(-1)?.waitForInput?.interactionId as string;
    expect(typesOf(started).at(-1)).toBe('waitForInput');
    expect(await createDurableObjectInteractionStore(env.INTERACTIONS).get(interactionId)).toBeDefined();
    const resumed = await wireEvents(await exports.default.fetch(agentRequest(resumeBody(interactionId, 'Ada'))));
    expect(resumed.at(-1)).toMatchObject({ complete: { result: { success: true } } });
    expect(JSON.stringify(resumed.at(-1))).toContain('Hello, Ada!');
  });

  it('hands store writes to ctx.waitUntil so a save finishes even if the client has gone', async () => {
    const waited: Promise<unknown>[] = [];
    const executionContext = { waitUntil: (promise: Promise<unknown>) => waited.push(promise), passThroughOnException() {}, props: {} };
    let saved = false;
    const memory = createMemoryInteractionStore();
    const slowStore: InteractionStore = {
      ...memory,
      async set(id, write, expected) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        const version = await memory.set(id, write, expected);
        saved = true;
        return version;
      },
    };
    const worker = greeterWorker(() => slowStore);
    const response = await worker.fetch?.(agentRequest(START) as Request<unknown, IncomingRequestCfProperties>, env, executionContext as unknown as ExecutionContext);
    await wireEvents(response as Response);
    expect(waited.length).toBeGreaterThan(0);
    await Promise.all(waited);
    expect(saved).toBe(true);
  });

  it("keeps the store's size limit when routing its writes, so an oversized state is refused before any write", async () => {
    const memory = createMemoryInteractionStore({ maxStateBytes: 200 });
    let writes = 0;
    const store: InteractionStore = {
      ...memory,
      set(id, write, expected) {
        writes += 1;
        return memory.set(id, write, expected);
      },
    };
    const events = await wireEvents(await send(greeterWorker(() => store), agentRequest(START)));
    expect(events.at(-1)?.error).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', message: expect.stringContaining('more than the limit of 200 bytes') });
    expect(writes).toBe(0);
  });

  it('refuses the sessions endpoints with 501 when no session objects are bound, rather than hand out a session nothing can read', async () => {
    let modelRequests = 0;
    const worker = createHandler<TestEnv>({
      createPorts: (workerEnv): AgentPorts => {
        const backend = greeterBackend();
        return {
          store: createDurableObjectInteractionStore(workerEnv.INTERACTIONS),
          backend: {
            ...backend,
            streamGenerateContent: (...args) => {
              modelRequests += 1;
              return backend.streamGenerateContent(...args);
            },
          },
        };
      },
      sessionNamespace: () => undefined,
    });
    const base = 'https://agent.test/v1beta1/sessions/';
    const json = (body: unknown) => ({ method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
    const requests = [
      new Request(`${base}new`, json({ segments: [{ type: 'text', text: 'Greet me' }], accessToken: 'user-token' })),
      new Request(`${base}some-session?alt=sse`),
      new Request(`${base}some-session/status`),
      new Request(`${base}some-session:resume`, json({ input: { parts: [{ text: 'Ada' }] } })),
      new Request(`${base}some-session:cancel`, { method: 'POST' }),
    ];
    for (const request of requests) {
      const response = await send(worker, request);
      expect(response.status).toBe(501);
      expect(await response.json()).toMatchObject({ error: { code: 'NOT_IMPLEMENTED', status: 501 } });
    }
    expect(modelRequests).toBe(0);
    // The legacy endpoint still runs in the Worker itself.
    expect(typesOf(await wireEvents(await send(worker, agentRequest(START)))).at(-1)).toBe('waitForInput');
  });

  it('answers an SSE caller with an error event when the object serving its request cannot be reached', async () => {
    const sessions = env.SCRIPTED_SESSIONS;
    const unreachable = {
      newUniqueId: () => sessions.newUniqueId(),
      idFromName: (name: string) => sessions.idFromName(name),
      get: () => ({
        fetch: async () => {
          throw new Error('Network connection lost.');
        },
      }),
    } as unknown as DurableObjectNamespace<SessionObject>;
    const worker = createHandler<TestEnv>({ sessionNamespace: () => unreachable });
    // The Opal client shows an error event's message, but only the status line of a non-2xx answer.
    const streamed = await send(worker, agentRequest(START));
    expect(streamed.status).toBe(200);
    expect(streamed.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(await wireEvents(streamed)).toEqual([{ error: { message: expect.any(String), code: 'INTERNAL' } }]);
    // Other callers get the JSON error, as from the core handler.
    const plain = await send(worker, agentJsonRequest(START));
    expect(plain.status).toBe(500);
    expect(await plain.json()).toMatchObject({ error: { code: 'INTERNAL', status: 500 } });
    const session = await send(worker, new Request('https://agent.test/v1beta1/sessions/some-session/status'));
    expect(session.status).toBe(500);
  });

  it('passes other paths to the fallback, or answers them with a 404 JSON error', async () => {
    const withFallback = greeterWorker(() => createMemoryInteractionStore(), { fallback: () => new Response('home page') });
    expect(await (await send(withFallback, new Request('https://agent.test/'))).text()).toBe('home page');
    const without = await send(greeterWorker(() => createMemoryInteractionStore()), new Request('https://agent.test/elsewhere'));
    expect(without.status).toBe(404);
    expect(await without.json()).toMatchObject({ error: { code: 'NOT_FOUND', message: 'No agent endpoint at /elsewhere' } });
  });
});
