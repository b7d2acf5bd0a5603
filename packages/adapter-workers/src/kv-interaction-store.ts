import { AgentError, type InteractionStore } from '@org/core';
import { DEFAULT_MAX_VALUE_BYTES, decodeStoredValue, encodeStoredValue, joinBytes, splitBytes, storeError } from './stored-value.js';

/** Workers KV's limit on one value: 25 MiB. */
export const KV_MAX_VALUE_BYTES = 25 * 1024 * 1024;

/** Workers KV's limit on one key: 512 bytes. */
const KV_MAX_KEY_BYTES = 512;

/** Workers KV refuses an `expirationTtl` under 60 seconds. */
const KV_MIN_TTL_SECONDS = 60;

/** Room left in a key for the piece suffix `#<generation>:<index>`. */
const PIECE_SUFFIX_BYTES = 24;

/** Options of {@link createKvInteractionStore}. */
export interface KvInteractionStoreOptions {
  /** Let KV expire unresumed interactions after this many seconds (at least 60). Default: never. */
  ttlSeconds?: number;
  /** Prefix of every key this store writes. Default `interaction:`. */
  prefix?: string;
  /** Refuse values whose JSON is larger than this with `PAYLOAD_TOO_LARGE`. Default 32 MiB. */
  maxValueBytes?: number;
  /** Values larger than this are split across several KV keys. Default (and maximum) 25 MiB, the KV value limit. */
  pieceBytes?: number;
}

/** What the main key's metadata says about its value. */
interface KvEntryMetadata {
  byteLength: number;
  /** Present when the value is split: the pieces live under `<key>#<generation>:<index>`. */
  pieces?: { generation: string; count: number };
}

/**
 * An `InteractionStore` on Workers KV. KV is **eventually consistent**: a write or delete is seen at
 * once where it was made but can take 60 seconds or more to reach other locations. `take` is a
 * read followed by a delete, so two resumes of the same interaction that race in different
 * locations may both succeed. Use {@link createDurableObjectInteractionStore} when single use must
 * be guaranteed; use KV when a rare double resume is acceptable and you want the simplest setup.
 *
 * Values are JSON. Values above `pieceBytes` (default the 25 MiB KV limit) are split across keys,
 * never truncated; above `maxValueBytes` `save` rejects with `PAYLOAD_TOO_LARGE` naming the id.
 *
 * @example
 * ```ts
 * const store = createKvInteractionStore(env.INTERACTIONS_KV, { ttlSeconds: 24 * 60 * 60 });
 * await store.save('i-1', { version: 1, state: {} });
 * await store.take('i-1'); // the value (best-effort single use, see above)
 * ```
 */
export function createKvInteractionStore(kv: KVNamespace, options: KvInteractionStoreOptions = {}): InteractionStore {
  const prefix = options.prefix ?? 'interaction:';
  const maxValueBytes = options.maxValueBytes ?? DEFAULT_MAX_VALUE_BYTES;
  const pieceBytes = options.pieceBytes ?? KV_MAX_VALUE_BYTES;
  if (!(pieceBytes > 0 && pieceBytes <= KV_MAX_VALUE_BYTES)) {
    throw new AgentError('INTERNAL', `createKvInteractionStore: pieceBytes must be between 1 and ${KV_MAX_VALUE_BYTES}, got ${pieceBytes}`);
  }
  const ttlSeconds = options.ttlSeconds;
  if (ttlSeconds !== undefined && !(Number.isInteger(ttlSeconds) && ttlSeconds >= KV_MIN_TTL_SECONDS)) {
    throw new AgentError(
      'INTERNAL',
      `createKvInteractionStore: ttlSeconds must be a whole number of at least ${KV_MIN_TTL_SECONDS} (a Workers KV rule), got ${ttlSeconds}`,
    );
  }
  const putOptions = (metadata?: KvEntryMetadata): KVNamespacePutOptions => ({
    ...(ttlSeconds === undefined ? {} : { expirationTtl: ttlSeconds }),
    ...(metadata ? { metadata } : {}),
  });
  const keyOf = (id: string): string => {
    const key = prefix + id;
    if (new TextEncoder().encode(key).byteLength > KV_MAX_KEY_BYTES - PIECE_SUFFIX_BYTES) {
      throw new AgentError('STORE_ERROR', `Interaction id ${id.slice(0, 64)}... is too long for a Workers KV key (512 bytes)`, {
        details: { interactionId: id },
      });
    }
    return key;
  };
  const pieceKeys = (key: string, pieces: NonNullable<KvEntryMetadata['pieces']>): string[] =>
    Array.from({ length: pieces.count }, (_, index) => `${key}#${pieces.generation}:${index}`);
  /** The main key's metadata without downloading a large value. */
  const readMetadata = async (key: string): Promise<KvEntryMetadata | undefined> => {
    const entry = await kv.getWithMetadata<KvEntryMetadata>(key, { type: 'stream' });
    if (entry.value === null) return undefined;
    await entry.value.cancel();
    return entry.metadata ?? { byteLength: 0 };
  };

  return {
    async save(id, value) {
      const key = keyOf(id);
      const bytes = encodeStoredValue(id, value, maxValueBytes);
      try {
        const previous = await readMetadata(key);
        if (bytes.byteLength <= pieceBytes) {
          await kv.put(key, bytes, putOptions({ byteLength: bytes.byteLength }));
        } else {
          // Pieces first, the main key last: a reader that finds the main key can find its pieces
          // (in this location; elsewhere see the consistency note above).
          const pieces = { generation: crypto.randomUUID().slice(0, 8), count: 0 };
          const chunks = splitBytes(bytes, pieceBytes);
          pieces.count = chunks.length;
          const keys = pieceKeys(key, pieces);
          await Promise.all(chunks.map((chunk, index) => kv.put(keys[index] as string, chunk, putOptions())));
          await kv.put(key, '', putOptions({ byteLength: bytes.byteLength, pieces }));
        }
        if (previous?.pieces) await Promise.all(pieceKeys(key, previous.pieces).map((pieceKey) => kv.delete(pieceKey)));
      } catch (error) {
        throw storeError(id, 'save', error);
      }
    },
    async take(id) {
      const key = keyOf(id);
      let data: Uint8Array;
      try {
        const entry = await kv.getWithMetadata<KvEntryMetadata>(key, { type: 'arrayBuffer' });
        if (entry.value === null) return undefined;
        await kv.delete(key);
        const pieces = entry.metadata?.pieces;
        if (!pieces) {
          data = new Uint8Array(entry.value);
        } else {
          const keys = pieceKeys(key, pieces);
          const found = await Promise.all(keys.map((pieceKey) => kv.get(pieceKey, { type: 'arrayBuffer' })));
          await Promise.all(keys.map((pieceKey) => kv.delete(pieceKey)));
          const chunks = found.filter((chunk): chunk is ArrayBuffer => chunk !== null).map((chunk) => new Uint8Array(chunk));
          data = joinBytes(id, chunks, entry.metadata?.byteLength ?? 0);
        }
      } catch (error) {
        throw storeError(id, 'take', error);
      }
      return decodeStoredValue(id, data);
    },
    async has(id) {
      const key = keyOf(id);
      try {
        return (await readMetadata(key)) !== undefined;
      } catch (error) {
        throw storeError(id, 'check', error);
      }
    },
    async delete(id) {
      const key = keyOf(id);
      try {
        const metadata = await readMetadata(key);
        await kv.delete(key);
        if (metadata?.pieces) await Promise.all(pieceKeys(key, metadata.pieces).map((pieceKey) => kv.delete(pieceKey)));
      } catch (error) {
        throw storeError(id, 'delete', error);
      }
    },
  };
}
