import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { describeInteractionStoreConformance } from '@org/core/testing';
import { mixedText } from '../test/helpers.js';
import { createKvInteractionStore, KV_MAX_VALUE_BYTES } from './kv-interaction-store.js';

describeInteractionStoreConformance(
  'KV store',
  (options) => createKvInteractionStore(env.INTERACTIONS_KV, { prefix: `conformance-${crypto.randomUUID()}:`, ...options }),
  { describe, it, expect },
  { consistency: 'eventual' },
);

describeInteractionStoreConformance(
  'KV store with states split into 1 MiB pieces',
  (options) => createKvInteractionStore(env.INTERACTIONS_KV, { prefix: `pieces-${crypto.randomUUID()}:`, pieceBytes: 1024 * 1024, ...options }),
  { describe, it, expect },
  { consistency: 'eventual' },
);

async function keysUnder(prefix: string): Promise<KVNamespaceListKey<unknown>[]> {
  return (await env.INTERACTIONS_KV.list({ prefix })).keys;
}

/** The test KV namespace, recording the key of every `put` made through it. */
function recordingKv(): { kv: KVNamespace; puts: string[] } {
  const puts: string[] = [];
  const real = env.INTERACTIONS_KV;
  const kv = {
    get: real.get.bind(real),
    getWithMetadata: real.getWithMetadata.bind(real),
    list: real.list.bind(real),
    delete: real.delete.bind(real),
    put: (key: string, value: string | ArrayBuffer | ArrayBufferView | ReadableStream, options?: KVNamespacePutOptions) => {
      puts.push(key);
      return real.put(key, value, options);
    },
  } as unknown as KVNamespace;
  return { kv, puts };
}

describe('createKvInteractionStore', () => {
  it('keeps a small record in one key, and a 6 MB state in a piece key beside it, returned whole', async () => {
    const prefix = `big-${crypto.randomUUID()}:`;
    const store = createKvInteractionStore(env.INTERACTIONS_KV, { prefix });
    await store.set('small', { meta: '{"owner":"a"}', state: '{"step":1}' }, null);
    expect((await keysUnder(prefix)).map((key) => key.name)).toEqual([`${prefix}small`]);

    const state = JSON.stringify({ notes: mixedText(3_000_000), image: 'iVBORw0KGgo'.repeat(300_000) });
    const version = (await store.set('big', { meta: '{}', state }, null)) as string;
    expect((await keysUnder(`${prefix}big`)).length).toBe(2);
    expect((await store.get('big'))?.state === state).toBe(true);
    expect(await store.delete('big', version)).toBe(true);
    expect((await keysUnder(prefix)).map((key) => key.name)).toEqual([`${prefix}small`]);
  });

  it('splits a state above the 25 MiB KV limit across keys instead of failing or truncating', async () => {
    const prefix = `over-limit-${crypto.randomUUID()}:`;
    const store = createKvInteractionStore(env.INTERACTIONS_KV, { prefix });
    const state = JSON.stringify({ data: 'QUJD'.repeat(7 * 1024 * 1024) });
    expect(state.length).toBeGreaterThan(KV_MAX_VALUE_BYTES);
    await store.set('over', { meta: '{}', state }, null);
    expect((await keysUnder(prefix)).length).toBe(3);
    expect((await store.get('over'))?.state === state).toBe(true);
    await store.delete('over');
    expect(await keysUnder(prefix)).toEqual([]);
  });

  it('removes the pieces of a split state on delete and when a write replaces the state', async () => {
    const prefix = `pieces-${crypto.randomUUID()}:`;
    const store = createKvInteractionStore(env.INTERACTIONS_KV, { prefix, pieceBytes: 1024 * 1024 });
    const first = (await store.set('split', { meta: '{}', state: JSON.stringify('p'.repeat(5 * 1024 * 1024)) }, null)) as string;
    expect((await keysUnder(prefix)).length).toBe(7);
    const second = (await store.set('split', { meta: '{}', state: '"small"' }, first)) as string;
    expect((await keysUnder(prefix)).map((key) => key.name)).toEqual([`${prefix}split`]);
    await store.set('split', { meta: '{}', state: JSON.stringify('p'.repeat(3 * 1024 * 1024)) }, second);
    expect(await store.delete('split')).toBe(true);
    expect(await keysUnder(prefix)).toEqual([]);
  });

  it('writes only the record key when meta alone changes, and renews the pieces before the record outlives them', async () => {
    const prefix = `renew-${crypto.randomUUID()}:`;
    const { kv, puts } = recordingKv();
    let clock = 1_000_000_000;
    const hour = 60 * 60 * 1000;
    const store = createKvInteractionStore(kv, { prefix, pieceBytes: 1024 * 1024, ttlMs: hour, now: () => clock });
    const state = JSON.stringify('r'.repeat(3 * 1024 * 1024));
    let version = (await store.set('held', { meta: '{"n":0}', state }, null)) as string;
    const pieces = puts.filter((key) => key.includes('#'));
    expect(pieces.length).toBe(4);

    // Lease renewals every half hour: the pieces (kept for two hours) are not written again ...
    puts.length = 0;
    for (let renewal = 1; renewal <= 2; renewal += 1) {
      clock += hour / 2;
      version = (await store.set('held', { meta: `{"n":${renewal}}` }, version)) as string;
    }
    expect(puts).toEqual([`${prefix}held`, `${prefix}held`]);
    // ... until the record would live past them: then they are written again, and the state stays whole.
    clock += hour / 2 + 1;
    version = (await store.set('held', { meta: '{"n":3}' }, version)) as string;
    expect(puts.slice(2).sort()).toEqual([...pieces, `${prefix}held`].sort());
    const record = await store.get('held');
    expect(record?.meta).toBe('{"n":3}');
    expect(record?.state === state).toBe(true);
  });

  it('in one location, reports writes that another write visibly overtook as lost, and removes their pieces', async () => {
    const prefix = `race-${crypto.randomUUID()}:`;
    const store = createKvInteractionStore(env.INTERACTIONS_KV, { prefix, pieceBytes: 1024 * 1024 });
    const version = (await store.set('race', { meta: '{}', state: '"base"' }, null)) as string;
    const letters = ['a', 'b', 'c', 'd', 'e', 'f'];
    const stateOf = (letter: string) => JSON.stringify(letter.repeat(2 * 1024 * 1024 + 100));
    const results = await Promise.all(letters.map((letter) => store.set('race', { meta: `{"by":"${letter}"}`, state: stateOf(letter) }, version)));
    const winners = letters.filter((_, index) => results[index] !== undefined);
    expect(winners.length).toBeGreaterThanOrEqual(1);
    const record = await store.get('race');
    expect(winners).toContain(JSON.parse(record?.meta ?? '{}').by);
    expect(record?.state === stateOf(JSON.parse(record?.meta ?? '{}').by)).toBe(true);
    // Whatever pieces are left belong to a write that was told it won: no loser left any behind.
    const pieceKeys = (await keysUnder(prefix)).filter((key) => key.name.includes('#'));
    const owners = await Promise.all(pieceKeys.map(async (key) => (await env.INTERACTIONS_KV.get(key.name))?.[1]));
    expect(owners.every((letter) => letter !== undefined && winners.includes(letter))).toBe(true);
  });

  it('gives every key a KV expiration from ttlMs, at least the 60 s KV allows, and reads expired records as absent', async () => {
    const prefix = `ttl-${crypto.randomUUID()}:`;
    const before = Math.floor(Date.now() / 1000);
    await createKvInteractionStore(env.INTERACTIONS_KV, { prefix, ttlMs: 3_600_000 }).set('hour', { meta: '{}', state: '1' }, null);
    await createKvInteractionStore(env.INTERACTIONS_KV, { prefix, ttlMs: 500 }).set('short', { meta: '{}', state: '1' }, null);
    const expirations = Object.fromEntries((await keysUnder(prefix)).map((key) => [key.name.slice(prefix.length), (key.expiration ?? 0) - before]));
    expect(expirations.hour).toBeGreaterThanOrEqual(3600 - 1);
    expect(expirations.hour).toBeLessThanOrEqual(3600 + 5);
    expect(expirations.short).toBeGreaterThanOrEqual(60 - 1);
    expect(expirations.short).toBeLessThanOrEqual(60 + 5);
    expect(() => createKvInteractionStore(env.INTERACTIONS_KV, { ttlMs: -1 })).toThrow(/ttlMs must be a positive number/);
  });

  it('refuses a state above maxStateBytes with PAYLOAD_TOO_LARGE naming the id and size, writing nothing', async () => {
    const prefix = `refused-${crypto.randomUUID()}:`;
    const store = createKvInteractionStore(env.INTERACTIONS_KV, { prefix, maxStateBytes: 1000 });
    expect(store.maxStateBytes).toBe(1000);
    expect(createKvInteractionStore(env.INTERACTIONS_KV).maxStateBytes).toBe(32 * 1024 * 1024);
    const state = JSON.stringify({ data: 'x'.repeat(2000) });
    await expect(store.set('too-big', { meta: '{}', state }, null)).rejects.toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
      message: `Interaction too-big is ${state.length} bytes of JSON, more than this store's limit of 1000 bytes`,
    });
    expect(await keysUnder(prefix)).toEqual([]);
  });

  it('reports a split state whose pieces are missing as STORE_ERROR rather than returning part of it', async () => {
    const prefix = `torn-${crypto.randomUUID()}:`;
    const store = createKvInteractionStore(env.INTERACTIONS_KV, { prefix, pieceBytes: 1024 * 1024 });
    await store.set('torn', { meta: '{}', state: JSON.stringify('t'.repeat(3 * 1024 * 1024)) }, null);
    const pieces = (await keysUnder(prefix)).filter((key) => key.name.includes('#'));
    await env.INTERACTIONS_KV.delete(pieces[1]?.name as string);
    await expect(store.get('torn')).rejects.toMatchObject({
      code: 'STORE_ERROR',
      message: expect.stringContaining('Interaction torn is stored incompletely'),
    });
  });

  it('reports a failure of KV as STORE_ERROR with a reason word, never the platform message', async () => {
    const fault = new Error('KV GET failed: 500 Internal Server Error (account 0123abcd, namespace interactions-prod)');
    const kv = {
      getWithMetadata: async () => {
        throw fault;
      },
    } as unknown as KVNamespace;
    await expect(createKvInteractionStore(kv).get('i-1')).rejects.toMatchObject({ code: 'STORE_ERROR', message: 'Could not read interaction i-1 (error)', cause: fault });
  });

  it('refuses an id too long for a KV key with BAD_REQUEST', async () => {
    const store = createKvInteractionStore(env.INTERACTIONS_KV, { prefix: 'p:'.repeat(100) });
    await expect(store.get('i'.repeat(400))).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('too long for a Workers KV key') });
  });
});
