import type { InteractionStore } from '../ports/index.js';

/** Options of {@link createMemoryInteractionStore}. */
export interface MemoryInteractionStoreOptions {
  /** Entries older than this are treated as absent. */
  ttlMs?: number;
  /** Clock, for tests of expiry. */
  now?: () => number;
}

/**
 * An in-memory `InteractionStore` for tests, examples and single-process servers. Values are kept
 * as JSON text, so changing an object after saving it does not change what is stored.
 *
 * @example
 * ```ts
 * const store = createMemoryInteractionStore();
 * await store.save('i-1', { state: 1 });
 * await store.take('i-1'); // { state: 1 }
 * ```
 */
export function createMemoryInteractionStore(options: MemoryInteractionStoreOptions = {}): InteractionStore {
  const entries = new Map<string, { json: string; savedAt: number }>();
  const now = options.now ?? Date.now;
  const live = (id: string): { json: string } | undefined => {
    const entry = entries.get(id);
    if (!entry) return undefined;
    if (options.ttlMs !== undefined && now() - entry.savedAt > options.ttlMs) {
      entries.delete(id);
      return undefined;
    }
    return entry;
  };
  return {
    async save(id, value) {
      const json = JSON.stringify(value);
      if (json === undefined) throw new TypeError(`Interaction ${id}: value is not JSON-serialisable`);
      entries.set(id, { json, savedAt: now() });
    },
    async take(id) {
      const entry = live(id);
      if (!entry) return undefined;
      entries.delete(id);
      return JSON.parse(entry.json) as unknown;
    },
    async has(id) {
      return live(id) !== undefined;
    },
    async delete(id) {
      entries.delete(id);
    },
  };
}
