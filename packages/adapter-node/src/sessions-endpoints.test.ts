import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSseStream, type EventBus, type InteractionStore, type SessionLog } from '@org/core';
import { createAgentHandler } from '@org/core/http';
import {
  createMemoryEventBus,
  createMemoryInteractionStore,
  createMemorySessionLog,
  createScriptedBackendClient,
  functionCallChunk,
  thoughtChunk,
  type ScriptedBackendClient,
} from '@org/core/testing';
import { createFileEventBus } from './file-event-bus.js';
import { createFileInteractionStore } from './file-interaction-store.js';
import { createFileSessionLog } from './file-session-log.js';
import { serve, type RunningServer } from './node-listener.js';
import { createPostgresBackends } from './postgres.js';
import { createRedisBackends } from './redis.js';
import { startPostgresServer } from './test-support/start-postgres-server.js';
import { startRedisServer } from './test-support/start-redis-server.js';

// One scenario of the sessions endpoints, over real HTTP, run against every Node store: two
// instances (two handlers, each with its own log, bus and store objects) share the store, and each
// step goes to one or the other.

/** What one instance of a deployment holds on the shared store. */
interface Backing {
  log: SessionLog;
  bus: EventBus;
  store: InteractionStore;
  close?: () => Promise<void>;
}

/** A store: `open` gives one instance's objects on it; `stop` ends the store. */
interface StoreUnderTest {
  open(): Backing;
  stop(): Promise<void>;
}

const stores: Array<{ name: string; start(): Promise<StoreUnderTest> }> = [
  {
    name: 'memory',
    async start() {
      const shared = { log: createMemorySessionLog(), bus: createMemoryEventBus(), store: createMemoryInteractionStore() };
      return { open: () => shared, stop: async () => {} };
    },
  },
  {
    name: 'file',
    async start() {
      const folder = await mkdtemp(path.join(os.tmpdir(), 'org-sessions-endpoints-'));
      return {
        open: () => {
          const bus = createFileEventBus({ directory: path.join(folder, 'bus') });
          return {
            log: createFileSessionLog({ directory: path.join(folder, 'sessions') }),
            bus,
            store: createFileInteractionStore({ directory: path.join(folder, 'interactions') }),
            close: () => bus.close(),
          };
        },
        stop: () => rm(folder, { recursive: true, force: true }),
      };
    },
  },
  {
    name: 'Redis',
    async start() {
      const server = await startRedisServer();
      const prefix = `endpoints-${randomUUID()}:`;
      return { open: () => createRedisBackends({ url: server.url, prefix }), stop: () => server.stop() };
    },
  },
  {
    name: 'PostgreSQL',
    async start() {
      const server = await startPostgresServer();
      const prefix = `e${randomUUID().replace(/-/g, '').slice(0, 12)}_`;
      return { open: () => createPostgresBackends({ url: server.url, prefix }), stop: () => server.stop() };
    },
  },
];

/** Greets after asking a name; thinks for a long while when told to. */
const model = (): ScriptedBackendClient =>
  createScriptedBackendClient(
    (request) => {
      if (JSON.stringify(request.body.contents[0] ?? {}).includes('Think')) return Array.from({ length: 1_000 }, (_, index) => thoughtChunk(`step ${index}`));
      const answer = request.body.contents.at(-1)?.parts[0]?.functionResponse?.response?.user_input;
      return typeof answer === 'string'
        ? [thoughtChunk('Greeting'), functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${answer}` })]
        : [thoughtChunk('Asking'), thoughtChunk('Still asking'), functionCallChunk('chat_request_user_input', { user_message: 'Name?' })];
    },
    { chunkDelayMs: 30 },
  );

interface Instance {
  base: string;
  model: ScriptedBackendClient;
}

interface Event {
  id: number;
  data: string;
}

const typeOf = (event: Event | undefined) => Object.keys(JSON.parse(event?.data ?? '{}') as object)[0];

async function readStream(response: Response, stopAfter?: (events: Event[]) => boolean): Promise<{ envelopes: string[]; events: Event[] }> {
  expect(response.status).toBe(200);
  const envelopes: string[] = [];
  const events: Event[] = [];
  const body = response.body as ReadableStream<Uint8Array>;
  for await (const message of parseSseStream(body)) {
    if (message.event === 'event') events.push({ id: Number(message.id), data: message.data });
    else envelopes.push(`${message.event}:${message.data}`);
    if (stopAfter?.(events)) break;
  }
  return { envelopes, events };
}

describe.each(stores)('the sessions endpoints on the $name store, across two instances', (kind) => {
  let store: StoreUnderTest | undefined;
  const backings: Backing[] = [];
  const servers: RunningServer[] = [];
  let a: Instance;
  let b: Instance;

  const startInstance = async (): Promise<Instance> => {
    const backing = (store as StoreUnderTest).open();
    backings.push(backing);
    const backend = model();
    const handler = createAgentHandler({ createPorts: () => ({ backend, store: backing.store }), sessions: { log: backing.log, bus: backing.bus } });
    const server = await serve({ handler, port: 0 });
    servers.push(server);
    return { base: `${server.url}/v1beta1/sessions/`, model: backend };
  };

  beforeAll(async () => {
    store = await kind.start();
    [a, b] = [await startInstance(), await startInstance()];
  }, 60_000);

  afterAll(async () => {
    await Promise.all(servers.map((server) => server.close()));
    await Promise.all(backings.map((backing) => backing.close?.()));
    await store?.stop();
  });

  const post = (instance: Instance, route: string, body: object, token?: string) =>
    fetch(`${instance.base}${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(token ? { ...body, accessToken: token } : body),
    });
  const get = (instance: Instance, route: string, headers: Record<string, string> = {}) => fetch(`${instance.base}${route}`, { headers });
  const statusOf = async (instance: Instance, sessionId: string) => (await (await get(instance, `${sessionId}/status`)).json()) as Record<string, unknown>;

  it('new → stream → dropped stream → reconnect after the cursor → waitForInput → :resume → reconnect → complete: every event once, in order, on both', async () => {
    const created = await post(a, 'new', { segments: [{ textSegment: { text: 'Greet me' } }] }, 'tok');
    expect(created.status).toBe(200);
    const { sessionId } = (await created.json()) as { sessionId: string };

    // B's reader drops the stream after the second event; the run on A goes on without it.
    const first = await readStream(await get(b, `${sessionId}?alt=sse`), (events) => events.length === 2);
    expect(first.envelopes).toEqual([`start:${JSON.stringify({ sessionId })}`]);
    expect(first.events.map((event) => event.id)).toEqual([0, 1]);
    const midway = await statusOf(b, sessionId);
    expect(['running', 'suspended']).toContain(midway.status);
    expect(midway.eventCount).toBeGreaterThanOrEqual(2);

    // Reconnect on A after the cursor: the rest of the segment, ending with the suspend.
    const second = await readStream(await get(a, `${sessionId}?alt=sse&after=1`));
    expect(second.envelopes).toEqual([`start:${JSON.stringify({ sessionId })}`, 'done:{}']);
    expect(second.events[0]?.id).toBe(2);
    expect(typeOf(second.events.at(-1))).toBe('waitForInput');
    const cursor = second.events.at(-1)?.id as number;
    for (const instance of [a, b]) expect(await statusOf(instance, sessionId)).toEqual({ sessionId, status: 'suspended', eventCount: cursor + 1 });

    // Resumed through B, by its owner only; read again on A from the cursor.
    expect((await post(b, `${sessionId}:resume`, { input: { parts: [{ text: 'Mallory' }] } }, 'other')).status).toBe(403);
    expect(await (await post(b, `${sessionId}:resume`, { input: { role: 'user', parts: [{ text: 'Ada' }] } }, 'tok')).json()).toEqual({ ok: true });
    const third = await readStream(await get(a, `${sessionId}?alt=sse`, { 'last-event-id': String(cursor) }));
    expect(third.envelopes.at(-1)).toBe('done:{}');
    const all = [...first.events, ...second.events, ...third.events];
    expect(all.map((event) => event.id)).toEqual(Array.from({ length: all.length }, (_, index) => index));
    expect(third.events.map((event) => typeOf(event)).slice(-2)).toEqual(['finish', 'complete']);
    expect(JSON.parse(third.events.at(-1)?.data ?? '{}').complete.result.outcomes.parts[0].text).toBe('Hello Ada');
    for (const instance of [a, b]) expect(await statusOf(instance, sessionId)).toEqual({ sessionId, status: 'completed', eventCount: all.length });

    // A replay on either instance: every event once, in order.
    for (const instance of [a, b]) {
      const replay = await readStream(await get(instance, `${sessionId}?alt=sse`));
      expect(replay.events).toEqual(all);
      expect(replay.envelopes).toEqual([`start:${JSON.stringify({ sessionId })}`, 'done:{}']);
    }
    // Finished: cancel and resume are conflicts.
    const cancelled = await post(b, `${sessionId}:cancel`, {}, 'tok');
    expect(cancelled.status).toBe(409);
    expect(await cancelled.json()).toMatchObject({ error: { code: 'CONFLICT', message: 'Session already in terminal state (completed)' } });
    expect((await post(a, `${sessionId}:resume`, { input: { parts: [{ text: 'again' }] } }, 'tok')).status).toBe(409);
  }, 60_000);

  it(':cancel on B stops a session running on A: the model request is aborted, the reader sees the end, the saved state goes', async () => {
    const created = await post(a, 'new', { segments: [{ textSegment: { text: 'Think for a long time' } }] }, 'tok');
    const { sessionId } = (await created.json()) as { sessionId: string };
    let thinking: (() => void) | undefined;
    const started = new Promise<void>((resolve) => (thinking = resolve));
    const reading = readStream(await get(b, `${sessionId}?alt=sse`), (events) => {
      if (events.length >= 3) thinking?.();
      return false;
    });
    await started;
    expect((await statusOf(b, sessionId)).status).toBe('running');
    const abortedBefore = a.model.abortedCount;

    // Only its owner may cancel it.
    expect((await post(b, `${sessionId}:cancel`, {}, 'stranger')).status).toBe(403);
    const cancelled = await post(b, `${sessionId}:cancel`, {}, 'tok');
    expect(cancelled.status).toBe(200);
    expect(await cancelled.json()).toEqual({ sessionId, status: 'cancelled' });
    const { envelopes, events } = await reading;
    expect(envelopes.at(-1)).toBe('done:{}');
    expect(events.length).toBeLessThan(1_000);
    await expect.poll(() => a.model.abortedCount, { timeout: 30_000 }).toBe(abortedBefore + 1);
    for (const instance of [a, b]) expect((await statusOf(instance, sessionId)).status).toBe('cancelled');
    await expect.poll(() => (backings[1] as Backing).store.get(sessionId), { timeout: 30_000 }).toBeUndefined();
    const again = await post(a, `${sessionId}:cancel`, {}, 'tok');
    expect(again.status).toBe(409);
  }, 60_000);

  it('answers 404 for an unknown session on every endpoint of either instance', async () => {
    for (const instance of [a, b]) {
      for (const response of await Promise.all([
        get(instance, 'nope?alt=sse'),
        get(instance, 'nope/status'),
        post(instance, 'nope:resume', { input: {} }),
        post(instance, 'nope:cancel', {}),
      ])) {
        expect(response.status).toBe(404);
        expect(await response.json()).toMatchObject({ error: { code: 'NOT_FOUND', message: 'Session not found' } });
      }
    }
  });
});
