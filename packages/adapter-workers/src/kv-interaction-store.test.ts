import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { describeInteractionStoreConformance } from '@org/core/testing';
import { mixedText } from '../test/helpers.js';
import { createKvInteractionStore, KV_MAX_VALUE_BYTES } from './kv-interaction-store.js';

describeInteractionStoreConformance(
  'KV store',
  () => createKvInteractionStore(env.INTERACTIONS_KV, { prefix: `conformance-${crypto.randomUUID()}:` }),
  { describe, it, expect },
  { consistency: 'eventual' },
);

describeInteractionStoreConformance(
  'KV store with values split into 1 MiB pieces',
  () => createKvInteractionStore(env.INTERACTIONS_KV, { prefix: `pieces-${crypto.randomUUID()}:`, pieceBytes: 1024 * 1024 }),
  { describe, it, expect },
  { consistency: 'eventual' },
);

async function keysUnder(prefix: string): Promise<KVNamespaceListKey<unknown>[]> {
  return (await env.INTERACTIONS_KV.list({ prefix })).keys;
}

describe('createKvInteractionStore', () => {
  it('keeps a 6 MB value under one key and returns it whole', async () => {
    const prefix = `big-${crypto.randomUUID()}:`;
    const store = createKvInteractionStore(env.INTERACTIONS_KV, { prefix });
    const value = { notes: mixedText(3_000_000), image: 'iVBORw0KGgo'.repeat(300_000) };
    await store.save('big', value);
    expect((await keysUnder(prefix)).map((key) => key.name)).toEqual([`${prefix}big`]);
    const taken = (await store.take('big')) as typeof value;
    expect(taken.notes === value.notes && taken.image === value.image).toBe(true);
    expect(await keysUnder(prefix)).toEqual([]);
  });

  it('splits a value above the 25 MiB KV limit across keys instead of failing or truncating', async () => {
    const prefix = `over-limit-${crypto.randomUUID()}:`;
    const store = createKvInteractionStore(env.INTERACTIONS_KV, { prefix });
    const value = { data: 'QUJD'.repeat(7 * 1024 * 1024) };
    expect(JSON.stringify(value).length).toBeGreaterThan(KV_MAX_VALUE_BYTES);
    await store.save('over', value);
    expect((await keysUnder(prefix)).length).toBe(3);
    const taken = (await store.take('over')) as typeof value;
    expect(taken.data === value.data).toBe(true);
    expect(await keysUnder(prefix)).toEqual([]);
  });

  it('removes the pieces of a split value on delete and when a save replaces it', async () => {
    const prefix = `pieces-${crypto.randomUUID()}:`;
    const store = createKvInteractionStore(env.INTERACTIONS_KV, { prefix, pieceBytes: 1024 * 1024 });
    await store.save('split', { data: 'p'.repeat(5 * 1024 * 1024) });
    expect((await keysUnder(prefix)).length).toBe(7);
    await store.save('split', { data: 'small' });
    expect((await keysUnder(prefix)).map((key) => key.name)).toEqual([`${prefix}split`]);
    await store.save('split', { data: 'p'.repeat(3 * 1024 * 1024) });
    await store.delete('split');
    expect(await keysUnder(prefix)).toEqual([]);
  });

  it('sets the KV expiration from ttlSeconds and refuses a ttl KV would reject', async () => {
    const prefix = `ttl-${crypto.randomUUID()}:`;
    const store = createKvInteractionStore(env.INTERACTIONS_KV, { prefix, ttlSeconds: 3600 });
    const before = Math.floor(Date.now() / 1000);
    await store.save('expiring', { a: 1 });
    const [key] = await keysUnder(prefix);
    expect(key?.expiration).toBeGreaterThanOrEqual(before + 3600 - 1);
    expect(key?.expiration).toBeLessThanOrEqual(before + 3600 + 5);
    expect(() => createKvInteractionStore(env.INTERACTIONS_KV, { ttlSeconds: 30 })).toThrow(/ttlSeconds must be a whole number of at least 60/);
  });

  it('refuses a value above maxValueBytes with PAYLOAD_TOO_LARGE naming the id and size', async () => {
    const prefix = `refused-${crypto.randomUUID()}:`;
    const store = createKvInteractionStore(env.INTERACTIONS_KV, { prefix, maxValueBytes: 1000 });
    const value = { data: 'x'.repeat(2000) };
    await expect(store.save('too-big', value)).rejects.toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
      message: `Interaction too-big is ${JSON.stringify(value).length} bytes of JSON, more than this store's limit of 1000 bytes`,
    });
    expect(await keysUnder(prefix)).toEqual([]);
  });

  it('reports a split value whose pieces are missing as STORE_ERROR rather than returning part of it', async () => {
    const prefix = `torn-${crypto.randomUUID()}:`;
    const store = createKvInteractionStore(env.INTERACTIONS_KV, { prefix, pieceBytes: 1024 * 1024 });
    await store.save('torn', { data: 't'.repeat(3 * 1024 * 1024) });
    const pieces = (await keysUnder(prefix)).filter((key) => key.name.includes('#'));
    await env.INTERACTIONS_KV.delete(pieces[1]?.name as string);
    await expect(store.take('torn')).rejects.toMatchObject({
      code: 'STORE_ERROR',
      message: expect.stringContaining('Interaction torn is stored incompletely'),
    });
  });
});
