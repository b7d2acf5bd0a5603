import { DurableObject } from 'cloudflare:workers';
import { AgentError, DEFAULT_INTERACTION_TTL_MS, type InteractionRecord, type InteractionStore } from '@org/core';
import { checkId, checkTtl, DEFAULT_MAX_VALUE_BYTES, encodeState, joinBytes, splitBytes, storeError } from './stored-value.js';

/**
 * Bytes per storage key. Key-value backed Durable Objects allow 128 KiB per value and SQLite-backed
 * ones 2 MB per key and value together; 120 KiB fits both, whichever backend the user's migration picks.
 */
export const DURABLE_OBJECT_CHUNK_BYTES = 120 * 1024;

/** Values up to this size travel to and from the object as one array; bigger ones as a byte stream. */
const INLINE_TRANSFER_BYTES = 1024 * 1024;

/** The storage API accepts at most 128 keys per multi-key get, put or delete. */
const KEYS_PER_CALL = 128;

/** The record's meta shares one storage value with the bookkeeping, under the 128 KiB of the key-value backend. */
const MAX_META_BYTES = 64 * 1024;

const RECORD_KEY = 'record';

/** What the object keeps under {@link RECORD_KEY}; the state itself is in `chunk:*` keys. */
interface StoredRecord {
  meta: string;
  version: string;
  /** Epoch ms from which the record reads as absent (and the alarm removes it). */
  expiresAt: number;
  chunkCount: number;
  byteLength: number;
}

/** What crosses the RPC boundary: small values inline, big ones streamed. */
type Transfer = Uint8Array | ReadableStream<Uint8Array>;

/** What {@link InteractionStoreObject.read} returns. */
export interface InteractionObjectRead {
  meta: string;
  version: string;
  /** The state's UTF-8 bytes, as one array up to 1 MiB, else as a stream. */
  state: Transfer;
  byteLength: number;
}

/** What {@link InteractionStoreObject.write} is asked to do (the state travels separately). */
export interface InteractionObjectWrite {
  meta: string;
  /** Write only over this version; `null`: only where there is no record. */
  expected: string | null;
  /** The record expires this long after this write. */
  ttlMs: number;
  /** The length of the state sent along, in bytes; absent when the stored state is kept. */
  stateBytes?: number;
}

/**
 * The Durable Object that holds one interaction record. Export it from your Worker entry and bind
 * it in `wrangler.jsonc`; {@link createDurableObjectInteractionStore} addresses one object per
 * interaction id (`idFromName(id)`), so every operation on an id runs in that one object.
 *
 * A conditional write compares the stored version and writes inside `blockConcurrencyWhile` and a
 * storage transaction: nothing else reaches the object in between, so of any number of writes
 * over the same version exactly one wins, wherever they come from.
 *
 * The state is kept as UTF-8 in {@link DURABLE_OBJECT_CHUNK_BYTES} pieces under `chunk:000000`,
 * `chunk:000001`, ...; the meta, version, expiry and piece count under `record`. A write of meta
 * alone rewrites only `record`. Each write sets an alarm for the record's expiry, which deletes
 * the record if no later write renewed it.
 *
 * @example
 * ```ts
 * // worker entry
 * export { InteractionStoreObject } from '@org/adapter-workers';
 * ```
 */
export class InteractionStoreObject extends DurableObject<unknown> {
  /** The live record, or `null` when there is none or it expired. `id` names it in errors. */
  async read(id: string): Promise<InteractionObjectRead | null> {
    const found = await this.ctx.storage.transaction(async (transaction) => {
      const record = await transaction.get<StoredRecord>(RECORD_KEY);
      if (!record || record.expiresAt <= Date.now()) return null;
      const chunks: Uint8Array[] = [];
      for (const batch of batches(chunkKeys(record.chunkCount))) {
        const values = await transaction.get<Uint8Array>(batch);
        for (const key of batch) {
          const chunk = values.get(key);
          if (chunk) chunks.push(chunk);
        }
      }
      return { record, chunks };
    });
    if (!found) return null;
    const { record, chunks } = found;
    const bytes = joinBytes(id, chunks, record.byteLength);
    return {
      meta: record.meta,
      version: record.version,
      byteLength: record.byteLength,
      state: bytes.byteLength <= INLINE_TRANSFER_BYTES ? bytes : new Blob([bytes]).stream(),
    };
  }

  /**
   * Writes the record if its version is `request.expected` (`null`: if there is none); `state`
   * replaces the stored state, left out the state is kept. Resolves to the new version, or `null`
   * when the condition did not hold and nothing was written.
   */
  async write(request: InteractionObjectWrite, state?: Transfer): Promise<string | null> {
    let chunks: Uint8Array[] | undefined;
    if (state !== undefined) {
      // Received before the critical section: a stream arrives over the network at its own pace.
      const bytes = state instanceof Uint8Array ? state : new Uint8Array(await new Response(state).arrayBuffer());
      if (bytes.byteLength !== request.stateBytes) throw new Error(`received ${bytes.byteLength} of ${request.stateBytes ?? 0} bytes of state`);
      chunks = splitBytes(bytes, DURABLE_OBJECT_CHUNK_BYTES);
    }
    return this.ctx.blockConcurrencyWhile(() =>
      this.ctx.storage.transaction(async (transaction) => {
        const stored = await transaction.get<StoredRecord>(RECORD_KEY);
        const now = Date.now();
        const current = stored && stored.expiresAt > now ? stored : undefined;
        if (request.expected === null ? current !== undefined : current?.version !== request.expected) return null;
        if (!chunks && !current) return null;
        const next: StoredRecord = {
          meta: request.meta,
          version: crypto.randomUUID(),
          expiresAt: now + request.ttlMs,
          chunkCount: current?.chunkCount ?? 0,
          byteLength: current?.byteLength ?? 0,
        };
        if (chunks) {
          // An expired record's pieces are replaced too: compare with whatever is stored.
          const stale = stored ? chunkKeys(stored.chunkCount).slice(chunks.length) : [];
          for (const keys of batches(stale)) await transaction.delete(keys);
          const entries = chunks.map((chunk, index): [string, Uint8Array] => [chunkKey(index), chunk]);
          for (const batch of batches(entries)) await transaction.put(Object.fromEntries(batch));
          next.chunkCount = chunks.length;
          next.byteLength = request.stateBytes ?? 0;
        }
        await transaction.put(RECORD_KEY, next);
        await transaction.setAlarm(next.expiresAt);
        return next.version;
      }),
    );
  }

  /** Deletes the record if its version is `expected` (left out: whatever is live). Resolves to whether it did. */
  async remove(expected?: string): Promise<boolean> {
    return this.ctx.blockConcurrencyWhile(async () => {
      const record = await this.ctx.storage.get<StoredRecord>(RECORD_KEY);
      if (!record || record.expiresAt <= Date.now() || (expected !== undefined && record.version !== expected)) return false;
      await this.clear();
      return true;
    });
  }

  /** Runs at the record's expiry: deletes it unless a later write renewed it. */
  override async alarm(): Promise<void> {
    await this.ctx.blockConcurrencyWhile(async () => {
      const record = await this.ctx.storage.get<StoredRecord>(RECORD_KEY);
      if (record && record.expiresAt > Date.now()) {
        await this.ctx.storage.setAlarm(record.expiresAt);
        return;
      }
      await this.clear();
    });
  }

  /** Empties the object: every key (which also drops a SQLite-backed object's own bookkeeping) and the alarm. */
  private async clear(): Promise<void> {
    await this.ctx.storage.deleteAll();
    await this.ctx.storage.deleteAlarm();
  }
}

/** Options of {@link createDurableObjectInteractionStore}. */
export interface DurableObjectInteractionStoreOptions {
  /** Records not written for this long read as absent, and an alarm deletes them. Default 7 days. */
  ttlMs?: number;
  /**
   * The largest state kept, in UTF-8 bytes; the runtime refuses bigger ones with
   * `PAYLOAD_TOO_LARGE` before writing. Default 32 MiB ({@link DEFAULT_MAX_VALUE_BYTES}).
   */
  maxStateBytes?: number;
}

/**
 * An `InteractionStore` on Durable Objects: strongly consistent, with atomic conditional writes.
 * Each interaction id lives in its own {@link InteractionStoreObject} (`namespace.idFromName(id)`),
 * so there is no hot object, and every write to an id is serialised inside its object. Records
 * expire `ttlMs` after their last write (an alarm in the object deletes them).
 *
 * States are split across storage keys (never truncated) and travel over RPC as a stream above
 * 1 MiB; a state above `maxStateBytes` is refused with `PAYLOAD_TOO_LARGE` naming the id and size.
 *
 * @example
 * ```ts
 * const store = createDurableObjectInteractionStore(env.INTERACTIONS, { ttlMs: 24 * 60 * 60 * 1000 });
 * const version = await store.set('i-1', { meta: '{}', state: '{"step":1}' }, null);
 * await store.set('i-1', { meta: '{}', state: '{"step":2}' }, null); // undefined: it exists
 * ```
 */
export function createDurableObjectInteractionStore(
  namespace: DurableObjectNamespace<InteractionStoreObject>,
  options: DurableObjectInteractionStoreOptions = {},
): InteractionStore {
  const maxStateBytes = options.maxStateBytes ?? DEFAULT_MAX_VALUE_BYTES;
  const ttlMs = options.ttlMs ?? DEFAULT_INTERACTION_TTL_MS;
  checkTtl('createDurableObjectInteractionStore', ttlMs);
  const objectFor = (id: string) => {
    checkId(id);
    return namespace.get(namespace.idFromName(id));
  };
  return {
    maxStateBytes,
    async get(id) {
      const object = objectFor(id);
      try {
        const found = await object.read(id);
        if (!found) return undefined;
        const bytes = found.state instanceof Uint8Array ? found.state : new Uint8Array(await new Response(found.state).arrayBuffer());
        const record: InteractionRecord = { meta: found.meta, state: new TextDecoder().decode(bytes), version: found.version };
        return record;
      } catch (error) {
        throw storeError(id, 'read', error);
      }
    },
    async set(id, write, expected) {
      const object = objectFor(id);
      if (expected === null && write.state === undefined) throw new AgentError('STORE_ERROR', `Interaction ${id}: a new record needs a state`);
      const metaBytes = new TextEncoder().encode(write.meta).byteLength;
      if (metaBytes > MAX_META_BYTES) {
        throw new AgentError('PAYLOAD_TOO_LARGE', `Interaction ${id}: its meta is ${metaBytes} bytes, more than this store's limit of ${MAX_META_BYTES} bytes`, {
          details: { interactionId: id, size: metaBytes, limit: MAX_META_BYTES },
        });
      }
      const request: InteractionObjectWrite = { meta: write.meta, expected, ttlMs };
      try {
        if (write.state === undefined) return (await object.write(request)) ?? undefined;
        const bytes = encodeState(id, write.state, maxStateBytes);
        const payload: Transfer = bytes.byteLength <= INLINE_TRANSFER_BYTES ? bytes : new Blob([bytes]).stream();
        return (await object.write({ ...request, stateBytes: bytes.byteLength }, payload)) ?? undefined;
      } catch (error) {
        throw storeError(id, 'save', error);
      }
    },
    async delete(id, expected) {
      const object = objectFor(id);
      try {
        return await object.remove(expected);
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
