import { describe, expect, it } from 'vitest';
import { AgentError } from '../errors/index.js';
import { createSessionsEndpoint } from '../http/sessions-endpoint.js';
import { claimInteraction } from '../interactions/index.js';
import type { AgentPorts, EventBus, SessionLog } from '../ports/index.js';
import { parseSseStream } from '../sse/index.js';
import {
  createMemoryEventBus,
  createMemoryInteractionStore,
  createMemorySessionLog,
  createScriptedBackendClient,
  describeEventBusConformance,
  describeSessionLogConformance,
  functionCallChunk,
  thoughtChunk,
} from '../testing/index.js';
import { createSessionService, type SessionContext, type SessionEvent, type SessionService } from './session-service.js';

describeSessionLogConformance('memory', (options) => createMemorySessionLog(options), { describe, it, expect });
const hub = createMemoryEventBus();
describeEventBusConformance('memory', () => hub, { describe, it, expect });

const BASE = 'http://agent.test/v1beta1/sessions/';

/** A model that asks for a name, then greets; `slow` adds a pause per chunk. */
function greeter(chunkDelayMs = 0) {
  return createScriptedBackendClient((request) => {
    const answer = request.body.contents.at(-1)?.parts[0]?.functionResponse?.response?.user_input;
    return typeof answer === 'string'
      ? [thoughtChunk('Greeting'), functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${answer}` })]
      : [thoughtChunk('Asking'), functionCallChunk('chat_request_user_input', { user_message: 'Name?' })];
  }, { chunkDelayMs });
}

/** The sessions endpoint over `service` as a plain handler, each caller's context from `contextFor`. */
function endpointOver(
  service: SessionService,
  contextFor: (request: Request, token: string | undefined) => Promise<SessionContext>,
): (request: Request) => Promise<Response> {
  const endpoint = createSessionsEndpoint({
    service,
    contextFor,
    readJson: async (request) => JSON.parse(await request.text()) as unknown,
    keepAliveMs: 15_000,
  });
  return async (request) => (await endpoint(request, new URL(request.url))) ?? new Response('no', { status: 404 });
}

/** One instance: a session service and its endpoint over a shared log, bus and store. */
function instance(shared: { log: SessionLog; bus: EventBus; ports: AgentPorts }): { service: SessionService; handle: (request: Request) => Promise<Response> } {
  const service = createSessionService({ log: shared.log, bus: shared.bus, pickUpContext: () => ({ ports: shared.ports }), livenessMs: 200 });
  const handle = endpointOver(service, async (_request, token) => ({ ports: shared.ports, ...(token ? { owner: `owner:${token}` } : {}) }));
  return { service, handle };
}

/** A greeting session of owner `tok` on one instance over a fresh log, bus and store, suspended at its question. */
async function greetingAwaitingItsOwner() {
  const store = createMemoryInteractionStore();
  const log = createMemorySessionLog();
  const bus = createMemoryEventBus();
  const callerBackend = greeter();
  const { handle } = instance({ log, bus, ports: { backend: callerBackend, store } });
  const { sessionId, interactionId } = await suspendedGreeting(handle, log);
  return { store, log, bus, callerBackend, handle, sessionId, interactionId };
}

/** Starts a greeting session as owner `tok` and reads it to its question: it is suspended. */
async function suspendedGreeting(handle: (request: Request) => Promise<Response>, log: SessionLog): Promise<{ sessionId: string; interactionId: string }> {
  const created = await handle(post('new', { segments: [{ textSegment: { text: 'Greet me' } }] }, 'tok'));
  const { sessionId } = (await created.json()) as { sessionId: string };
  await readStream(await handle(new Request(`${BASE}${sessionId}?alt=sse`)));
  const { interactionId } = (await log.get(sessionId)) as { interactionId: string };
  return { sessionId, interactionId };
}

/**
 * Leaves a suspended session as an instance that took its owner's resume and died at once would:
 * the record claimed under a lease that has run out, the session `running`.
 */
async function diedHoldingTheResume(store: AgentPorts['store'], log: SessionLog, sessionId: string, interactionId: string): Promise<void> {
  const dead = await claimInteraction(store, interactionId, { owner: 'owner:tok', leaseMs: 1_000, now: () => Date.now() - 60_000 });
  expect(dead.status).toBe('claimed');
  expect(await log.update(sessionId, { status: 'running' }, ['suspended'])).toBe(true);
}

const post = (path: string, body: unknown, token?: string) =>
  new Request(`${BASE}${path}`, {
    method: 'POST',
    body: JSON.stringify(token ? { ...(body as object), accessToken: token } : body),
    headers: { 'content-type': 'application/json' },
  });

/** Reads a session stream: the envelopes and the numbered events. */
async function readStream(response: Response, stopAfter?: (events: Array<{ id: number; data: string }>) => boolean) {
  const envelopes: string[] = [];
  const events: Array<{ id: number; data: string }> = [];
  const reader = parseSseStream(response.body as ReadableStream<Uint8Array>);
  for await (const message of reader) {
    if (message.event === 'event') events.push({ id: Number(message.id), data: message.data });
    else envelopes.push(`${message.event}:${message.data}`);
    if (stopAfter?.(events)) break;
  }
  return { envelopes, events };
}

const typeOf = (data: string) => Object.keys(JSON.parse(data) as object)[0];

describe('sessions', () => {
  it('runs new → stream → waitForInput → dropped stream → :resume → reconnect after the cursor → complete, every event once', async () => {
    const shared = { log: createMemorySessionLog(), bus: createMemoryEventBus(), ports: { backend: greeter(5), store: createMemoryInteractionStore() } };
    const { handle } = instance(shared);
    const created = await handle(post('new', { segments: [{ textSegment: { text: 'Greet me' } }] }, 'tok'));
    expect(created.status).toBe(200);
    const { sessionId } = (await created.json()) as { sessionId: string };

    // The client drops the stream after the second event.
    const first = await readStream(await handle(new Request(`${BASE}${sessionId}?alt=sse`)), (events) => events.length === 2);
    expect(first.envelopes).toEqual([`start:${JSON.stringify({ sessionId })}`]);
    expect(first.events.map((event) => event.id)).toEqual([0, 1]);

    // Reconnect after the cursor: the rest of the segment, ending with the suspend.
    const second = await readStream(await handle(new Request(`${BASE}${sessionId}?alt=sse&after=1`)));
    expect(second.envelopes).toEqual([`start:${JSON.stringify({ sessionId })}`, 'done:{}']);
    expect(second.events[0]?.id).toBe(2);
    expect(typeOf(second.events.at(-1)?.data ?? '{}')).toBe('waitForInput');
    const status = (await (await handle(new Request(`${BASE}${sessionId}/status`))).json()) as Record<string, unknown>;
    expect(status).toEqual({ sessionId, status: 'suspended', eventCount: second.events.at(-1)!.id + 1 });

    // A cursor that is not a plain decimal index is refused, naming where it came from.
    for (const [query, headers, field] of [
      ['&after=0x1', {}, 'after'],
      ['&after=1e0', {}, 'after'],
      ['&after=-5', {}, 'after'],
      ['', { 'last-event-id': '0x1' }, 'Last-Event-ID'],
    ] as const) {
      const refused = await handle(new Request(`${BASE}${sessionId}?alt=sse${query}`, { headers }));
      expect(refused.status, query || field).toBe(400);
      expect(((await refused.json()) as { error: { message: string } }).error.message, query || field).toMatch(new RegExp(`^${field}: expected an event index`));
    }

    // Only the owner resumes, or cancels: another user's attempts leave the session as it was.
    expect((await handle(post(`${sessionId}:resume`, { input: { parts: [{ text: 'Mallory' }] } }, 'other'))).status).toBe(403);
    expect((await handle(post(`${sessionId}:cancel`, {}, 'other'))).status).toBe(403);
    expect((await handle(post(`${sessionId}:cancel`, {}))).status).toBe(403);
    expect(((await (await handle(new Request(`${BASE}${sessionId}/status`))).json()) as { status: string }).status).toBe('suspended');
    const resumed = await handle(post(`${sessionId}:resume`, { input: { role: 'user', parts: [{ text: 'Ada' }] } }, 'tok'));
    expect(await resumed.json()).toEqual({ ok: true });
    const cursor = second.events.at(-1)!.id;
    const third = await readStream(await handle(new Request(`${BASE}${sessionId}?alt=sse`, { headers: { 'last-event-id': String(cursor) } })));
    const ids = [...first.events, ...second.events, ...third.events].map((event) => event.id);
    expect(ids).toEqual(Array.from({ length: ids.length }, (_, index) => index));
    expect(third.events.map((event) => typeOf(event.data)).slice(-2)).toEqual(['finish', 'complete']);
    expect(JSON.parse(third.events.at(-1)!.data).complete.result.outcomes.parts[0].text).toBe('Hello Ada');

    // A full replay of a finished session ends at once with every event.
    const replay = await readStream(await handle(new Request(`${BASE}${sessionId}?alt=sse`)));
    expect(replay.events.map((event) => event.data)).toEqual([...first.events, ...second.events, ...third.events].map((event) => event.data));
    expect(((await (await handle(new Request(`${BASE}${sessionId}/status`))).json()) as { status: string }).status).toBe('completed');
    // Finished: cancel is a conflict, resume too.
    expect((await handle(post(`${sessionId}:cancel`, {}, 'tok'))).status).toBe(409);
    expect((await handle(post(`${sessionId}:resume`, { input: { parts: [{ text: 'again' }] } }, 'tok'))).status).toBe(409);
  });

  it("resumes a session whose instance died with its owner's ports and answer, not the pick-up context's", async () => {
    const { store, log, bus, callerBackend, sessionId, interactionId } = await greetingAwaitingItsOwner();
    const pickUpBackend = greeter();

    // An instance took the resume and died at once: no answer was recorded.
    await diedHoldingTheResume(store, log, sessionId, interactionId);

    // Another instance, whose pick-up context has other ports, gets the owner's resume.
    const service = createSessionService({ log, bus, pickUpContext: () => ({ ports: { backend: pickUpBackend, store } }) });
    const other = endpointOver(service, async (_request, token) => ({ ports: { backend: callerBackend, store }, ...(token ? { owner: `owner:${token}` } : {}) }));
    expect((await other(post(`${sessionId}:resume`, { input: { parts: [{ text: 'Mallory' }] } }, 'other'))).status).toBe(403);
    const resumed = await other(post(`${sessionId}:resume`, { input: { role: 'user', parts: [{ text: 'Ada' }] } }, 'tok'));
    expect(await resumed.json()).toEqual({ ok: true });
    const rest = await readStream(await other(new Request(`${BASE}${sessionId}?alt=sse`)));
    expect(JSON.parse(rest.events.at(-1)!.data).complete.result.outcomes.parts[0].text).toBe('Hello Ada');
    expect(pickUpBackend.requests).toHaveLength(0);
    expect(callerBackend.requests).toHaveLength(2);
  });

  it("puts a session back to waiting for its owner when its instance died holding the owner's unsaved answer", async () => {
    const { store, log, bus, handle, sessionId, interactionId } = await greetingAwaitingItsOwner();
    // The instance that took the owner's resume died before it saved the answer.
    await diedHoldingTheResume(store, log, sessionId, interactionId);

    // A reader on another instance notices; it cannot answer for the user, so it runs nothing.
    const pickUpBackend = greeter();
    const service = createSessionService({ log, bus, pickUpContext: () => ({ ports: { backend: pickUpBackend, store } }), livenessMs: 100 });
    for await (const _event of service.events(sessionId, -1));
    expect(await log.get(sessionId)).toMatchObject({ status: 'suspended', interactionId });
    expect(pickUpBackend.requests).toHaveLength(0);

    const resumed = await handle(post(`${sessionId}:resume`, { input: { role: 'user', parts: [{ text: 'Ada' }] } }, 'tok'));
    expect(await resumed.json()).toEqual({ ok: true });
    const rest = await readStream(await handle(new Request(`${BASE}${sessionId}?alt=sse`)));
    expect(JSON.parse(rest.events.at(-1)!.data).complete.result.outcomes.parts[0].text).toBe('Hello Ada');
  });

  it("pauses, not fails, a run its reader took over when the pick-up context cannot go on, so the owner's resume continues it", async () => {
    const { store, log, bus, handle, sessionId } = await greetingAwaitingItsOwner();

    // An instance takes the owner's answer, saves it, and then hangs like a dead process: its model
    // never answers and its store writes (the lease's renewals) never land.
    let frozen = false;
    const stalled = new Promise<never>(() => undefined);
    const freezingStore: typeof store = {
      get: (id) => store.get(id),
      set: (id, write, expected) => (frozen ? stalled : store.set(id, write, expected)),
      delete: (id, expected) => (frozen ? stalled : store.delete(id, expected)),
    };
    const hanging: AgentPorts['backend'] = {
      ...greeter(),
      async *streamGenerateContent() {
        frozen = true;
        await stalled;
      },
    };
    const dying = endpointOver(createSessionService({ log, bus }), async () => ({
      ports: { backend: hanging, store: freezingStore },
      owner: 'owner:tok',
      runOptions: { leaseMs: 300 },
    }));
    const taken = await dying(post(`${sessionId}:resume`, { input: { role: 'user', parts: [{ text: 'Ada' }] } }, 'tok'));
    expect(await taken.json()).toEqual({ ok: true });

    // A reader on another instance takes the run over once the lease ran out, but without the
    // owner's credentials its model refuses.
    const refusing: AgentPorts['backend'] = {
      ...greeter(),
      async *streamGenerateContent() {
        throw new AgentError('FORBIDDEN', 'The model needs the credentials of the caller');
      },
    };
    const service = createSessionService({ log, bus, pickUpContext: () => ({ ports: { backend: refusing, store } }), livenessMs: 100 });
    const watched: string[] = [];
    for await (const event of service.events(sessionId, -1)) watched.push(event.json);
    expect(frozen).toBe(true);
    expect(watched.some((json) => json.includes('FORBIDDEN'))).toBe(true);
    const paused = (await log.get(sessionId)) as { status: string; interactionId: string };
    expect(paused.status).toBe('paused');

    // The owner resumes it from its last checkpoint: the answer saved before the hang is there.
    const resumed = await handle(post(`${sessionId}:resume`, {}, 'tok'));
    expect(await resumed.json()).toEqual({ ok: true });
    const rest = await readStream(await handle(new Request(`${BASE}${sessionId}?alt=sse`)));
    expect(JSON.parse(rest.events.at(-1)!.data).complete.result.outcomes.parts[0].text).toBe('Hello Ada');
  });

  it('answers 404 for an unknown session on every endpoint', async () => {
    const shared = { log: createMemorySessionLog(), bus: createMemoryEventBus(), ports: { backend: greeter(), store: createMemoryInteractionStore() } };
    const { handle } = instance(shared);
    for (const request of [
      new Request(`${BASE}nope?alt=sse`),
      new Request(`${BASE}nope/status`),
      post('nope:resume', { input: {} }),
      post('nope:cancel', {}),
    ]) {
      const response = await handle(request);
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ error: { code: 'NOT_FOUND', message: 'Session not found' } });
    }
  });

  it('cancels a running session from another instance, and its reader sees the end', async () => {
    let aborted = false;
    const backend = createScriptedBackendClient(() => [thoughtChunk('a'), thoughtChunk('b'), thoughtChunk('c'), thoughtChunk('d')], { chunkDelayMs: 200 });
    const watched = { ...backend, streamGenerateContent: (model: string, body: never, signal?: AbortSignal) => {
      signal?.addEventListener('abort', () => { aborted = true; }, { once: true });
      return backend.streamGenerateContent(model, body, signal);
    } };
    const shared = { log: createMemorySessionLog(), bus: createMemoryEventBus(), ports: { backend: watched, store: createMemoryInteractionStore() } };
    const a = instance(shared);
    const b = instance(shared);
    const { sessionId } = (await (await a.handle(post('new', { segments: [{ textSegment: { text: 'Think' } }] }))).json()) as { sessionId: string };
    const reading = readStream(await b.handle(new Request(`${BASE}${sessionId}?alt=sse`)));
    await new Promise((resolve) => setTimeout(resolve, 250));
    const cancelled = await b.handle(post(`${sessionId}:cancel`, {}));
    expect(await cancelled.json()).toEqual({ sessionId, status: 'cancelled' });
    const { envelopes } = await reading;
    expect(envelopes.at(-1)).toBe('done:{}');
    expect(aborted).toBe(true);
    expect(((await (await a.handle(new Request(`${BASE}${sessionId}/status`))).json()) as { status: string }).status).toBe('cancelled');
    expect(await shared.ports.store.get(sessionId)).toBeUndefined();
  });

  it('hands a burst of events to a reader on the same instance in a few arrays, the same events a replay gives', async () => {
    const { service, sessionId, batches, live } = await readBurst(300, createMemorySessionLog());
    expect(batches.every((batch) => batch.length > 0)).toBe(true);
    // Events that were ready together came together: far fewer waits than events.
    expect(batches.length).toBeLessThan(live.length / 10);
    const replayed: SessionEvent[] = [];
    for await (const event of service.events(sessionId, -1)) replayed.push(event);
    expect(replayed).toEqual(live);
  });

  it('writes a long burst to the log and to a reader in bounded slices, in order, none lost', async () => {
    const memory = createMemorySessionLog();
    const appends: number[] = [];
    const log: SessionLog = {
      ...memory,
      append: (id, events) => {
        appends.push(events.length);
        return memory.append(id, events);
      },
    };
    const { batches, live } = await readBurst(1_200, log);
    // The model's chunks came without a pause, yet no append and no array holds all of them.
    expect(Math.max(...appends)).toBeLessThanOrEqual(256);
    expect(appends.reduce((sum, count) => sum + count, 0)).toBe(live.length);
    expect(Math.max(...batches.map((batch) => batch.length))).toBeLessThanOrEqual(500);
    expect(batches.length).toBeLessThan(live.length / 100);
  });
});

/**
 * Runs a session whose model streams `thoughts` chunks without a pause over `log`, and reads it
 * live from the same instance; checks that every event came once, in order, thoughts included.
 */
async function readBurst(thoughts: number, log: SessionLog) {
  const burst = Array.from({ length: thoughts }, (_, at) => thoughtChunk(`step ${at}`));
  const backend = createScriptedBackendClient(() => [...burst, functionCallChunk('system_objective_fulfilled', { objective_outcome: 'done' })]);
  const service = createSessionService({ log, bus: createMemoryEventBus() });
  const sessionId = await service.start({ segments: [{ type: 'text', text: 'Think' }] }, { ports: { backend, store: createMemoryInteractionStore() }, runOptions: { mode: 'chat' } });
  const batches: SessionEvent[][] = [];
  for await (const batch of service.eventBatches(sessionId, -1)) batches.push(batch);
  const live = batches.flat();
  expect(live.length).toBeGreaterThan(thoughts);
  expect(live.map((event) => event.index)).toEqual(live.map((_event, at) => at));
  const texts = live.filter((event) => event.json.startsWith('{"thought"')).map((event) => (JSON.parse(event.json) as { thought: { text: string } }).thought.text);
  expect(texts).toEqual(burst.map((_chunk, at) => `step ${at}`));
  return { service, sessionId, batches, live };
}
