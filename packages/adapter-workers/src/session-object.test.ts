import { env } from 'cloudflare:workers';
import { createExecutionContext, listDurableObjectIds, runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { parseSseStream } from '@org/core';
import type { SessionObject } from './session-object.js';
import { SCRIPT } from '../test/worker.js';
import { agentRequest, typesOf, wireEvents } from '../test/helpers.js';
import { createHandler } from './create-handler.js';
import { createDurableObjectInteractionStore } from './durable-object-interaction-store.js';
import { createDurableObjectSessionLog, decodePayload } from './durable-object-session-log.js';

type TestEnv = Cloudflare.Env;

const BASE = 'https://agent.test/v1beta1/sessions/';

/** The Worker routing to the session objects whose model is scripted (test/worker.ts). */
const worker = createHandler<TestEnv>({ sessionNamespace: (workerEnv) => workerEnv.SCRIPTED_SESSIONS });

/** One request through the Worker, as its own invocation; a streamed body is left to the caller. */
async function send(request: Request): Promise<Response> {
  const response = await worker.fetch?.(request as Request<unknown, IncomingRequestCfProperties>, env, createExecutionContext());
  if (!response) throw new Error('the worker has no fetch handler');
  return response;
}

const post = (path: string, body: unknown, token?: string) =>
  new Request(`${BASE}${path}`, {
    method: 'POST',
    body: JSON.stringify(token ? { ...(body as object), accessToken: token } : body),
    headers: { 'content-type': 'application/json' },
  });

const get = (path: string, headers: Record<string, string> = {}) => new Request(`${BASE}${path}`, { headers });

interface Streamed {
  envelopes: string[];
  events: Array<{ id: number; data: string }>;
}

/** Reads a session stream: its envelopes and numbered events; `stopAfter` drops the stream early. */
async function readStream(response: Response, stopAfter?: (events: Streamed['events']) => boolean): Promise<Streamed> {
  expect(response.status).toBe(200);
  const streamed: Streamed = { envelopes: [], events: [] };
  for await (const message of parseSseStream(response.body as ReadableStream<Uint8Array>)) {
    if (message.event === 'event') streamed.events.push({ id: Number(message.id), data: message.data });
    else streamed.envelopes.push(`${message.event}:${message.data}`);
    if (stopAfter?.(streamed.events)) break;
  }
  return streamed;
}

const typeOf = (data: string) => Object.keys(JSON.parse(data) as object)[0];

async function statusOf(sessionId: string): Promise<{ sessionId: string; status: string; eventCount: number }> {
  const response = await send(get(`${sessionId}/status`));
  expect(response.status).toBe(200);
  return response.json();
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` until it returns a value, failing after `timeoutMs`. */
async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('the condition did not come true in time');
    await sleep(25);
  }
}

describe('sessions on Durable Objects', () => {
  it('runs new → stream → waitForInput → dropped stream → :resume → reconnect after the cursor → complete, every event once', async () => {
    const created = await send(post('new', { segments: [{ textSegment: { text: 'Greet me' } }] }, 'tok'));
    expect(created.status).toBe(200);
    const { sessionId } = (await created.json()) as { sessionId: string };
    expect(sessionId).toMatch(/^[0-9a-f-]{36}$/);

    // The client drops the stream after the second event; the run goes on without it.
    const first = await readStream(await send(get(`${sessionId}?alt=sse`)), (events) => events.length === 2);
    expect(first.envelopes).toEqual([`start:${JSON.stringify({ sessionId })}`]);
    expect(first.events.map((event) => event.id)).toEqual([0, 1]);
    const midway = await statusOf(sessionId);
    expect(['running', 'suspended']).toContain(midway.status);
    expect(midway.eventCount).toBeGreaterThanOrEqual(2);

    // Reconnect after the cursor: the rest of the segment, ending with the suspend.
    const second = await readStream(await send(get(`${sessionId}?alt=sse&after=1`)));
    expect(second.envelopes).toEqual([`start:${JSON.stringify({ sessionId })}`, 'done:{}']);
    expect(second.events[0]?.id).toBe(2);
    expect(typeOf(second.events.at(-1)?.data ?? '{}')).toBe('waitForInput');
    const cursor = second.events.at(-1)?.id ?? -1;
    expect(await statusOf(sessionId)).toEqual({ sessionId, status: 'suspended', eventCount: cursor + 1 });

    // Only the owner resumes.
    const stolen = await send(post(`${sessionId}:resume`, { input: { parts: [{ text: 'Mallory' }] } }, 'other'));
    expect(stolen.status).toBe(403);
    const resumed = await send(post(`${sessionId}:resume`, { input: { role: 'user', parts: [{ text: 'Ada' }] } }, 'tok'));
    expect(await resumed.json()).toEqual({ ok: true });
    const third = await readStream(await send(get(`${sessionId}?alt=sse`, { 'last-event-id': String(cursor) })));
    const all = [...first.events, ...second.events, ...third.events];
    expect(all.map((event) => event.id)).toEqual(Array.from({ length: all.length }, (_, index) => index));
    expect(third.events.map((event) => typeOf(event.data)).slice(-2)).toEqual(['finish', 'complete']);
    expect(JSON.parse(third.events.at(-1)?.data ?? '{}').complete.result.outcomes.parts[0].text).toBe('Hello Ada');
    expect(await statusOf(sessionId)).toEqual({ sessionId, status: 'completed', eventCount: all.length });

    // A full replay of the finished session: every event once, in order, then the end.
    const replay = await readStream(await send(get(`${sessionId}?alt=sse`)));
    expect(replay.events.map((event) => event.data)).toEqual(all.map((event) => event.data));
    expect(replay.envelopes.at(-1)).toBe('done:{}');

    // Finished: cancel and resume are conflicts.
    expect((await send(post(`${sessionId}:cancel`, {}, 'stranger'))).status).toBe(403);
    const cancelled = await send(post(`${sessionId}:cancel`, {}, 'tok'));
    expect(cancelled.status).toBe(409);
    expect(await cancelled.json()).toMatchObject({ error: { code: 'CONFLICT', message: 'Session already in terminal state (completed)' } });
    expect((await send(post(`${sessionId}:resume`, { input: { parts: [{ text: 'again' }] } }, 'tok'))).status).toBe(409);
  });

  it('answers 404 for an unknown session on every endpoint, and for a path that names none', async () => {
    for (const request of [get('nope?alt=sse'), get('nope/status'), post('nope:resume', { input: {} }), post('nope:cancel', {})]) {
      const response = await send(request);
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ error: { code: 'NOT_FOUND', message: 'Session not found' } });
    }
    const elsewhere = await send(get('nope/and/more'));
    expect(elsewhere.status).toBe(404);
    expect(await elsewhere.json()).toMatchObject({ error: { code: 'NOT_FOUND', message: 'No sessions endpoint at /v1beta1/sessions/nope/and/more' } });
  });

  it('cancels a running session: its segment, running in another object, stops and its reader sees the end', async () => {
    const tag = crypto.randomUUID();
    const created = await send(post('new', { segments: [{ textSegment: { text: `${SCRIPT.thinkForever}, tag ${tag}` } }] }));
    const { sessionId } = (await created.json()) as { sessionId: string };
    let thinking: (() => void) | undefined;
    const started = new Promise<void>((resolve) => (thinking = resolve));
    const reading = readStream(await send(get(`${sessionId}?alt=sse`)), (events) => {
      if (events.length >= 3) thinking?.();
      return false;
    });
    await started;
    expect((await statusOf(sessionId)).status).toBe('running');

    const cancelled = await send(post(`${sessionId}:cancel`, {}));
    expect(await cancelled.json()).toEqual({ sessionId, status: 'cancelled' });
    const { envelopes } = await reading;
    expect(envelopes.at(-1)).toBe('done:{}');
    expect((await statusOf(sessionId)).status).toBe('cancelled');
    // The cancel reached the model request of the segment, and its saved state is gone.
    await eventually(async () => (await env.INTERACTIONS_KV.get(SCRIPT.abortedKey(tag))) ?? undefined);
    await eventually(async () => ((await createDurableObjectInteractionStore(env.INTERACTIONS).get(sessionId)) === undefined ? true : undefined));
    const again = await send(post(`${sessionId}:cancel`, {}));
    expect(again.status).toBe(409);
  });

  it('takes a run over from its last checkpoint when the object running it is restarted', async () => {
    const known = await listDurableObjectIds(env.SCRIPTED_SESSIONS);
    // The first model request hangs: the segment is stuck in the fresh object that runs it.
    const marker = crypto.randomUUID();
    const created = await send(post('new', { segments: [{ textSegment: { text: `Greet me. ${SCRIPT.hangOncePrefix}${marker}` } }] }, 'tok'));
    const { sessionId } = (await created.json()) as { sessionId: string };
    await eventually(async () => (await env.INTERACTIONS_KV.get(`hung:${marker}`)) ?? undefined);
    const stuck = await statusOf(sessionId);
    expect(stuck.status).toBe('running');
    const home = env.SCRIPTED_SESSIONS.idFromName(sessionId);
    const runner = (await listDurableObjectIds(env.SCRIPTED_SESSIONS)).find((id) => !id.equals(home) && !known.some((old) => old.equals(id)));
    expect(runner).toBeDefined();
    const runnerObject = env.SCRIPTED_SESSIONS.get(runner as DurableObjectId);

    // The runner is restarted, as after an eviction: the segment is gone, its alarm is kept.
    await runInDurableObject(runnerObject, (_instance, state) => {
      state.abort('evicted by the test');
    }).catch(() => undefined);
    expect(await runDurableObjectAlarm(env.SCRIPTED_SESSIONS.get(runner as DurableObjectId))).toBe(true);

    // The run went on from its checkpoint: the session suspends, every event once, in order.
    const first = await readStream(await send(get(`${sessionId}?alt=sse`)));
    expect(first.events.map((event) => event.id)).toEqual(Array.from({ length: first.events.length }, (_, index) => index));
    expect(first.events.length).toBeGreaterThan(stuck.eventCount);
    expect(typeOf(first.events.at(-1)?.data ?? '{}')).toBe('waitForInput');
    expect(await statusOf(sessionId)).toMatchObject({ status: 'suspended', eventCount: first.events.length });

    const resumed = await send(post(`${sessionId}:resume`, { input: { role: 'user', parts: [{ text: 'Ada' }] } }, 'tok'));
    expect(resumed.status).toBe(200);
    const rest = await readStream(await send(get(`${sessionId}?alt=sse&after=${first.events.length - 1}`)));
    expect(rest.events[0]?.id).toBe(first.events.length);
    expect(JSON.parse(rest.events.at(-1)?.data ?? '{}').complete.result.outcomes.parts[0].text).toBe('Hello Ada');
    expect((await statusOf(sessionId)).status).toBe('completed');
  });

  it('runs the legacy streamRunAgent start → suspend → resume → complete through the same objects', async () => {
    const started = await wireEvents(await send(agentRequest({ start: { segments: [{ textSegment: { text: 'Greet me' } }] }, accessToken: 'tok' })));
    expect(typesOf(started)).toEqual(['start', 'sendRequest', 'thought', 'functionCall', 'waitForInput']);
    const interactionId = started.at(-1)?.waitForInput?.interactionId as string;
    const resumeBody = (name: string) => ({
      resume: { interactionId, response: { input: { role: 'user', parts: [{ text: name }] } } },
      accessToken: 'tok',
    });
    const resumed = await wireEvents(await send(agentRequest(resumeBody('Ada'))));
    expect(typesOf(resumed)).toContain('functionResult');
    expect(resumed.slice(-2)).toEqual([
      { finish: {} },
      { complete: { result: { success: true, outcomes: { parts: [{ text: 'Hello Ada' }], role: 'user' } } } },
    ]);
    const again = await wireEvents(await send(agentRequest(resumeBody('Eve'))));
    expect(again).toEqual([{ error: { message: `Unknown interaction ID: ${interactionId}`, code: 'INTERACTION_NOT_FOUND' } }]);
  });

  it('cancels a legacy streamRunAgent run whose client leaves, in the object running it', async () => {
    const tag = crypto.randomUUID();
    const response = await send(agentRequest({ start: { segments: [{ textSegment: { text: `${SCRIPT.thinkForever}, tag ${tag}` } }] } }));
    let seen = 0;
    for await (const message of parseSseStream(response.body as ReadableStream<Uint8Array>)) {
      expect(Object.keys(JSON.parse(message.data) as object)).toHaveLength(1);
      seen += 1;
      if (seen === 4) break;
    }
    // Leaving cancels the run: its model request is stopped.
    await eventually(async () => (await env.INTERACTIONS_KV.get(SCRIPT.abortedKey(tag))) ?? undefined);
  });

  it('keeps an alarm beating in the object running a segment, and stops it when the segment ends', async () => {
    const known = await listDurableObjectIds(env.SCRIPTED_SESSIONS);
    const created = await send(post('new', { segments: [{ textSegment: { text: `${SCRIPT.thinkForever}, tag ${crypto.randomUUID()}` } }] }));
    const { sessionId } = (await created.json()) as { sessionId: string };
    const home = env.SCRIPTED_SESSIONS.idFromName(sessionId);
    const runner = (await listDurableObjectIds(env.SCRIPTED_SESSIONS)).find((id) => !id.equals(home) && !known.some((old) => old.equals(id)));
    const runnerObject = () => env.SCRIPTED_SESSIONS.get(runner as DurableObjectId);
    const bookkeeping = () =>
      runInDurableObject(runnerObject(), async (_instance, state) => ({ watch: await state.storage.get('watch'), alarm: await state.storage.getAlarm() }));

    const beating = await bookkeeping();
    expect(beating.watch).toBe(sessionId);
    expect(beating.alarm).not.toBeNull();
    // A heartbeat leaves the segment running and sets the next one.
    const count = (await statusOf(sessionId)).eventCount;
    expect(await runDurableObjectAlarm(runnerObject())).toBe(true);
    expect((await bookkeeping()).alarm).not.toBeNull();
    await eventually(async () => ((await statusOf(sessionId)).eventCount > count + 2 ? true : undefined));
    expect((await statusOf(sessionId)).status).toBe('running');

    await send(post(`${sessionId}:cancel`, {}));
    await eventually(async () => ((await bookkeeping()).watch === undefined ? true : undefined));
    // The last alarm finds nothing to keep and empties the object.
    expect(await runDurableObjectAlarm(runnerObject())).toBe(true);
    expect(await runInDurableObject(runnerObject(), async (_instance, state) => ({ keys: (await state.storage.list()).size, alarm: await state.storage.getAlarm() }))).toEqual({
      keys: 0,
      alarm: null,
    });
  });

  it('stops following a quiet running session for a reader that left, by the next keep-alive', async () => {
    const sessionId = crypto.randomUUID();
    const log = createDurableObjectSessionLog(env.SCRIPTED_SESSIONS);
    await log.create(sessionId, { interactionId: sessionId });
    await log.append(sessionId, ['{"start":{}}']);
    const home = env.SCRIPTED_SESSIONS.get(env.SCRIPTED_SESSIONS.idFromName(sessionId));
    // Five clients read the first event and leave; nothing happens in the session meanwhile. The
    // object learns they left when it writes the next keep-alive (250 ms here), and lets them go.
    for (let reader = 0; reader < 5; reader += 1) {
      const stream = (await send(get(`${sessionId}?alt=sse`))).body?.getReader();
      await stream?.read();
      await stream?.cancel();
    }
    await eventually(async () => ((await home.busPublish(`session:${sessionId}`, 'ping')) === 0 ? true : undefined), 5_000);
  });

  /** A session left `running` by a runner that was restarted, as the runner's storage has it then. */
  async function orphaned(events: string[], saved = false): Promise<{ sessionId: string; runner: DurableObjectStub<SessionObject> }> {
    const sessionId = crypto.randomUUID();
    const log = createDurableObjectSessionLog(env.SCRIPTED_SESSIONS);
    await log.create(sessionId, { interactionId: sessionId });
    if (events.length > 0) await log.append(sessionId, events);
    if (saved) await createDurableObjectInteractionStore(env.INTERACTIONS).set(sessionId, { meta: '{}', state: '{}' }, null);
    const runner = env.SCRIPTED_SESSIONS.get(env.SCRIPTED_SESSIONS.newUniqueId());
    await runInDurableObject(runner, async (_instance, state) => {
      await state.storage.put('watch', sessionId);
      await state.storage.setAlarm(Date.now() + 60_000);
    });
    await runInDurableObject(runner, (_instance, state) => {
      state.abort('restarted by the test');
    }).catch(() => undefined);
    // A stub of an object that was restarted is broken: a new one reaches the restarted object.
    return { sessionId, runner: env.SCRIPTED_SESSIONS.get(runner.id) };
  }

  const storageOf = (object: DurableObjectStub<SessionObject>) =>
    runInDurableObject(object, async (_instance, state) => ({ keys: (await state.storage.list()).size, alarm: await state.storage.getAlarm() }));

  it('ends a session its restarted runner left running with nothing saved: failed, with an error event its readers see', async () => {
    // The runner died before its run saved its first checkpoint: no reader and no resume can take it over.
    const { sessionId, runner } = await orphaned(['{"start":{"objective":{"parts":[{"text":"Hi"}],"role":"user"}}}']);
    const reading = readStream(await send(get(`${sessionId}?alt=sse`)));
    expect(await runDurableObjectAlarm(runner)).toBe(true);
    const { events, envelopes } = await reading;
    expect(envelopes.at(-1)).toBe('done:{}');
    expect(JSON.parse(events.at(-1)?.data ?? '{}')).toEqual({
      error: { code: 'INTERNAL', message: 'The run stopped: the server running it was restarted before it saved its progress, so it cannot go on; start it again' },
    });
    expect(await statusOf(sessionId)).toEqual({ sessionId, status: 'failed', eventCount: 2 });
    // The runner lets go of it, and empties itself.
    expect(await storageOf(runner)).toEqual({ keys: 0, alarm: null });
  });

  it('ends a session whose runner finished the run but was restarted before it said so, as its complete event says', async () => {
    const complete = '{"complete":{"result":{"success":true,"outcomes":{"parts":[{"text":"Done"}],"role":"user"}}}}';
    const { sessionId, runner } = await orphaned(['{"start":{}}', '{"finish":{}}', complete]);
    expect(await runDurableObjectAlarm(runner)).toBe(true);
    expect(await statusOf(sessionId)).toEqual({ sessionId, status: 'completed', eventCount: 3 });
    const replay = await readStream(await send(get(`${sessionId}?alt=sse`)));
    expect(replay.events.at(-1)?.data).toBe(complete);
  });

  it('lets go of a segment that lost its claim to another instance, once its session stops running', async () => {
    const known = await listDurableObjectIds(env.SCRIPTED_SESSIONS);
    const tag = crypto.randomUUID();
    const created = await send(post('new', { segments: [{ textSegment: { text: `${SCRIPT.thinkForever}, tag ${tag}` } }] }));
    const { sessionId } = (await created.json()) as { sessionId: string };
    const home = env.SCRIPTED_SESSIONS.idFromName(sessionId);
    const runner = env.SCRIPTED_SESSIONS.get(
      (await listDurableObjectIds(env.SCRIPTED_SESSIONS)).find((id) => !id.equals(home) && !known.some((old) => old.equals(id))) as DurableObjectId,
    );
    // Another instance holds the record now (as after a take-over): the segment's next write finds
    // it lost, and the segment stops without announcing an end.
    const store = createDurableObjectInteractionStore(env.INTERACTIONS);
    const record = await eventually(async () => (await store.get(sessionId)) ?? undefined);
    const meta = { ...(JSON.parse(record.meta) as object), lease: { token: 'elsewhere', until: Date.now() + 60_000 } };
    expect(await store.set(sessionId, { meta: JSON.stringify(meta) }, record.version)).toBeDefined();
    await eventually(async () => (await env.INTERACTIONS_KV.get(SCRIPT.abortedKey(tag))) ?? undefined);
    expect((await send(post(`${sessionId}:cancel`, {}))).status).toBe(200);

    // Its object's next alarm finds the session over and stops beating; the one after that empties it.
    expect(await runDurableObjectAlarm(runner)).toBe(true);
    const after = await runInDurableObject(runner, async (_instance, state) => state.storage.get('watch'));
    expect(after).toBeUndefined();
    await runDurableObjectAlarm(runner);
    expect(await storageOf(runner)).toEqual({ keys: 0, alarm: null });
  });

  it('refuses malformed calls to its internal methods without reading past its limits', async () => {
    const sessionId = `internal-${crypto.randomUUID()}`;
    const object = env.SESSIONS.get(env.SESSIONS.idFromName(sessionId));
    const ttlMs = 60_000;
    expect(await object.logCreate(sessionId, { interactionId: sessionId }, ttlMs)).toBe(true);
    const big = new TextEncoder().encode(JSON.stringify({ text: 'x'.repeat(5 * 1024 * 1024) }));
    for (let index = 0; index < 3; index += 1) await object.logAppend(sessionId, ttlMs, [big.byteLength], new Blob([big]).stream());

    // A budget that is not a number is the default one (8 MiB), not none: one 5 MiB event, not all three.
    expect((await object.logRead(sessionId, -1, 10, Number.NaN)).events).toHaveLength(1);
    expect((await object.logRead(sessionId, -1, 10, -5)).events).toHaveLength(1);
    expect(await object.logRead(sessionId, 0.5, 10, 1000)).toEqual({ events: [], largeNext: false });
    expect(await object.logRead(sessionId, -7, 10, 1000)).toEqual({ events: [], largeNext: false });
    expect(await object.logReadEvent(sessionId, 0.5)).toBeNull();
    // Lengths that are not byte counts, or do not add up, are refused before any index is taken.
    // (Called here rather than through the object: the test pool reports any error an object's
    // method throws as unhandled.)
    await expect(decodePayload([-1, 3], [new Uint8Array(2)])).rejects.toThrow('the lengths of the events are not byte counts');
    await expect(decodePayload([-2, 4], new Blob([new Uint8Array(2)]).stream())).rejects.toThrow('the lengths of the events are not byte counts');
    await expect(decodePayload([1.5, 0.5], new Blob([new Uint8Array(2)]).stream())).rejects.toThrow('the lengths of the events are not byte counts');
    await expect(decodePayload([1, 3], new Blob([new Uint8Array(2)]).stream())).rejects.toThrow('received 2 of 4 bytes of events');
    expect(await object.logGet(sessionId)).toMatchObject({ eventCount: 3 });
  });
});
