import { DEFAULT_INTERACTION_TTL_MS } from '../interactions/index.js';
import type { InteractionRecord, InteractionStore } from '../ports/index.js';

/** Options of {@link createMemoryInteractionStore}. */
export interface MemoryInteractionStoreOptions {
  /** Records not written for this long read as absent. Default 7 days. */
  ttlMs?: number;
  /** The largest state kept, in UTF-8 bytes; bigger ones are refused before any write. */
  maxStateBytes?: number;
  /** Clock (epoch ms), for tests of expiry. */
  now?: () => number;
}

/**
 * An in-memory `InteractionStore` for tests, examples and single-process servers. Records hold
 * texts, so nothing a caller changes later can reach them; every operation is atomic because
 * nothing else runs during it.
 *
 * @example
 * ```ts
 * const store = createMemoryInteractionStore();
 * for await (const event of run(request, { backend, store })) console.log(event.type);
 * ```
 */
export function createMemoryInteractionStore(options: MemoryInteractionStoreOptions = {}): InteractionStore {
  const records = new Map<string, InteractionRecord & { writtenAt: number }>();
  const now = options.now ?? Date.now;
  const ttlMs = options.ttlMs ?? DEFAULT_INTERACTION_TTL_MS;
  let versions = 0;
  const live = (id: string) => {
    const record = records.get(id);
    if (record && now() - record.writtenAt >= ttlMs) {
      records.delete(id);
      return undefined;
    }
    return record;
  };
  return {
    ...(options.maxStateBytes === undefined ? {} : { maxStateBytes: options.maxStateBytes }),
    async get(id) {
      const record = live(id);
      return record && { meta: record.meta, state: record.state, version: record.version };
    },
    async set(id, write, expected) {
      const current = live(id);
      if (expected === null ? current !== undefined : current?.version !== expected) return undefined;
      const state = write.state ?? current?.state;
      if (state === undefined) throw new TypeError(`Interaction ${id}: a new record needs a state`);
      versions += 1;
      const version = String(versions);
      records.set(id, { meta: write.meta, state, version, writtenAt: now() });
      return version;
    },
    async delete(id, expected) {
      const current = live(id);
      if (!current || (expected !== undefined && current.version !== expected)) return false;
      records.delete(id);
      return true;
    },
  };
}
