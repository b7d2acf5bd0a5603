import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEventBusConformance, describeInteractionStoreConformance, describeSessionLogConformance } from '@org/core/testing';
import { startRedisServer, type TestRedisServer } from '../test-support/start-redis-server.js';
import { createRedisBackends, createRedisEventBus, createRedisInteractionStore, createRedisSessionLog } from '../redis.js';

let server: TestRedisServer | undefined;
let shared: ReturnType<typeof createClient> | undefined;

beforeAll(async () => {
  server = await startRedisServer();
  shared = createClient({ url: server.url });
  await shared.connect();
}, 60_000);

afterAll(async () => {
  await shared?.close();
  await server?.stop();
});

const url = () => {
  if (!server) throw new Error('redis-server did not start (see the error of beforeAll)');
  return server.url;
};
const client = () => shared as NonNullable<typeof shared>;
const freshPrefix = () => `test-${randomUUID()}:`;
const closeAll = async (items: object[]) => {
  await Promise.all(items.map((item) => (item as { close?: () => Promise<void> }).close?.()));
};
const api = { describe, it, expect };

// The store opens its own connection from a URL; the log shares a client of ours.
describeInteractionStoreConformance('redis', (options) => createRedisInteractionStore({ url: url(), prefix: freshPrefix(), ...options }), api, {
  cleanup: closeAll,
});
describeSessionLogConformance('redis', (options) => createRedisSessionLog({ client: client(), prefix: freshPrefix(), ...options }), api, {
  cleanup: closeAll,
});
// Each bus opens its own connections: two buses stand for two instances.
const busPrefix = freshPrefix();
describeEventBusConformance('redis', () => createRedisEventBus({ url: url(), prefix: busPrefix }), api, { cleanup: closeAll });

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

describe('redis stores', () => {
  it('lets exactly one of two processes claim each interaction', async () => {
    const prefix = freshPrefix();
    const ids = Array.from({ length: 20 }, (_, index) => `race-${index}`);
    const store = createRedisInteractionStore({ url: url(), prefix });
    for (const id of ids) await store.set(id, { meta: '{"owner":"alice"}', state: JSON.stringify({ id }) }, null);
    await store.close();
    // Each process takes a lease on every id ten times over, as the runtime's claim does; the
    // package is imported by its name, as an app would.
    const script = `
      const { createRedisInteractionStore } = await import('@org/adapter-node/redis');
      const store = createRedisInteractionStore({ url: ${JSON.stringify(url())}, prefix: ${JSON.stringify(prefix)} });
      const ids = ${JSON.stringify(ids)};
      const won = [];
      await Promise.all(ids.flatMap((id) => Array.from({ length: 10 }, async () => {
        const record = await store.get(id);
        const meta = JSON.parse(record.meta);
        if (meta.lease) return;
        const lease = { token: String(process.pid), until: Date.now() + 60000 };
        const version = await store.set(id, { meta: JSON.stringify({ ...meta, lease }) }, record.version);
        if (version !== undefined) won.push(JSON.parse(record.state).id);
      })));
      await store.close();
      console.log(JSON.stringify(won));`;
    const run = () => promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { cwd: packageRoot });
    const [first, second] = await Promise.all([run(), run()]);
    const wins = [...JSON.parse(first.stdout), ...JSON.parse(second.stdout)].sort();
    expect(wins).toEqual([...ids].sort());
    const check = createRedisInteractionStore({ url: url(), prefix });
    for (const id of ids) expect((await check.get(id))?.state).toBe(JSON.stringify({ id }));
    await check.close();
  }, 60_000);

  it('numbers appends racing over two connections densely, each event at the index its writer got', async () => {
    const prefix = freshPrefix();
    const [one, two] = [createRedisSessionLog({ url: url(), prefix }), createRedisSessionLog({ url: url(), prefix })];
    await one.create('s-race', { interactionId: 'i-1' });
    const writes = Array.from({ length: 100 }, (_, index) => ({ log: index % 2 === 0 ? one : two, events: [`{"n":${index},"part":0}`, `{"n":${index},"part":1}`] }));
    const firsts = await Promise.all(writes.map((write) => write.log.append('s-race', write.events)));
    expect([...firsts].sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, index) => index * 2));
    const events = await two.read('s-race', -1, 1_000);
    expect(events).toHaveLength(200);
    for (const [index, write] of writes.entries()) expect(events.slice(firsts[index], (firsts[index] as number) + 2)).toEqual(write.events);
    expect((await one.get('s-race'))?.eventCount).toBe(200);
    await Promise.all([one.close(), two.close()]);
  });

  it('keeps a record alive while its lease is renewed, since every write restarts the time to live', async () => {
    const store = createRedisInteractionStore({ url: url(), prefix: freshPrefix(), ttlMs: 600 });
    let version = (await store.set('renewed', { meta: '{}', state: '"kept"' }, null)) as string;
    for (let round = 0; round < 4; round += 1) {
      await new Promise((resolve) => setTimeout(resolve, 300));
      version = (await store.set('renewed', { meta: `{"round":${round}}` }, version)) as string;
    }
    expect((await store.get('renewed'))?.state).toBe('"kept"');
    await store.close();
  });

  it('hears the bus again after its subscriber connection is cut', async () => {
    const prefix = freshPrefix();
    const [listener, publisher] = [createRedisEventBus({ url: url(), prefix }), createRedisEventBus({ url: url(), prefix })];
    const heard: string[] = [];
    const subscription = await listener.subscribe('session:s-1', (message) => heard.push(message));
    await client().sendCommand(['CLIENT', 'KILL', 'TYPE', 'pubsub']);
    // node-redis reconnects and subscribes again; messages sent meanwhile are lost (the log is the truth).
    const deadline = Date.now() + 10_000;
    while (!heard.includes('e:1') && Date.now() < deadline) {
      await publisher.publish('session:s-1', 'e:1');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(heard).toContain('e:1');
    await subscription.close();
    await Promise.all([listener.close(), publisher.close()]);
  });

  it('shares one connection between the store, the log and the bus of createRedisBackends, and closes it', async () => {
    const clientIds = async () => new Set(String(await client().sendCommand(['CLIENT', 'LIST'])).match(/(?<=^id=)\d+/gm));
    const before = await clientIds();
    const backends = createRedisBackends({ url: url(), prefix: freshPrefix() });
    const heard: string[] = [];
    const subscription = await backends.bus.subscribe('session:s-1', (message) => heard.push(message));
    await backends.log.create('s-1', { interactionId: 'i-1' });
    await backends.log.append('s-1', ['{"a":1}']);
    await backends.bus.publish('session:s-1', 'e:0');
    await backends.store.set('i-1', { meta: '{}', state: '1' }, null);
    await expect.poll(() => heard).toEqual(['e:0']);
    expect(await backends.log.read('s-1', -1, 10)).toEqual(['{"a":1}']);
    expect((await backends.store.get('i-1'))?.state).toBe('1');
    // One connection for commands, one for the subscriptions.
    const opened = [...(await clientIds())].filter((id) => !before.has(id));
    expect(opened).toHaveLength(2);
    await subscription.close();
    await backends.close();
    await expect
      .poll(async () => {
        const ids = await clientIds();
        return opened.filter((id) => ids.has(id));
      })
      .toEqual([]);
  });

  it('refuses hostile ids with a coded error that names the id', async () => {
    const store = createRedisInteractionStore({ client: client(), prefix: freshPrefix() });
    await expect(store.get('x'.repeat(600))).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(store.set('with\u0000nul', { meta: '{}', state: '1' }, null)).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('Interaction id') });
    const log = createRedisSessionLog({ client: client(), prefix: freshPrefix() });
    await expect(log.create('', { interactionId: 'i' })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });

  it('reports an unreachable or refusing server as STORE_ERROR without the password or the address', async () => {
    const wrongPassword = url().replace(/:[^:@]+@/, ':wrong-secret@');
    const unreachable = 'redis://:wrong-secret@127.0.0.1:1';
    for (const target of [wrongPassword, unreachable]) {
      const store = createRedisInteractionStore({ url: target });
      const error = await store.get('i-1').then(
        () => undefined,
        (caught: Error) => caught,
      );
      expect(error).toMatchObject({ code: 'STORE_ERROR', message: expect.stringContaining('interaction i-1 (redis: ') });
      expect(error?.message).not.toContain('wrong-secret');
      expect(error?.message).not.toContain('127.0.0.1');
      await store.close();
    }
  }, 30_000);
});
