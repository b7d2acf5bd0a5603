import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEventBusConformance, describeInteractionStoreConformance, describeSessionLogConformance } from '@org/core/testing';
import * as cases from '../test-support/shared-store-cases.js';
import { stallingProxyFor } from '../test-support/stalling-proxy.js';
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

describe('redis stores', () => {
  it('lets exactly one of two processes claim each interaction', async () => {
    const prefix = freshPrefix();
    await cases.expectOneClaimantPerRecord({
      entry: '@org/adapter-node/redis',
      factory: 'createRedisInteractionStore',
      storeOptions: { url: url(), prefix },
      openStore: () => createRedisInteractionStore({ url: url(), prefix }),
    });
  }, 60_000);

  it('numbers appends racing over two connections densely, each event at the index its writer got', async () => {
    const prefix = freshPrefix();
    await cases.expectDenseAppendsAcrossInstances(createRedisSessionLog({ url: url(), prefix }), createRedisSessionLog({ url: url(), prefix }));
  });

  it('keeps a record alive while its lease is renewed, since every write restarts the time to live', async () => {
    await cases.expectRenewalKeepsRecord(createRedisInteractionStore({ url: url(), prefix: freshPrefix(), ttlMs: 600 }));
  });

  it('hears the bus again after its subscriber connection is cut', async () => {
    const prefix = freshPrefix();
    // node-redis reconnects and subscribes again.
    await cases.expectBusHeardAfterCut(createRedisEventBus({ url: url(), prefix }), createRedisEventBus({ url: url(), prefix }), async () => {
      await client().sendCommand(['CLIENT', 'KILL', 'TYPE', 'pubsub']);
    });
  });

  it('shares one connection between the store, the log and the bus of createRedisBackends, and closes it', async () => {
    const clientIds = async () => new Set(String(await client().sendCommand(['CLIENT', 'LIST'])).match(/(?<=^id=)\d+/gm));
    const before = await clientIds();
    const backends = createRedisBackends({ url: url(), prefix: freshPrefix() });
    const subscription = await cases.expectBackendsWorkTogether(backends);
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

  it('reports a session hash edited into something else as a damaged record', async () => {
    const prefix = freshPrefix();
    const log = createRedisSessionLog({ client: client(), prefix });
    for (const [field, value] of [
      ['status', 'bogus'],
      ['count', 'abc'],
      ['count', '-1'],
    ] as const) {
      await client().sendCommand(['HSET', `${prefix}session:edited`, 'status', 'running', 'count', '0']);
      await client().sendCommand(['HSET', `${prefix}session:edited`, field, value]);
      await expect(log.get('edited'), `${field}=${value}`).rejects.toMatchObject({ code: 'STORE_ERROR', message: 'Session edited has a damaged record' });
    }
  });

  it('reads with any cursor and limit a caller may pass, as the other logs do', async () => {
    const log = createRedisSessionLog({ client: client(), prefix: freshPrefix() });
    await log.create('s-1', { interactionId: 'i-1' });
    await log.append('s-1', ['{"a":0}', '{"a":1}']);
    expect(await log.read('s-1', -1, Number.POSITIVE_INFINITY)).toEqual(['{"a":0}', '{"a":1}']);
    expect(await log.read('s-1', 0, 1e20)).toEqual(['{"a":1}']);
    expect(await log.read('s-1', 1e300, 10)).toEqual([]);
  });

  it('refuses hostile ids with a coded error that names the id', async () => {
    await cases.expectHostileIdsRefused(
      createRedisInteractionStore({ client: client(), prefix: freshPrefix() }),
      createRedisSessionLog({ client: client(), prefix: freshPrefix() }),
    );
  });

  it('reports an unreachable or refusing server as STORE_ERROR without the password or the address', async () => {
    const wrongPassword = url().replace(/:[^:@]+@/, ':wrong-secret@');
    const unreachable = 'redis://:wrong-secret@127.0.0.1:1';
    await cases.expectRefusalsWithoutSecrets((target) => createRedisInteractionStore({ url: target }), [wrongPassword, unreachable], 'interaction i-1 (redis: ');
  }, 30_000);
  it('fails a command with STORE_ERROR when Redis stops answering mid-operation, then works again on a new connection', async () => {
    const { proxy, url: through } = await stallingProxyFor(url());
    const prefix = freshPrefix();
    const store = createRedisInteractionStore({ url: through, prefix, commandTimeoutMs: 300 });
    const log = createRedisSessionLog({ url: through, prefix, commandTimeoutMs: 300 });
    try {
      const version = await store.set('i-1', { meta: '{}', state: '1' }, null);
      await log.create('s-1', { interactionId: 'i-1' });
      proxy.stall();
      await expect(store.set('i-1', { meta: '{"n":2}' }, version as string)).rejects.toMatchObject({
        code: 'STORE_ERROR',
        message: 'Could not save interaction i-1 (redis: TIMEOUT)',
      });
      await expect(log.append('s-1', ['{"a":1}'])).rejects.toMatchObject({ code: 'STORE_ERROR', message: 'Could not append to session s-1 (redis: TIMEOUT)' });
      // The silent connection is dropped: the next call opens a new one.
      expect(await store.get('i-1')).toEqual({ meta: '{}', state: '1', version });
      expect(await log.get('s-1')).toMatchObject({ status: 'running', eventCount: 0 });
    } finally {
      await closeAll([store, log]);
      await proxy.stop();
    }
  });
  it('fails a subscription with STORE_ERROR when the subscriber connection stops answering, and still closes', async () => {
    const { proxy, url: through } = await stallingProxyFor(url());
    const bus = createRedisEventBus({ url: through, prefix: freshPrefix(), commandTimeoutMs: 300 });
    try {
      await bus.subscribe('session:a', () => undefined);
      proxy.stall();
      await expect(bus.subscribe('session:b', () => undefined)).rejects.toMatchObject({
        code: 'STORE_ERROR',
        message: 'Could not subscribe to session:b (redis: TIMEOUT)',
      });
      await expect(bus.publish('session:a', '{}')).rejects.toMatchObject({ code: 'STORE_ERROR', message: 'Could not publish to session:a (redis: TIMEOUT)' });
      await bus.close();
    } finally {
      await proxy.stop();
    }
  });
});
