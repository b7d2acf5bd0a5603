import { env } from 'cloudflare:workers';
import { runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { describeInteractionStoreConformance } from '@org/core/testing';
import { mixedText } from '../test/helpers.js';
import { createDurableObjectInteractionStore, DURABLE_OBJECT_CHUNK_BYTES } from './durable-object-interaction-store.js';

describeInteractionStoreConformance(
  'Durable Object store (SQLite-backed class)',
  (options) => createDurableObjectInteractionStore(env.INTERACTIONS, options),
  { describe, it, expect },
  { consistency: 'strong' },
);

describeInteractionStoreConformance(
  'Durable Object store (key-value-backed class)',
  (options) => createDurableObjectInteractionStore(env.INTERACTIONS_KV_BACKED, options),
  { describe, it, expect },
  { consistency: 'strong' },
);

const objectOf = (namespace: typeof env.INTERACTIONS, id: string) => namespace.get(namespace.idFromName(id));

/** Every key and value size the object holds for `id`, read inside the object. */
async function storedSizes(namespace: typeof env.INTERACTIONS, id: string): Promise<Map<string, number>> {
  return runInDurableObject(objectOf(namespace, id), async (_instance, state) => {
    const entries = await state.storage.list();
    return new Map([...entries].map(([key, value]) => [key, value instanceof Uint8Array ? value.byteLength : JSON.stringify(value).length]));
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('createDurableObjectInteractionStore', () => {
  for (const [backend, namespace] of [
    ['SQLite', env.INTERACTIONS],
    ['key-value', env.INTERACTIONS_KV_BACKED],
  ] as const) {
    it(`splits a 6 MB state across keys within the platform limit and returns it whole (${backend} backend)`, async () => {
      const store = createDurableObjectInteractionStore(namespace);
      const state = JSON.stringify({ notes: mixedText(3_000_000), image: 'iVBORw0KGgo'.repeat(300_000) });
      const size = new TextEncoder().encode(state).byteLength;
      expect(size).toBeGreaterThan(6_000_000);

      const version = (await store.set('big', { meta: '{}', state }, null)) as string;
      const sizes = await storedSizes(namespace, 'big');
      const chunkSizes = [...sizes].filter(([key]) => key.startsWith('chunk:')).map(([, bytes]) => bytes);
      expect(chunkSizes.length).toBe(Math.ceil(size / DURABLE_OBJECT_CHUNK_BYTES));
      expect(Math.max(...chunkSizes)).toBeLessThanOrEqual(128 * 1024);
      expect(chunkSizes.reduce((sum, bytes) => sum + bytes, 0)).toBe(size);

      const record = await store.get('big');
      expect(record?.state === state).toBe(true);
      expect(await store.delete('big', version)).toBe(true);
      expect(await store.get('big')).toBeUndefined();
      expect((await storedSizes(namespace, 'big')).size).toBe(0);
    });
  }

  it('carries a state larger than 32 MiB to the object and back as a stream when allowed', async () => {
    const store = createDurableObjectInteractionStore(env.INTERACTIONS, { maxStateBytes: 48 * 1024 * 1024 });
    const state = JSON.stringify({ data: 'QUJD'.repeat(10 * 1024 * 1024) });
    await store.set('huge', { meta: '{}', state }, null);
    const record = await store.get('huge');
    expect(record?.state.length).toBe(state.length);
    expect(record?.state === state).toBe(true);
    await store.delete('huge');
  });

  it('refuses a state above maxStateBytes with PAYLOAD_TOO_LARGE naming the id and size, storing nothing', async () => {
    const store = createDurableObjectInteractionStore(env.INTERACTIONS, { maxStateBytes: 1024 * 1024 });
    // The runtime refuses such a state before writing, because the store declares its limit ...
    expect(store.maxStateBytes).toBe(1024 * 1024);
    // ... and the store refuses it itself when called directly.
    const state = JSON.stringify({ data: 'x'.repeat(2 * 1024 * 1024) });
    await expect(store.set('too-big', { meta: '{}', state }, null)).rejects.toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
      message: `Interaction too-big is ${state.length} bytes of JSON, more than this store's limit of 1048576 bytes`,
      details: { interactionId: 'too-big', size: state.length, limit: 1024 * 1024 },
    });
    expect(await store.get('too-big')).toBeUndefined();
    expect((await storedSizes(env.INTERACTIONS, 'too-big')).size).toBe(0);
  });

  it('keeps 32 MiB as the default limit the runtime sees', () => {
    expect(createDurableObjectInteractionStore(env.INTERACTIONS).maxStateBytes).toBe(32 * 1024 * 1024);
  });

  it('replacing a large state with a small one leaves no stale pieces behind', async () => {
    const store = createDurableObjectInteractionStore(env.INTERACTIONS);
    const first = (await store.set('shrink', { meta: '{}', state: JSON.stringify('y'.repeat(1_000_000)) }, null)) as string;
    await store.set('shrink', { meta: '{"n":2}', state: '"small"' }, first);
    expect([...(await storedSizes(env.INTERACTIONS, 'shrink')).keys()]).toEqual(['chunk:000000', 'record']);
    expect(await store.get('shrink')).toMatchObject({ meta: '{"n":2}', state: '"small"' });
  });

  it('lets exactly one of many writers with their own store instances win over one version, with a multi-megabyte state', async () => {
    const version = (await createDurableObjectInteractionStore(env.INTERACTIONS).set('contested', { meta: '{}', state: '"base"' }, null)) as string;
    const results = await Promise.all(
      // Separate store instances, as separate requests would build them.
      Array.from({ length: 8 }, (_, index) =>
        createDurableObjectInteractionStore(env.INTERACTIONS).set('contested', { meta: `{"n":${index}}`, state: JSON.stringify(String(index).repeat(3_000_000)) }, version),
      ),
    );
    const winners = results.flatMap((result, index) => (result === undefined ? [] : [index]));
    expect(winners).toHaveLength(1);
    const record = await createDurableObjectInteractionStore(env.INTERACTIONS).get('contested');
    expect(record?.meta).toBe(`{"n":${winners[0]}}`);
    expect(record?.state === JSON.stringify(String(winners[0]).repeat(3_000_000))).toBe(true);
  });

  it('empties the object when its alarm finds the record expired, and keeps a renewed one', async () => {
    const shortLived = createDurableObjectInteractionStore(env.INTERACTIONS, { ttlMs: 200 });
    await shortLived.set('expiring', { meta: '{}', state: JSON.stringify('e'.repeat(500_000)) }, null);
    await sleep(400);
    await runDurableObjectAlarm(objectOf(env.INTERACTIONS, 'expiring'));
    expect((await storedSizes(env.INTERACTIONS, 'expiring')).size).toBe(0);

    const store = createDurableObjectInteractionStore(env.INTERACTIONS, { ttlMs: 60_000 });
    await store.set('renewed', { meta: '{}', state: '"kept"' }, null);
    expect(await runDurableObjectAlarm(objectOf(env.INTERACTIONS, 'renewed'))).toBe(true);
    expect((await store.get('renewed'))?.state).toBe('"kept"');
    const alarm = await runInDurableObject(objectOf(env.INTERACTIONS, 'renewed'), (_instance, state) => state.storage.getAlarm());
    expect(alarm).toBeGreaterThan(Date.now() + 50_000);
  });

  it('refuses an id too long for the storage keys with BAD_REQUEST before any call', async () => {
    const store = createDurableObjectInteractionStore(env.INTERACTIONS);
    await expect(store.get('x'.repeat(10_000))).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('must be 1 to 480 bytes') });
  });

  it('refuses a ttlMs that is not a positive number', () => {
    expect(() => createDurableObjectInteractionStore(env.INTERACTIONS, { ttlMs: 0 })).toThrow(/ttlMs must be a positive number/);
  });
});
