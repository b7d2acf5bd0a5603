import { randomUUID } from 'node:crypto';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEventBusConformance, describeInteractionStoreConformance, describeSessionLogConformance } from '@org/core/testing';
import * as cases from '../test-support/shared-store-cases.js';
import { stallingProxyFor } from '../test-support/stalling-proxy.js';
import { startPostgresServer, type TestPostgresServer } from '../test-support/start-postgres-server.js';
import {
  createPostgresBackends,
  createPostgresEventBus,
  createPostgresInteractionStore,
  createPostgresSessionLog,
  migratePostgres,
  postgresSchema,
} from '../postgres.js';

let server: TestPostgresServer | undefined;
let shared: pg.Pool | undefined;

beforeAll(async () => {
  server = await startPostgresServer();
  shared = new pg.Pool({ connectionString: server.url });
}, 60_000);

afterAll(async () => {
  await shared?.end();
  await server?.stop();
});

const url = () => {
  if (!server) throw new Error('PostgreSQL did not start (see the error of beforeAll)');
  return server.url;
};
const pool = () => shared as pg.Pool;
/** Fresh tables for each store: a case starts from an empty database. */
const freshPrefix = () => `t${randomUUID().replace(/-/g, '').slice(0, 16)}_`;
const closeAll = async (items: object[]) => {
  await Promise.all(items.map((item) => (item as { close?: () => Promise<void> }).close?.()));
};
const api = { describe, it, expect };

// The store opens its own pool from a URL; the log shares a pool of ours.
describeInteractionStoreConformance('postgres', (options) => createPostgresInteractionStore({ url: url(), prefix: freshPrefix(), ...options }), api, {
  cleanup: closeAll,
});
describeSessionLogConformance('postgres', (options) => createPostgresSessionLog({ pool: pool(), prefix: freshPrefix(), ...options }), api, {
  cleanup: closeAll,
});
// Each bus opens its own pool and listening connection: two buses stand for two instances.
const busPrefix = freshPrefix();
describeEventBusConformance('postgres', () => createPostgresEventBus({ url: url(), prefix: busPrefix }), api, { cleanup: closeAll });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('postgres stores', () => {
  it('lets exactly one of two processes claim each interaction', async () => {
    const prefix = freshPrefix();
    await cases.expectOneClaimantPerRecord({
      entry: '@org/adapter-node/postgres',
      factory: 'createPostgresInteractionStore',
      storeOptions: { url: url(), prefix },
      openStore: () => createPostgresInteractionStore({ pool: pool(), prefix }),
    });
  }, 60_000);

  it('numbers appends racing over two pools densely, each event at the index its writer got', async () => {
    const prefix = freshPrefix();
    await cases.expectDenseAppendsAcrossInstances(createPostgresSessionLog({ url: url(), prefix }), createPostgresSessionLog({ url: url(), prefix }));
  });

  it('keeps texts PostgreSQL cannot hold as such exactly: NUL characters and the escape marker', async () => {
    const log = createPostgresSessionLog({ pool: pool(), prefix: freshPrefix() });
    const odd = ['{"a":"\u0000"}', '\u0001{"b":1}', '"\u0001"', ''];
    await log.create('s-odd', { interactionId: 'i-\u0001', owner: 'owner\u0000x' });
    await log.append('s-odd', odd);
    expect(await log.read('s-odd', -1, 10)).toEqual(odd);
    expect(await log.get('s-odd')).toEqual({ status: 'running', eventCount: 4, interactionId: 'i-\u0001', owner: 'owner\u0000x' });
  });

  it('keeps a record alive while its lease is renewed, since every write restarts the time to live', async () => {
    await cases.expectRenewalKeepsRecord(createPostgresInteractionStore({ pool: pool(), prefix: freshPrefix(), ttlMs: 600 }));
  });

  it('deletes expired rows, and the events of expired sessions, after later writes', async () => {
    const prefix = freshPrefix();
    const store = createPostgresInteractionStore({ pool: pool(), prefix, ttlMs: 200 });
    const log = createPostgresSessionLog({ pool: pool(), prefix, ttlMs: 200 });
    await store.set('old', { meta: '{}', state: '"x"' }, null);
    await log.create('s-old', { interactionId: 'old' });
    await log.append('s-old', ['{"a":1}', '{"a":2}']);
    await sleep(400);
    await store.set('new', { meta: '{}', state: '1' }, null);
    await log.create('s-new', { interactionId: 'new' });
    const count = async (table: string) => Number((await pool().query(`SELECT count(*) AS n FROM "${prefix}${table}"`)).rows[0].n);
    await expect.poll(() => count('interactions')).toBe(1);
    await expect.poll(() => count('sessions')).toBe(1);
    expect(await count('session_events')).toBe(0);
  });

  it('hears the bus again after its listening connection is cut', async () => {
    const prefix = freshPrefix();
    const name = `listener-${randomUUID().slice(0, 8)}`;
    const listener = createPostgresEventBus({ url: `${url()}?application_name=${name}`, prefix });
    // The bus takes a new connection and listens again.
    await cases.expectBusHeardAfterCut(listener, createPostgresEventBus({ url: url(), prefix }), async () => {
      const cut = await pool().query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, [name]);
      expect(cut.rowCount).toBe(1);
    });
  });

  it('refuses a bus message PostgreSQL could not carry, before sending it', async () => {
    const bus = createPostgresEventBus({ pool: pool(), prefix: freshPrefix() });
    await expect(bus.publish('session:s-1', 'x'.repeat(8_000))).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    await bus.close();
  });

  it('shares one pool between the store, the log and the bus of createPostgresBackends, and closes it', async () => {
    const name = `backends-${randomUUID().slice(0, 8)}`;
    const connections = async () => Number((await pool().query(`SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1`, [name])).rows[0].n);
    const backends = createPostgresBackends({ url: `${url()}?application_name=${name}`, prefix: freshPrefix() });
    const subscription = await cases.expectBackendsWorkTogether(backends);
    // The bus keeps one connection for LISTEN; the store and the log share the others.
    expect(await connections()).toBeGreaterThanOrEqual(2);
    await subscription.close();
    await backends.close();
    await expect.poll(connections).toBe(0);
  });

  it('creates the tables once when many instances start together, or leaves them to you with migrate: false', async () => {
    const prefix = freshPrefix();
    const stores = Array.from({ length: 6 }, () => createPostgresInteractionStore({ url: url(), prefix }));
    const versions = await Promise.all(stores.map((store, index) => store.set(`i-${index}`, { meta: '{}', state: String(index) }, null)));
    expect(versions.every((version) => typeof version === 'string')).toBe(true);
    await closeAll(stores);

    const manual = freshPrefix();
    const store = createPostgresInteractionStore({ pool: pool(), prefix: manual, migrate: false });
    await expect(store.get('i-1')).rejects.toMatchObject({ code: 'STORE_ERROR', message: expect.stringContaining('42P01') });
    await pool().query(postgresSchema({ prefix: manual }));
    expect(await store.set('i-1', { meta: '{}', state: '1' }, null)).toEqual(expect.any(String));
  });

  it('reports a gap in the events of a session as a damaged log, never shifting later events onto its index', async () => {
    const prefix = freshPrefix();
    const log = createPostgresSessionLog({ pool: pool(), prefix });
    await log.create('gap', { interactionId: 'i-1' });
    await log.append('gap', ['{"n":0}', '{"n":1}', '{"n":2}', '{"n":3}']);
    await pool().query(`DELETE FROM "${prefix}session_events" WHERE session_id = 'gap' AND event_index = 1`);
    expect(await log.read('gap', -1, 1)).toEqual(['{"n":0}']);
    await expect(log.read('gap', -1, 10)).rejects.toMatchObject({ code: 'STORE_ERROR', message: 'Session gap has a damaged event log at event 1' });
    await expect(log.read('gap', 0, 10)).rejects.toMatchObject({ code: 'STORE_ERROR', message: 'Session gap has a damaged event log at event 1' });
    expect(await log.read('gap', 1, 10)).toEqual(['{"n":2}', '{"n":3}']);
  });

  it('reports a session row edited into an unknown status as a damaged record', async () => {
    const prefix = freshPrefix();
    const log = createPostgresSessionLog({ pool: pool(), prefix });
    await log.create('edited', { interactionId: 'i-1' });
    await pool().query(`UPDATE "${prefix}sessions" SET status = 'bogus' WHERE id = 'edited'`);
    await expect(log.get('edited')).rejects.toMatchObject({ code: 'STORE_ERROR', message: 'Session edited has a damaged record' });
    await pool().query(`UPDATE "${prefix}sessions" SET status = 'running', event_count = -1 WHERE id = 'edited'`);
    await expect(log.get('edited')).rejects.toMatchObject({ code: 'STORE_ERROR', message: 'Session edited has a damaged record' });
  });

  it('refuses hostile ids with a coded error that names the id', async () => {
    await cases.expectHostileIdsRefused(
      createPostgresInteractionStore({ pool: pool(), prefix: freshPrefix() }),
      createPostgresSessionLog({ pool: pool(), prefix: freshPrefix() }),
    );
  });

  it('reports a refused login or an unreachable server as STORE_ERROR without the password or the address', async () => {
    const wrongPassword = url().replace(/:[^:@/]+@/, ':wrong-secret@');
    const unreachable = `postgres://postgres:wrong-secret@127.0.0.1:1/postgres`;
    await cases.expectRefusalsWithoutSecrets((target) => createPostgresInteractionStore({ url: target }), [wrongPassword, unreachable], 'postgres:');
  });

  it('fails a call with STORE_ERROR when the database takes connections but never answers, after connectTimeoutMs', async () => {
    // A server that accepts the connection and then says nothing, as a host behind a dropped route.
    const sockets: Socket[] = [];
    const silent = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as AddressInfo).port;
    const store = createPostgresInteractionStore({ url: `postgres://postgres:secret@127.0.0.1:${port}/postgres`, connectTimeoutMs: 200 });
    try {
      const failure = await store.get('i-1').then(() => undefined, (error: unknown) => error);
      expect(failure).toMatchObject({ code: 'STORE_ERROR' });
      expect(String((failure as Error).message)).not.toContain('secret');
    } finally {
      await store.close();
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });
  it('fails a query with STORE_ERROR when the database stops answering mid-operation, then works again on a new connection', async () => {
    const { proxy, url: through } = await stallingProxyFor(url());
    const prefix = freshPrefix();
    const direct = createPostgresInteractionStore({ pool: pool(), prefix });
    const version = await direct.set('i-1', { meta: '{}', state: '1' }, null);
    const store = createPostgresInteractionStore({ url: through, prefix, queryTimeoutMs: 300 });
    try {
      // One connection through the proxy, idle in the pool when the database goes silent.
      expect(await store.get('i-1')).toEqual({ meta: '{}', state: '1', version });
      proxy.stall();
      await expect(store.set('i-1', { meta: '{"n":2}' }, version as string)).rejects.toMatchObject({
        code: 'STORE_ERROR',
        message: 'Could not save interaction i-1 (postgres: TIMEOUT)',
      });
      // The silent connection was dropped from the pool: the next call opens a new one.
      expect(await store.get('i-1')).toEqual({ meta: '{}', state: '1', version });
    } finally {
      await store.close();
      await proxy.stop();
    }
  });
  it('fails a subscription with STORE_ERROR when the listening connection stops answering, then listens again on a new one', async () => {
    const { proxy, url: through } = await stallingProxyFor(url());
    const prefix = freshPrefix();
    await migratePostgres({ pool: pool(), prefix });
    const listener = createPostgresEventBus({ url: through, prefix, queryTimeoutMs: 300 });
    const publisher = createPostgresEventBus({ pool: pool(), prefix });
    try {
      const heard: string[] = [];
      await listener.subscribe('session:a', (message) => heard.push(message));
      proxy.stall();
      await expect(listener.subscribe('session:b', () => undefined)).rejects.toMatchObject({
        code: 'STORE_ERROR',
        message: 'Could not subscribe to session:b (postgres: TIMEOUT)',
      });
      // The silent connection is replaced and session:a listened to again; what was sent in
      // between may be lost (readers catch up from the log), so publish until it is heard.
      await expect
        .poll(
          async () => {
            await publisher.publish('session:a', '{"n":1}');
            return heard.length > 0;
          },
          { timeout: 10_000, interval: 100 },
        )
        .toBe(true);
      expect(heard[0]).toBe('{"n":1}');
    } finally {
      await listener.close();
      await publisher.close();
      await proxy.stop();
    }
  }, 20_000);
  it('reports a stored text that is not what the store writes as a damaged record, never a bare parse error or a number', async () => {
    const prefix = freshPrefix();
    const store = createPostgresInteractionStore({ pool: pool(), prefix });
    const log = createPostgresSessionLog({ pool: pool(), prefix });
    await store.set('i-1', { meta: '{}', state: '1' }, null);
    await log.create('s-1', { interactionId: 'i-1' });
    await log.append('s-1', ['{"a":0}', '{"a":1}']);
    // The escape marker followed by something that is not a JSON string: a hand edit, or a row
    // another program wrote.
    await pool().query(`UPDATE "${prefix}interactions" SET state = E'\\u0001{"cut' WHERE id = 'i-1'`);
    await expect(store.get('i-1')).rejects.toMatchObject({ code: 'STORE_ERROR', message: 'Interaction i-1 has a damaged record' });
    await pool().query(`UPDATE "${prefix}interactions" SET state = E'\\u000142' WHERE id = 'i-1'`);
    await expect(store.get('i-1')).rejects.toMatchObject({ code: 'STORE_ERROR', message: 'Interaction i-1 has a damaged record' });
    await pool().query(`UPDATE "${prefix}sessions" SET owner = E'\\u0001null' WHERE id = 's-1'`);
    await expect(log.get('s-1')).rejects.toMatchObject({ code: 'STORE_ERROR', message: 'Session s-1 has a damaged record' });
    await pool().query(`UPDATE "${prefix}session_events" SET event = E'\\u0001[' WHERE session_id = 's-1' AND event_index = 1`);
    expect(await log.read('s-1', -1, 1)).toEqual(['{"a":0}']);
    await expect(log.read('s-1', -1, 10)).rejects.toMatchObject({ code: 'STORE_ERROR', message: 'Session s-1 has a damaged event log at event 1' });
  });
  it('notices a listening connection that went silent while idle, and listens again on a new one', async () => {
    const { proxy, url: through } = await stallingProxyFor(url());
    const prefix = freshPrefix();
    await migratePostgres({ pool: pool(), prefix });
    const listener = createPostgresEventBus({ url: through, prefix, queryTimeoutMs: 300 });
    const publisher = createPostgresEventBus({ pool: pool(), prefix });
    try {
      const heard: string[] = [];
      await listener.subscribe('session:a', (message) => heard.push(message));
      // A route dropped (a NAT that forgot the connection): nothing errors, nothing arrives.
      proxy.stall();
      await expect
        .poll(
          async () => {
            await publisher.publish('session:a', '{"n":1}');
            return heard.length > 0;
          },
          { timeout: 10_000, interval: 100 },
        )
        .toBe(true);
    } finally {
      await listener.close();
      await publisher.close();
      await proxy.stop();
    }
  }, 20_000);
});
