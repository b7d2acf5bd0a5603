import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseSseStream, type GenerateContentRequest, type GenerateContentResponse } from '@org/core';
import { functionCallChunk, thoughtChunk } from '@org/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevProcess, startPostgresServer, startRedisServer } from './test-support.js';

// Two real dev server processes on one real Redis, then on one real PostgreSQL: a session is
// started on one, read and resumed on the other, cancelled across them, and finished by the
// survivor when the process running it is killed.

const TOKEN = 'shared-stores-token';
const LEASE_MS = 1_500;
const TEST_TIMEOUT_MS = 180_000;

/** What the mock model did for the runs of one test (each test tags its objective). */
interface TagState {
  requests: number;
  /** Requests whose caller closed the connection before the answer was complete. */
  dropped: number;
  release: () => void;
  released: Promise<void>;
}

/**
 * A Gemini-compatible model on loopback. The objective names a mode and a tag:
 * - `[greet tag]` asks for a name (holding its turn until the test releases the tag), then greets;
 * - `[hold tag]` sends a thought and holds the stream open until the caller goes away;
 * - `[takeover tag]` holds its first request like `hold`, and answers later ones at once.
 */
async function startModel() {
  const tags = new Map<string, TagState>();
  const stateOf = (tag: string): TagState => {
    let state = tags.get(tag);
    if (!state) {
      let release = () => {};
      const released = new Promise<void>((resolve) => (release = resolve));
      state = { requests: 0, dropped: 0, release, released };
      tags.set(tag, state);
    }
    return state;
  };
  const answer = async (path: string, raw: string, response: ServerResponse) => {
    if (!path.includes(':streamGenerateContent')) {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"code":404,"message":"not here","status":"NOT_FOUND"}}');
      return;
    }
    const body = JSON.parse(raw) as GenerateContentRequest;
    const match = /\[(greet|hold|takeover) ([\w-]+)\]/.exec(JSON.stringify(body.contents?.[0] ?? {}));
    if (!match) {
      response.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"code":400,"message":"no tag","status":"INVALID_ARGUMENT"}}');
      return;
    }
    const [, mode, tag] = match as unknown as [string, string, string];
    const state = stateOf(tag);
    state.requests += 1;
    let finished = false;
    response.on('close', () => {
      if (!finished) state.dropped += 1;
    });
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    const send = (chunk: GenerateContentResponse) => response.write(`data: ${JSON.stringify(chunk)}\r\n\r\n`);
    const end = () => {
      finished = true;
      response.end();
    };
    const answered = body.contents?.at(-1)?.parts?.[0]?.functionResponse?.response?.user_input;
    if (mode === 'greet') {
      if (typeof answered === 'string') {
        send(thoughtChunk('Greeting'));
        send(functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${answered}` }));
        end();
        return;
      }
      send(thoughtChunk('Asking'));
      await state.released;
      send(functionCallChunk('chat_request_user_input', { user_message: 'Name?' }));
      end();
      return;
    }
    if (mode === 'hold' || state.requests === 1) {
      // Held open: the run stays in this model turn until its caller goes away.
      send(thoughtChunk('Working'));
      return;
    }
    send(thoughtChunk('Carrying on'));
    send(functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Done' }));
    end();
  };
  const server = createServer((request, response) => {
    let raw = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (raw += chunk));
    request.on('end', () => void answer(request.url ?? '', raw, response).catch(() => response.destroy()));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: (tag: string) => stateOf(tag).requests,
    dropped: (tag: string) => stateOf(tag).dropped,
    release: (tag: string) => stateOf(tag).release(),
    async close() {
      for (const state of tags.values()) state.release();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
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
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting until ${what}`);
    await sleep(50);
  }
}

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

async function stopProcess(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  const forced = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(forced);
}

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
      await until(() => live.events.some((event) => typeOf(event) === 'thought'), "B's stream shows the first thought");
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
      await until(() => live.events.some((event) => typeOf(event) === 'thought'), "B's stream shows the run's thought");
      expect((await status(a, sessionId)).status).toBe('running');

      const cancelled = await post(a, `${sessionId}:cancel`, {});
      expect(cancelled.status).toBe(200);
      expect(await cancelled.json()).toEqual({ sessionId, status: 'cancelled' });
      await live.ended;
      expect(live.envelopes.at(-1)).toBe('done:{}');
      expect(typeOf(live.events.at(-1))).not.toBe('complete');
      // The instance running it let go of the model: the held request was closed by its caller.
      await until(() => model.dropped(tag) === 1, 'the held model request is closed');
      for (const instance of [a, b]) expect((await status(instance, sessionId)).status).toBe('cancelled');
      const again = await post(b, `${sessionId}:cancel`, {});
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
      await until(() => model.requests(tag) === 1 && live.events.some((event) => typeOf(event) === 'thought'), 'the run is in its held model turn');
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
      await until(async () => model.requests(tag) === 1 && (await status(a, sessionId)).eventCount >= 2, 'the run is in its held model turn');
      await stopProcess(victim.child, 'SIGKILL');

      await until(async () => {
        const response = await post(b, `${sessionId}:resume`, { accessToken: TOKEN });
        if (response.status === 200) {
          expect(await response.json()).toEqual({ ok: true });
          return true;
        }
        expect(response.status).toBe(409);
        await response.body?.cancel();
        await sleep(200);
        return false;
      }, 'a :resume through B takes the run over');
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
