import { env } from 'cloudflare:workers';
import { runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { describeInteractionStoreConformance } from '@org/core/testing';
import { mixedText } from '../test/helpers.js';
import { createDurableObjectInteractionStore, DURABLE_OBJECT_CHUNK_BYTES } from './durable-object-interaction-store.js';

describeInteractionStoreConformance(
  'Durable Object store (SQLite-backed class)',
  () => createDurableObjectInteractionStore(env.INTERACTIONS),
  { describe, it, expect },
  { consistency: 'strong' },
);

describeInteractionStoreConformance(
  'Durable Object store (key-value-backed class)',
  () => createDurableObjectInteractionStore(env.INTERACTIONS_KV_BACKED),
  { describe, it, expect },
  { consistency: 'strong' },
);

/** Every key and value size the object holds for `id`, read inside the object. */
async function storedSizes(namespace: typeof env.INTERACTIONS, id: string): Promise<Map<string, number>> {
  return runInDurableObject(namespace.get(namespace.idFromName(id)), async (_instance, state) => {
    const entries = await state.storage.list();
    return new Map([...entries].map(([key, value]) => [key, value instanceof Uint8Array ? value.byteLength : JSON.stringify(value).length]));
  });
}

describe('createDurableObjectInteractionStore', () => {
  for (const [backend, namespace] of [
    ['SQLite', env.INTERACTIONS],
    ['key-value', env.INTERACTIONS_KV_BACKED],
  ] as const) {
    it(`splits a 6 MB value across keys within the platform limit and returns it whole (${backend} backend)`, async () => {
      const store = createDurableObjectInteractionStore(namespace);
      const value = { state: { notes: mixedText(3_000_000), image: 'iVBORw0KGgo'.repeat(300_000) } };
      const size = new TextEncoder().encode(JSON.stringify(value)).byteLength;
      expect(size).toBeGreaterThan(6_000_000);

      await store.save('big', value);
      const sizes = await storedSizes(namespace, 'big');
      const chunkSizes = [...sizes].filter(([key]) => key.startsWith('chunk:')).map(([, bytes]) => bytes);
      expect(chunkSizes.length).toBe(Math.ceil(size / DURABLE_OBJECT_CHUNK_BYTES));
      expect(Math.max(...chunkSizes)).toBeLessThanOrEqual(128 * 1024);
      expect(chunkSizes.reduce((sum, bytes) => sum + bytes, 0)).toBe(size);

      const taken = (await store.take('big')) as typeof value;
      expect(taken.state.notes === value.state.notes).toBe(true);
      expect(taken.state.image === value.state.image).toBe(true);
      expect(await store.take('big')).toBeUndefined();
      expect((await storedSizes(namespace, 'big')).size).toBe(0);
    });
  }

  it('carries a value larger than 32 MiB to the object and back as a stream when allowed', async () => {
    const store = createDurableObjectInteractionStore(env.INTERACTIONS, { maxValueBytes: 48 * 1024 * 1024 });
    const value = { data: 'QUJD'.repeat(10 * 1024 * 1024) };
    await store.save('huge', value);
    const taken = (await store.take('huge')) as typeof value;
    expect(taken.data.length).toBe(value.data.length);
    expect(taken.data === value.data).toBe(true);
  });

  it('refuses a value above maxValueBytes with PAYLOAD_TOO_LARGE naming the id and size, storing nothing', async () => {
    const store = createDurableObjectInteractionStore(env.INTERACTIONS, { maxValueBytes: 1024 * 1024 });
    const value = { data: 'x'.repeat(2 * 1024 * 1024) };
    const size = JSON.stringify(value).length;
    await expect(store.save('too-big', value)).rejects.toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
      message: `Interaction too-big is ${size} bytes of JSON, more than this store's limit of 1048576 bytes`,
      details: { interactionId: 'too-big', size, limit: 1024 * 1024 },
    });
    expect(await store.has('too-big')).toBe(false);
  });

  it('replacing a large value with a small one leaves no stale pieces behind', async () => {
    const store = createDurableObjectInteractionStore(env.INTERACTIONS);
    await store.save('shrink', { data: 'y'.repeat(1_000_000) });
    await store.save('shrink', { data: 'small' });
    expect([...(await storedSizes(env.INTERACTIONS, 'shrink')).keys()]).toEqual(['chunk:000000', 'meta']);
    expect(await store.take('shrink')).toEqual({ data: 'small' });
  });

  it('hands a value to exactly one of many concurrent takes, also for a multi-megabyte value', async () => {
    const store = createDurableObjectInteractionStore(env.INTERACTIONS);
    await store.save('contested', { data: 'z'.repeat(3_000_000) });
    const results = await Promise.all(
      // Separate store instances, as separate requests would build them.
      Array.from({ length: 8 }, () => createDurableObjectInteractionStore(env.INTERACTIONS).take('contested')),
    );
    expect(results.filter((result) => result !== undefined)).toHaveLength(1);
  });

  it('rejects a value JSON cannot represent with STORE_ERROR naming the id', async () => {
    const store = createDurableObjectInteractionStore(env.INTERACTIONS);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    await expect(store.save('cyclic', cyclic)).rejects.toMatchObject({
      code: 'STORE_ERROR',
      message: expect.stringMatching(/^Interaction cyclic cannot be stored: its value is not JSON/),
    });
  });
});
