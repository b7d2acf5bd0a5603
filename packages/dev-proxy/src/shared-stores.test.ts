import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { parseSseStream } from '@org/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevProcess, startPostgresServer, startRedisServer, stopProcess } from './test-support/dev-process.js';
import { waitFor } from './test-support/agent-client.js';
import { callChunk, lastFunctionResponse, objectiveOf, startMockGemini, stopChunk, thoughtOf, type MockGeminiAnswer, type MockGeminiRequest } from './test-support/mock-gemini.js';

// Two real dev server processes on one real Redis, then on one real PostgreSQL: a session is
// started on one, read and resumed on the other, cancelled across them, and finished by the
// survivor when the process running it is killed.

const TOKEN = 'shared-stores-token';
const LEASE_MS = 1_500;
const TEST_TIMEOUT_MS = 180_000;

/**
 * A Gemini-compatible model on loopback. The objective names a mode and a tag:
 * - `[greet tag]` asks for a name (holding its turn until the test releases the tag), then greets;
 * - `[hold tag]` sends a thought and holds the stream open until the caller goes away;
 * - `[takeover tag]` holds its first request like `hold`, and answers later ones at once.
 */
async function startModel() {
  const gates = new Map<string, { release: () => void; released: Promise<void> }>();
  const gateOf = (tag: string) => {
    let gate = gates.get(tag);
    if (!gate) {
      let release = () => {};
      const released = new Promise<void>((resolve) => (release = resolve));
      gate = { release, released };
      gates.set(tag, gate);
    }
    return gate;
  };
  const forever = new Promise<void>(() => undefined);
  const tagOf = (request: MockGeminiRequest) => /\[(greet|hold|takeover) ([\w-]+)\]/.exec(objectiveOf(request));
  const mock = await startMockGemini((request): MockGeminiAnswer => {
    const match = tagOf(request);
    if (!match) throw new Error('the objective names no mode and tag');
    const [, mode, tag] = match as unknown as [string, string, string];
    const answered = lastFunctionResponse(request)?.response.user_input;
    if (mode === 'greet') {
      return typeof answered === 'string'
        ? { kind: 'chunks', chunks: [thoughtOf('Greeting'), callChunk('system_objective_fulfilled', { objective_outcome: `Hello ${answered}` }), stopChunk()] }
        : { kind: 'chunks', chunks: [thoughtOf('Asking'), gateOf(tag).released, callChunk('chat_request_user_input', { user_message: 'Name?' }), stopChunk()] };
    }
    // Held open: the run stays in this model turn until its caller goes away.
    if (mode === 'hold' || requestsOf(tag).length === 1) return { kind: 'chunks', chunks: [thoughtOf('Working'), forever] };
    return { kind: 'chunks', chunks: [thoughtOf('Carrying on'), callChunk('system_objective_fulfilled', { objective_outcome: 'Done' }), stopChunk()] };
  });
  const requestsOf = (tag: string) => mock.requests.filter((request) => tagOf(request)?.[2] === tag);
  return {
    url: mock.baseUrl.replace(/\/v1beta$/, ''),
    requests: (tag: string) => requestsOf(tag).length,
    /** Requests whose caller closed the connection before the answer was complete. */
    dropped: (tag: string) => requestsOf(tag).filter((request) => request.closedEarly).length,
    release: (tag: string) => gateOf(tag).release(),
    close: () => mock.close(),
  };
}

let model: Awaited<ReturnType<typeof startModel>>;
beforeAll(async () => {
  model = await startModel();
});
afterAll(async () => {
  await model?.close();
});

interface Instance {
  url: string;
  child: ChildProcess;
}

interface Event {
  id: number;
  data: string;
}

/** A session stream being read: what arrived so far, and a promise of its end. */
interface Followed {
  events: Event[];
  envelopes: string[];
  ended: Promise<void>;
}

const sessionsUrl = (instance: Instance) => `${instance.url}/v1beta1/sessions/`;
const typeOf = (event: Event | undefined) => Object.keys(JSON.parse(event?.data ?? '{}') as object)[0];

async function post(instance: Instance, path: string, body: object): Promise<Response> {
  return fetch(`${sessionsUrl(instance)}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

async function newSession(instance: Instance, objective: string): Promise<string> {
  const response = await post(instance, 'new', { segments: [{ textSegment: { text: objective } }], accessToken: TOKEN });
  expect(response.status).toBe(200);
  return ((await response.json()) as { sessionId: string }).sessionId;
}

async function status(instance: Instance, sessionId: string): Promise<{ sessionId: string; status: string; eventCount: number }> {
  const response = await fetch(`${sessionsUrl(instance)}${sessionId}/status`);
  expect(response.status).toBe(200);
  return (await response.json()) as { sessionId: string; status: string; eventCount: number };
}

async function follow(instance: Instance, sessionId: string, after?: number): Promise<Followed> {
  const response = await fetch(`${sessionsUrl(instance)}${sessionId}?alt=sse${after === undefined ? '' : `&after=${after}`}`);
  expect(response.status).toBe(200);
  const followed: Followed = { events: [], envelopes: [], ended: Promise.resolve() };
  followed.ended = (async () => {
    for await (const message of parseSseStream(response.body as ReadableStream<Uint8Array>)) {
      if (message.event === 'event') followed.events.push({ id: Number(message.id), data: message.data });
      else followed.envelopes.push(`${message.event}:${message.data}`);
    }
  })();
  return followed;
}

/** Every event of a finished session, read from the start. */
async function readAll(instance: Instance, sessionId: string): Promise<Event[]> {
  const followed = await follow(instance, sessionId);
  await followed.ended;
  expect(followed.envelopes).toEqual([`start:${JSON.stringify({ sessionId })}`, 'done:{}']);
  return followed.events;
}

const indexes = (events: Event[]) => events.map((event) => event.id);
const zeroTo = (count: number) => Array.from({ length: count }, (_, index) => index);

const stores = [
  {
    name: 'Redis',
    async start() {
      const server = await startRedisServer();
      return { env: { REDIS_URL: server.url }, stop: () => server.stop() };
    },
  },
  {
    name: 'PostgreSQL',
    async start() {
      const server = await startPostgresServer();
      return { env: { DATABASE_URL: server.url }, stop: () => server.stop() };
    },
  },
];

describe.each(stores)('two dev server processes sharing one $name', (store) => {
  const children: ChildProcess[] = [];
  let storeServer: Awaited<ReturnType<(typeof store)['start']>> | undefined;
  let env: Record<string, string> = {};
  let a: Instance;
  let b: Instance;

  const startInstance = async (): Promise<Instance> => {
    const { url, banner } = await startDevProcess(env, children);
    expect(banner).toContain(`Store:     ${store.name}`);
    return { url, child: children.at(-1) as ChildProcess };
  };

  beforeAll(async () => {
    storeServer = await store.start();
    env = {
      ...storeServer.env,
      INTERACTION_LEASE_MS: String(LEASE_MS),
      // A quiet session's reader checks for a dead instance every 2 s instead of every 15 s.
      SESSION_TAKEOVER_CHECK_MS: '2000',
      GEMINI_BASE_URL: `${model.url}/v1beta`,
      // Nothing leaves loopback: memory would go to the mock model's server (it answers 404).
      GOOGLE_API_BASE_URL: model.url,
    };
    [a, b] = await Promise.all([startInstance(), startInstance()]);
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await Promise.all(children.map((child) => stopProcess(child)));
    await storeServer?.stop();
  }, 60_000);

  it(
    'runs a session started on A, followed on B while it runs and resumed through B: the same events on both, each once, in order, to complete',
    async () => {
      const tag = randomUUID();
      const sessionId = await newSession(a, `[greet ${tag}] Ask for my name, then greet me.`);
      const live = await follow(b, sessionId);
      // The model holds its first turn: B shows the session's events while it runs on A.
      await waitFor("B's stream shows the first thought", () => live.events.some((event) => typeOf(event) === 'thought'), 90_000);
      expect((await status(a, sessionId)).status).toBe('running');
      expect((await status(b, sessionId)).status).toBe('running');
      model.release(tag);
      await live.ended;
      expect(live.envelopes).toEqual([`start:${JSON.stringify({ sessionId })}`, 'done:{}']);
      expect(typeOf(live.events.at(-1))).toBe('waitForInput');
      expect(indexes(live.events)).toEqual(zeroTo(live.events.length));
      const cursor = live.events.length - 1;
      for (const instance of [a, b]) expect(await status(instance, sessionId)).toEqual({ sessionId, status: 'suspended', eventCount: cursor + 1 });

      const resumed = await post(b, `${sessionId}:resume`, { input: { role: 'user', parts: [{ text: 'Ada' }] }, accessToken: TOKEN });
      expect(await resumed.json()).toEqual({ ok: true });
      // The rest, read from A after the cursor.
      const rest = await follow(a, sessionId, cursor);
      await rest.ended;
      expect(typeOf(rest.events.at(-1))).toBe('complete');
      expect(JSON.parse(rest.events.at(-1)?.data ?? '{}').complete.result.outcomes.parts[0].text).toBe('Hello Ada');

      const all = [...live.events, ...rest.events];
      expect(indexes(all)).toEqual(zeroTo(all.length));
      const [fromA, fromB] = await Promise.all([readAll(a, sessionId), readAll(b, sessionId)]);
      expect(fromA).toEqual(all);
      expect(fromB).toEqual(all);
      expect(all.filter((event) => typeOf(event) === 'complete')).toHaveLength(1);
      for (const instance of [a, b]) expect(await status(instance, sessionId)).toEqual({ sessionId, status: 'completed', eventCount: all.length });
      expect(model.requests(tag)).toBe(2);
    },
    TEST_TIMEOUT_MS,
  );

  it.each(['A', 'B'])(
    ':cancel sent to A stops a run on %s that B is showing: the model request is dropped, the stream ends, a second cancel is 409',
    async (runsOn) => {
      const tag = randomUUID();
      const sessionId = await newSession(runsOn === 'A' ? a : b, `[hold ${tag}] Think for as long as you can.`);
      const live = await follow(b, sessionId);
      await waitFor("B's stream shows the run's thought", () => live.events.some((event) => typeOf(event) === 'thought'), 90_000);
      expect((await status(a, sessionId)).status).toBe('running');

      const cancelled = await post(a, `${sessionId}:cancel`, { accessToken: TOKEN });
      expect(cancelled.status).toBe(200);
      expect(await cancelled.json()).toEqual({ sessionId, status: 'cancelled' });
      await live.ended;
      expect(live.envelopes.at(-1)).toBe('done:{}');
      expect(typeOf(live.events.at(-1))).not.toBe('complete');
      // The instance running it let go of the model: the held request was closed by its caller.
      await waitFor('the held model request is closed', () => model.dropped(tag) === 1, 90_000);
      for (const instance of [a, b]) expect((await status(instance, sessionId)).status).toBe('cancelled');
      const again = await post(b, `${sessionId}:cancel`, { accessToken: TOKEN });
      expect(again.status).toBe(409);
      expect(await again.json()).toMatchObject({ error: { code: 'CONFLICT' } });
      expect(await readAll(a, sessionId)).toEqual(await readAll(b, sessionId));
      expect(model.requests(tag)).toBe(1);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "finishes on B a session whose instance was killed mid-run, once the lease ran out: B's reader picks it up",
    async () => {
      const victim = await startInstance();
      const tag = randomUUID();
      const sessionId = await newSession(victim, `[takeover ${tag}] Work on this.`);
      const live = await follow(b, sessionId);
      await waitFor('the run is in its held model turn', () => model.requests(tag) === 1 && live.events.some((event) => typeOf(event) === 'thought'), 90_000);
      await stopProcess(victim.child, 'SIGKILL');
      expect(victim.child.signalCode).toBe('SIGKILL');

      // Nobody asks anything: the reader hears nothing for a while and takes the run over.
      await live.ended;
      expect(live.envelopes).toEqual([`start:${JSON.stringify({ sessionId })}`, 'done:{}']);
      expect(typeOf(live.events.at(-1))).toBe('complete');
      expect(JSON.parse(live.events.at(-1)?.data ?? '{}').complete.result.outcomes.parts[0].text).toBe('Done');
      expect(indexes(live.events)).toEqual(zeroTo(live.events.length));
      expect(model.requests(tag)).toBe(2);
      const [fromA, fromB] = await Promise.all([readAll(a, sessionId), readAll(b, sessionId)]);
      expect(fromA).toEqual(live.events);
      expect(fromB).toEqual(live.events);
      for (const instance of [a, b]) expect(await status(instance, sessionId)).toEqual({ sessionId, status: 'completed', eventCount: live.events.length });
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'finishes on B a session whose instance was killed mid-run when :resume reaches B after the lease ran out (409 while the lease holds)',
    async () => {
      const victim = await startInstance();
      const tag = randomUUID();
      const sessionId = await newSession(victim, `[takeover ${tag}] Work on this.`);
      await waitFor('the run is in its held model turn', async () => model.requests(tag) === 1 && (await status(a, sessionId)).eventCount >= 2, 90_000);
      await stopProcess(victim.child, 'SIGKILL');

      await waitFor('a :resume through B takes the run over', async () => {
        const response = await post(b, `${sessionId}:resume`, { accessToken: TOKEN });
        if (response.status === 200) {
          expect(await response.json()).toEqual({ ok: true });
          return true;
        }
        expect(response.status).toBe(409);
        await response.body?.cancel();
        return false;
      }, 90_000, 200);
      const finished = await follow(a, sessionId);
      await finished.ended;
      expect(typeOf(finished.events.at(-1))).toBe('complete');
      expect(indexes(finished.events)).toEqual(zeroTo(finished.events.length));
      expect(model.requests(tag)).toBe(2);
      expect(await readAll(b, sessionId)).toEqual(finished.events);
      expect((await status(b, sessionId)).status).toBe('completed');
    },
    TEST_TIMEOUT_MS,
  );
});
