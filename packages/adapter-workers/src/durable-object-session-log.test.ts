import { env } from 'cloudflare:workers';
import { runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import type { EventBus, SessionLog } from '@org/core';
import { describeEventBusConformance, describeSessionLogConformance } from '@org/core/testing';
import { mixedText } from '../test/helpers.js';
import { DURABLE_OBJECT_CHUNK_BYTES } from './durable-object-interaction-store.js';
import { createDurableObjectEventBus } from './durable-object-event-bus.js';
import { createDurableObjectSessionLog, READ_BUDGET_BYTES } from './durable-object-session-log.js';

/**
 * The suite names its sessions `s-1`, ... in every case, and objects outlive a case: each log the
 * suite creates prefixes the ids it is given with a fresh name, so each case meets fresh objects.
 */
function freshNames(log: SessionLog): SessionLog {
  const prefix = `${crypto.randomUUID()}-`;
  return {
    create: (id, info) => log.create(prefix + id, info),
    get: (id) => log.get(prefix + id),
    append: (id, events) => log.append(prefix + id, events),
    read: (id, after, limit) => log.read(prefix + id, after, limit),
    update: (id, change, from) => log.update(prefix + id, change, from),
  };
}

describeSessionLogConformance('Durable Object (SQLite-backed class)', (options) => freshNames(createDurableObjectSessionLog(env.SESSIONS, options)), {
  describe,
  it,
  expect,
});

describeSessionLogConformance(
  'Durable Object (key-value-backed class)',
  (options) => freshNames(createDurableObjectSessionLog(env.SESSIONS_KV_BACKED, options)),
  { describe, it, expect },
);

// Each call is a connection of its own, as a separate Worker isolate would have.
describeEventBusConformance('Durable Object', () => createDurableObjectEventBus(env.SESSIONS), { describe, it, expect });

const objectOf = (namespace: typeof env.SESSIONS, id: string) => namespace.get(namespace.idFromName(id));

/** Every key and value size the object holds, read inside the object. */
async function storedSizes(namespace: typeof env.SESSIONS, id: string): Promise<Map<string, number>> {
  return runInDurableObject(objectOf(namespace, id), async (_instance, state) => {
    const entries = await state.storage.list();
    return new Map([...entries].map(([key, value]) => [key, value instanceof Uint8Array ? value.byteLength : JSON.stringify(value).length]));
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('createDurableObjectSessionLog', () => {
  for (const [backend, namespace] of [
    ['SQLite', env.SESSIONS],
    ['key-value', env.SESSIONS_KV_BACKED],
  ] as const) {
    it(`splits a 3 MB event across keys within the platform limit and reads it back whole (${backend} backend)`, async () => {
      const log = createDurableObjectSessionLog(namespace);
      const id = `big-event-${backend}`;
      await log.create(id, { interactionId: id });
      const event = JSON.stringify({ sendRequest: { body: { text: mixedText(2_500_000) } } });
      const size = new TextEncoder().encode(event).byteLength;
      expect(size).toBeGreaterThan(3_000_000);
      expect(await log.append(id, ['{"small":true}', event, '{"after":true}'])).toBe(0);

      const sizes = [...(await storedSizes(namespace, id))];
      const pieces = sizes.filter(([key]) => /^event:0000000001:/.test(key)).map(([, bytes]) => bytes);
      expect(pieces.length).toBe(Math.ceil(size / DURABLE_OBJECT_CHUNK_BYTES));
      expect(Math.max(...sizes.map(([, bytes]) => bytes))).toBeLessThanOrEqual(128 * 1024);

      const read = await log.read(id, -1, 10);
      expect(read.length).toBe(3);
      expect(read[1] === event).toBe(true);
      expect(read[2]).toBe('{"after":true}');
    });
  }

  it('replays a log bigger than one reply, and an event bigger than one reply, in order, one reply per read', async () => {
    const log = createDurableObjectSessionLog(env.SESSIONS);
    await log.create('long-replay', { interactionId: 'long-replay' });
    const chunk = 'x'.repeat(1024 * 1024);
    const events = Array.from({ length: 12 }, (_, index) => JSON.stringify({ n: index, text: chunk }));
    const huge = JSON.stringify({ n: 12, text: 'y'.repeat(READ_BUDGET_BYTES + 1024) });
    for (const event of [...events, huge]) await log.append('long-replay', [event]);
    // Each read is one reply: events within the budget, or the big one alone. Never all 500 asked
    // for at once, which for big events would not fit in an isolate's memory.
    const replies: string[][] = [];
    for (let cursor = -1; ; ) {
      const read = await log.read('long-replay', cursor, 500);
      if (read.length === 0) break;
      replies.push(read);
      cursor += read.length;
    }
    for (const reply of replies) {
      const bytes = reply.reduce((sum, event) => sum + event.length, 0);
      expect(reply.length === 1 || bytes <= READ_BUDGET_BYTES).toBe(true);
    }
    expect(replies.length).toBeGreaterThan(2);
    const read = replies.flat();
    expect(read.map((event) => (JSON.parse(event) as { n: number }).n)).toEqual(Array.from({ length: 13 }, (_, index) => index));
    expect(read[12] === huge).toBe(true);
    expect((await log.read('long-replay', 10, 2)).map((event) => (JSON.parse(event) as { n: number }).n)).toEqual([11]);
    expect((await log.read('long-replay', 11, 2)).map((event) => (JSON.parse(event) as { n: number }).n)).toEqual([12]);
  });

  it('reports a failure of the object or its storage as STORE_ERROR with a reason word, never the platform message', async () => {
    const failing = (error: Error) =>
      ({
        idFromName: (name: string) => env.SESSIONS.idFromName(name),
        get: () =>
          new Proxy(
            {},
            {
              get: () => async () => {
                throw error;
              },
            },
          ),
      }) as unknown as typeof env.SESSIONS;
    const internal = new Error('Durable Object storage operation exceeded timeout: /var/lib/objects/abc key=event:0000000001 value={"secret":1}');
    const overloaded = Object.assign(new Error('Durable Object is overloaded. Requests queued for too long.'), { overloaded: true, retryable: true });
    const sqlite = new Error('SQLITE_FULL: database or disk is full at /data/x.sqlite');
    for (const [error, reason] of [
      [internal, 'error'],
      [overloaded, 'overloaded'],
      [sqlite, 'SQLITE_FULL'],
    ] as const) {
      const log = createDurableObjectSessionLog(failing(error));
      const failure = await log.append('s-1', ['{}']).catch((thrown: unknown) => thrown);
      expect(failure).toMatchObject({ code: 'STORE_ERROR', message: `Could not append to session s-1 (${reason})`, cause: error });
    }
  });

  it('refuses an event above maxEventBytes with PAYLOAD_TOO_LARGE, appending nothing', async () => {
    const log = createDurableObjectSessionLog(env.SESSIONS, { maxEventBytes: 1000 });
    await log.create('small-events', { interactionId: 'small-events' });
    await expect(log.append('small-events', ['{}', JSON.stringify({ text: 'x'.repeat(2000) })])).rejects.toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
      message: "Session small-events: an event of 2011 bytes is more than this log's limit of 1000 bytes",
    });
    expect(await log.get('small-events')).toMatchObject({ eventCount: 0 });
  });

  it('refuses an id that cannot name an object, before any call', async () => {
    const log = createDurableObjectSessionLog(env.SESSIONS);
    await expect(log.get('')).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(log.append('x'.repeat(481), ['{}'])).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('must be 1 to 480 bytes long') });
  });

  it("empties an expired session's object when its alarm fires", async () => {
    const log = createDurableObjectSessionLog(env.SESSIONS, { ttlMs: 200 });
    await log.create('expiring', { interactionId: 'expiring' });
    await log.append('expiring', ['{"a":1}', JSON.stringify({ text: 'z'.repeat(300_000) })]);
    expect((await storedSizes(env.SESSIONS, 'expiring')).size).toBeGreaterThan(3);
    await sleep(300);
    // The alarm may have fired already; if not, it runs now.
    await runDurableObjectAlarm(objectOf(env.SESSIONS, 'expiring'));
    expect((await storedSizes(env.SESSIONS, 'expiring')).size).toBe(0);
    expect(await log.get('expiring')).toBeUndefined();
  });
});

describe('createDurableObjectEventBus', () => {
  it("carries a session's messages through the session's own object, and reopens a stream the object dropped", async () => {
    const bus: EventBus = createDurableObjectEventBus(env.SESSIONS);
    const publisher = createDurableObjectEventBus(env.SESSIONS);
    const heard: string[] = [];
    const subscription = await bus.subscribe('session:bus-home', (message) => heard.push(message));
    const delivered = await objectOf(env.SESSIONS, 'bus-home').busPublish('session:bus-home', 'e:0');
    expect(delivered).toBe(1);
    await waitFor(() => heard.length === 1);

    // The object is restarted (as after an eviction), which breaks its streams: the bus opens a new one.
    await runInDurableObject(objectOf(env.SESSIONS, 'bus-home'), (_instance, state) => {
      state.abort('restarted by the test');
    }).catch(() => undefined);
    let delivered2 = 0;
    await waitFor(() => delivered2 > 0, 5_000, async () => {
      delivered2 = await objectOf(env.SESSIONS, 'bus-home').busPublish('session:bus-home', 'ping');
    });
    await publisher.publish('session:bus-home', 'e:1');
    await waitFor(() => heard.includes('e:1'));
    expect(heard[0]).toBe('e:0');
    expect(heard.at(-1)).toBe('e:1');
    await subscription.close();
    expect(await objectOf(env.SESSIONS, 'bus-home').busPublish('session:bus-home', 'e:2')).toBe(0);
  });
});

/** Waits until `condition` holds (running `poll` before each check), failing after `timeoutMs`. */
async function waitFor(condition: () => boolean, timeoutMs = 5_000, poll?: () => Promise<void>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await poll?.();
    if (condition()) return;
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await sleep(20);
  }
}
