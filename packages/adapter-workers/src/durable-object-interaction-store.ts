import { DurableObject } from 'cloudflare:workers';
import type { InteractionStore } from '@org/core';
import { DEFAULT_MAX_VALUE_BYTES, decodeStoredValue, encodeStoredValue, joinBytes, splitBytes, storeError } from './stored-value.js';

/**
 * Bytes per storage key. Key-value backed Durable Objects allow 128 KiB per value and SQLite-backed
 * ones 2 MB per key and value together; 120 KiB fits both, whichever backend the user's migration picks.
 */
export const DURABLE_OBJECT_CHUNK_BYTES = 120 * 1024;

/** Values up to this size travel to and from the object as one array; bigger ones as a byte stream. */
const INLINE_TRANSFER_BYTES = 1024 * 1024;

/** The storage API accepts at most 128 keys per multi-key get, put or delete. */
const KEYS_PER_CALL = 128;

const META_KEY = 'meta';

interface StoredMeta {
  chunkCount: number;
  byteLength: number;
}

/** What crosses the RPC boundary: small values inline, big ones streamed. */
type Transfer = Uint8Array | ReadableStream<Uint8Array>;

/**
 * The Durable Object that holds one suspended run. Export it from your Worker entry and bind it in
 * `wrangler.jsonc`; {@link createDurableObjectInteractionStore} addresses one object per interaction
 * id (`idFromName(id)`), so every operation on an id is serialised through that object.
 *
 * `take` reads and deletes inside `blockConcurrencyWhile` plus a storage transaction: no other request
 * reaches the object between the read and the delete, so an interaction is handed out at most once
 * even when many requests race for it from anywhere in the world.
 *
 * The value is kept as UTF-8 JSON split into {@link DURABLE_OBJECT_CHUNK_BYTES} pieces under keys
 * `chunk:000000`, `chunk:000001`, ... and a `meta` key with the count and length; the pieces and the
 * meta key are written in one transaction, so a reader never sees half a value.
 *
 * @example
 * ```ts
 * // worker entry
 * export { InteractionStoreObject } from '@org/adapter-workers';
 * ```
 */
export class InteractionStoreObject extends DurableObject<unknown> {
  /** Replaces the stored value with `payload` (UTF-8 JSON, `byteLength` bytes). */
  async save(payload: Transfer, byteLength: number): Promise<void> {
    const bytes = payload instanceof Uint8Array ? payload : new Uint8Array(await new Response(payload).arrayBuffer());
    if (bytes.byteLength !== byteLength) {
      throw new Error(`received ${bytes.byteLength} of ${byteLength} bytes`);
    }
    const chunks = splitBytes(bytes, DURABLE_OBJECT_CHUNK_BYTES);
    await this.ctx.blockConcurrencyWhile(() =>
      this.ctx.storage.transaction(async (transaction) => {
        const previous = await transaction.get<StoredMeta>(META_KEY);
        const stale = previous ? chunkKeys(previous.chunkCount).slice(chunks.length) : [];
        for (const keys of batches(stale)) await transaction.delete(keys);
        const entries = chunks.map((chunk, index): [string, Uint8Array] => [chunkKey(index), chunk]);
        for (const batch of batches(entries)) await transaction.put(Object.fromEntries(batch));
        await transaction.put(META_KEY, { chunkCount: chunks.length, byteLength } satisfies StoredMeta);
      }),
    );
  }

  /** Loads and deletes the stored value in one step; `null` when there is none. `id` names it in errors. */
  async take(id: string): Promise<Transfer | null> {
    const bytes = await this.ctx.blockConcurrencyWhile(async () => {
      const taken = await this.ctx.storage.transaction(async (transaction) => {
        const meta = await transaction.get<StoredMeta>(META_KEY);
        if (!meta) return null;
        const keys = chunkKeys(meta.chunkCount);
        const chunks: Uint8Array[] = [];
        for (const batch of batches(keys)) {
          const found = await transaction.get<Uint8Array>(batch);
          for (const key of batch) {
            const chunk = found.get(key);
            if (chunk) chunks.push(chunk);
          }
        }
        for (const batch of batches([...keys, META_KEY])) await transaction.delete(batch);
        return joinBytes(id, chunks, meta.byteLength);
      });
      // Nothing else runs in this object until the callback returns, so clearing the (now empty)
      // storage cannot race a new save; it also drops a SQLite-backed object's own bookkeeping.
      if (taken) await this.ctx.storage.deleteAll();
      return taken;
    });
    if (!bytes) return null;
    return bytes.byteLength <= INLINE_TRANSFER_BYTES ? bytes : new Blob([bytes]).stream();
  }

  /** Whether a value is stored. */
  async has(): Promise<boolean> {
    return (await this.ctx.storage.get<StoredMeta>(META_KEY)) !== undefined;
  }

  /** Deletes the stored value, if any. */
  async delete(): Promise<void> {
    await this.ctx.blockConcurrencyWhile(() => this.ctx.storage.deleteAll());
  }
}

/** Options of {@link createDurableObjectInteractionStore}. */
export interface DurableObjectInteractionStoreOptions {
  /** Refuse values whose JSON is larger than this with `PAYLOAD_TOO_LARGE`. Default 32 MiB. */
  maxValueBytes?: number;
}

/**
 * An `InteractionStore` on Durable Objects: strongly consistent and strictly single use. Each
 * interaction id lives in its own {@link InteractionStoreObject} (`namespace.idFromName(id)`), so
 * there is no hot shard and objects are created on demand and emptied by `take`.
 *
 * Values are JSON; larger values are split across storage keys (never truncated) up to
 * `maxValueBytes`, above which `save` rejects with `PAYLOAD_TOO_LARGE` naming the id and the size.
 *
 * @example
 * ```ts
 * const store = createDurableObjectInteractionStore(env.INTERACTIONS);
 * await store.save('i-1', { version: 1, state: {} });
 * await store.take('i-1'); // the value; a second take (from any request) gets undefined
 * ```
 */
export function createDurableObjectInteractionStore(
  namespace: DurableObjectNamespace<InteractionStoreObject>,
  options: DurableObjectInteractionStoreOptions = {},
): InteractionStore {
  const maxValueBytes = options.maxValueBytes ?? DEFAULT_MAX_VALUE_BYTES;
  const objectFor = (id: string) => namespace.get(namespace.idFromName(id));
  return {
    async save(id, value) {
      const bytes = encodeStoredValue(id, value, maxValueBytes);
      const payload: Transfer = bytes.byteLength <= INLINE_TRANSFER_BYTES ? bytes : new Blob([bytes]).stream();
      try {
        await objectFor(id).save(payload, bytes.byteLength);
      } catch (error) {
        throw storeError(id, 'save', error);
      }
    },
    async take(id) {
      let bytes: Uint8Array;
      try {
        const taken: Transfer | null = await objectFor(id).take(id);
        if (taken === null) return undefined;
        bytes = taken instanceof Uint8Array ? taken : new Uint8Array(await new Response(taken).arrayBuffer());
      } catch (error) {
        throw storeError(id, 'take', error);
      }
      return decodeStoredValue(id, bytes);
    },
    async has(id) {
      try {
        return await objectFor(id).has();
      } catch (error) {
        throw storeError(id, 'check', error);
      }
    },
    async delete(id) {
      try {
        await objectFor(id).delete();
      } catch (error) {
        throw storeError(id, 'delete', error);
      }
    },
  };
}

function chunkKey(index: number): string {
  return `chunk:${String(index).padStart(6, '0')}`;
}

function chunkKeys(count: number): string[] {
  return Array.from({ length: count }, (_, index) => chunkKey(index));
}

function batches<T>(items: readonly T[]): T[][] {
  const result: T[][] = [];
  for (let start = 0; start < items.length; start += KEYS_PER_CALL) result.push(items.slice(start, start + KEYS_PER_CALL));
  return result;
}
