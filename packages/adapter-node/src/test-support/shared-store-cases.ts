import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import type { EventBus, InteractionStore, SessionLog } from '@org/core';

/**
 * What stores that several processes share (a folder, Redis, PostgreSQL) must do beyond the
 * conformance suites, written once for all of them: the behaviour that only shows with two
 * processes or two connections on one store, with time to live, with hostile ids and with a
 * server that refuses us.
 */

type Closable<T> = T & { close(): Promise<void> };

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Two processes race to take a lease on each of 20 records, ten times over each, as the runtime's
 * claim does: every record is won exactly once, and its state is untouched.
 */
export async function expectOneClaimantPerRecord(options: {
  /** The module and the factory the child processes call, e.g. `@org/adapter-node/redis`, `createRedisInteractionStore`. */
  entry: string;
  factory: string;
  /** The factory's options (JSON) for the records of this case: a URL and a fresh prefix, a folder. */
  storeOptions: Record<string, unknown>;
  /** A store on the same records, in this process. */
  openStore: () => InteractionStore & { close?(): Promise<void> };
}): Promise<void> {
  const ids = Array.from({ length: 20 }, (_, index) => `race-${index}`);
  const store = options.openStore();
  for (const id of ids) await store.set(id, { meta: '{"owner":"alice"}', state: JSON.stringify({ id }) }, null);
  const script = `
    const { ${options.factory} } = await import(${JSON.stringify(options.entry)});
    const store = ${options.factory}(${JSON.stringify(options.storeOptions)});
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
    await store.close?.();
    console.log(JSON.stringify(won));`;
  const run = () => promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { cwd: packageRoot });
  const [first, second] = await Promise.all([run(), run()]);
  const wins = [...(JSON.parse(first.stdout) as string[]), ...(JSON.parse(second.stdout) as string[])].sort();
  expect(wins).toEqual([...ids].sort());
  for (const id of ids) expect((await store.get(id))?.state).toBe(JSON.stringify({ id }));
  await store.close?.();
}

/**
 * Two logs on one server (two instances) append to one session at once: the indexes are dense,
 * and each event sits at the index its writer was told.
 */
export async function expectDenseAppendsAcrossInstances(one: Closable<SessionLog>, two: Closable<SessionLog>): Promise<void> {
  await one.create('s-race', { interactionId: 'i-1' });
  const writes = Array.from({ length: 100 }, (_, index) => ({ log: index % 2 === 0 ? one : two, events: [`{"n":${index},"part":0}`, `{"n":${index},"part":1}`] }));
  const firsts = await Promise.all(writes.map((write) => write.log.append('s-race', write.events)));
  expect([...firsts].sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, index) => index * 2));
  const events = await two.read('s-race', -1, 1_000);
  expect(events).toHaveLength(200);
  for (const [index, write] of writes.entries()) expect(events.slice(firsts[index], (firsts[index] as number) + 2)).toEqual(write.events);
  expect((await one.get('s-race'))?.eventCount).toBe(200);
  await Promise.all([one.close(), two.close()]);
}

/** A store whose `ttlMs` is 600 keeps a record written every 300 ms: each write restarts its time to live. */
export async function expectRenewalKeepsRecord(store: Closable<InteractionStore>): Promise<void> {
  let version = (await store.set('renewed', { meta: '{}', state: '"kept"' }, null)) as string;
  for (let round = 0; round < 4; round += 1) {
    await sleep(300);
    version = (await store.set('renewed', { meta: `{"round":${round}}` }, version)) as string;
  }
  expect((await store.get('renewed'))?.state).toBe('"kept"');
  await store.close();
}

/**
 * A bus whose listening connection `cut` ends hears messages again once it has reconnected;
 * what was published meanwhile is lost, which the runtime allows (the log is the truth).
 */
export async function expectBusHeardAfterCut(listener: Closable<EventBus>, publisher: Closable<EventBus>, cut: () => Promise<void>): Promise<void> {
  const heard: string[] = [];
  const subscription = await listener.subscribe('session:s-1', (message) => heard.push(message));
  await cut();
  const deadline = Date.now() + 10_000;
  while (!heard.includes('e:1') && Date.now() < deadline) {
    await publisher.publish('session:s-1', 'e:1');
    await sleep(50);
  }
  expect(heard).toContain('e:1');
  await subscription.close();
  await Promise.all([listener.close(), publisher.close()]);
}

/**
 * `createRedisBackends` / `createPostgresBackends`: the store, the log and the bus work over their
 * one shared connection (or pool). `close` ends it; the caller checks the connections it opened.
 */
export async function expectBackendsWorkTogether(backends: { store: InteractionStore; log: SessionLog; bus: EventBus }): Promise<{ close(): Promise<void> }> {
  const heard: string[] = [];
  const subscription = await backends.bus.subscribe('session:s-1', (message) => heard.push(message));
  await backends.log.create('s-1', { interactionId: 'i-1' });
  await backends.log.append('s-1', ['{"a":1}']);
  await backends.bus.publish('session:s-1', 'e:0');
  await backends.store.set('i-1', { meta: '{}', state: '1' }, null);
  await expect.poll(() => heard).toEqual(['e:0']);
  expect(await backends.log.read('s-1', -1, 10)).toEqual(['{"a":1}']);
  expect((await backends.store.get('i-1'))?.state).toBe('1');
  return subscription;
}

/** An id too long, one with a NUL, and an empty or multi-line session id are refused as `BAD_REQUEST`, naming the id. */
export async function expectHostileIdsRefused(store: InteractionStore, log: SessionLog): Promise<void> {
  await expect(store.get('x'.repeat(600))).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  await expect(store.set('with\u0000nul', { meta: '{}', state: '1' }, null)).rejects.toMatchObject({
    code: 'BAD_REQUEST',
    message: expect.stringContaining('Interaction id'),
  });
  await expect(log.create('', { interactionId: 'i' })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  await expect(log.append('bad\nid', ['{}'])).rejects.toMatchObject({ code: 'BAD_REQUEST' });
}

/**
 * A store pointed at `targets` (a wrong password, a closed port; both with the password
 * `wrong-secret` and the host 127.0.0.1) fails with `STORE_ERROR` holding `marker`, and neither
 * the password nor the address.
 */
export async function expectRefusalsWithoutSecrets(openStore: (url: string) => Closable<InteractionStore>, targets: string[], marker: string): Promise<void> {
  for (const target of targets) {
    const store = openStore(target);
    const error = await store.get('i-1').then(
      () => undefined,
      (caught: Error) => caught,
    );
    expect(error).toMatchObject({ code: 'STORE_ERROR', message: expect.stringContaining(marker) });
    expect(error?.message).not.toContain('wrong-secret');
    expect(error?.message).not.toContain('127.0.0.1');
    await store.close();
  }
}
