import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEventBusConformance, describeInteractionStoreConformance, describeSessionLogConformance } from '@org/core/testing';
import { startPostgresServer, type TestPostgresServer } from '../test-support/start-postgres-server.js';
import {
  createPostgresBackends,
  createPostgresEventBus,
  createPostgresInteractionStore,
  createPostgresSessionLog,
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

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('postgres stores', () => {
  it('lets exactly one of two processes claim each interaction', async () => {
    const prefix = freshPrefix();
    const ids = Array.from({ length: 20 }, (_, index) => `race-${index}`);
    const store = createPostgresInteractionStore({ url: url(), prefix });
    for (const id of ids) await store.set(id, { meta: '{"owner":"alice"}', state: JSON.stringify({ id }) }, null);
    await store.close();
    // Each process takes a lease on every id ten times over, as the runtime's claim does; the
    // package is imported by its name, as an app would.
    const script = `
      const { createPostgresInteractionStore } = await import('@org/adapter-node/postgres');
      const store = createPostgresInteractionStore({ url: ${JSON.stringify(url())}, prefix: ${JSON.stringify(prefix)} });
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
    const check = createPostgresInteractionStore({ pool: pool(), prefix });
    for (const id of ids) expect((await check.get(id))?.state).toBe(JSON.stringify({ id }));
  }, 60_000);

  it('numbers appends racing over two pools densely, each event at the index its writer got', async () => {
    const prefix = freshPrefix();
    const [one, two] = [createPostgresSessionLog({ url: url(), prefix }), createPostgresSessionLog({ url: url(), prefix })];
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

  it('keeps texts PostgreSQL cannot hold as such exactly: NUL characters and the escape marker', async () => {
    const log = createPostgresSessionLog({ pool: pool(), prefix: freshPrefix() });
    const odd = ['{"a":"\u0000"}', '\u0001{"b":1}', '"\u0001"', ''];
    await log.create('s-odd', { interactionId: 'i-\u0001', owner: 'owner\u0000x' });
    await log.append('s-odd', odd);
    expect(await log.read('s-odd', -1, 10)).toEqual(odd);
    expect(await log.get('s-odd')).toEqual({ status: 'running', eventCount: 4, interactionId: 'i-\u0001', owner: 'owner\u0000x' });
  });

  it('keeps a record alive while its lease is renewed, since every write restarts the time to live', async () => {
    const store = createPostgresInteractionStore({ pool: pool(), prefix: freshPrefix(), ttlMs: 600 });
    let version = (await store.set('renewed', { meta: '{}', state: '"kept"' }, null)) as string;
    for (let round = 0; round < 4; round += 1) {
      await sleep(300);
      version = (await store.set('renewed', { meta: `{"round":${round}}` }, version)) as string;
    }
    expect((await store.get('renewed'))?.state).toBe('"kept"');
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
    const publisher = createPostgresEventBus({ url: url(), prefix });
    const heard: string[] = [];
    const subscription = await listener.subscribe('session:s-1', (message) => heard.push(message));
    const cut = await pool().query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, [name]);
    expect(cut.rowCount).toBe(1);
    // The bus takes a new connection and listens again; what was sent meanwhile is lost (the log is the truth).
    const deadline = Date.now() + 10_000;
    while (!heard.includes('e:1') && Date.now() < deadline) {
      await publisher.publish('session:s-1', 'e:1');
      await sleep(50);
    }
    expect(heard).toContain('e:1');
    await subscription.close();
    await Promise.all([listener.close(), publisher.close()]);
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
    const heard: string[] = [];
    const subscription = await backends.bus.subscribe('session:s-1', (message) => heard.push(message));
    await backends.log.create('s-1', { interactionId: 'i-1' });
    await backends.log.append('s-1', ['{"a":1}']);
    await backends.bus.publish('session:s-1', 'e:0');
    await backends.store.set('i-1', { meta: '{}', state: '1' }, null);
    await expect.poll(() => heard).toEqual(['e:0']);
    expect(await backends.log.read('s-1', -1, 10)).toEqual(['{"a":1}']);
    expect((await backends.store.get('i-1'))?.state).toBe('1');
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

  it('refuses hostile ids with a coded error that names the id', async () => {
    const store = createPostgresInteractionStore({ pool: pool(), prefix: freshPrefix() });
    await expect(store.get('x'.repeat(600))).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(store.set('with\u0000nul', { meta: '{}', state: '1' }, null)).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('Interaction id'),
    });
    const log = createPostgresSessionLog({ pool: pool(), prefix: freshPrefix() });
    await expect(log.append('bad\nid', ['{}'])).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });

  it('reports a refused login or an unreachable server as STORE_ERROR without the password or the address', async () => {
    const wrongPassword = url().replace(/:[^:@/]+@/, ':wrong-secret@');
    const unreachable = `postgres://postgres:wrong-secret@127.0.0.1:1/postgres`;
    for (const target of [wrongPassword, unreachable]) {
      const store = createPostgresInteractionStore({ url: target });
      const error = await store.get('i-1').then(
        () => undefined,
        (caught: Error) => caught,
      );
      expect(error).toMatchObject({ code: 'STORE_ERROR', message: expect.stringContaining('postgres:') });
      expect(error?.message).not.toContain('wrong-secret');
      expect(error?.message).not.toContain('127.0.0.1');
      await store.close();
    }
  });
});
