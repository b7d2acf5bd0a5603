/** One record as an {@link InteractionStore} keeps it: two texts and a version. */
export interface InteractionRecord {
  /**
   * A small JSON text the runtime keeps about the record (who owns it, who holds it and until
   * when). Rewritten on every claim and lease renewal.
   */
  meta: string;
  /** The saved run as JSON text; it can be megabytes. Rewritten only at checkpoints. */
  state: string;
  /** Opaque; different after every successful write. Conditional writes compare it. */
  version: string;
}

/** What {@link InteractionStore.set} writes. */
export interface InteractionRecordWrite {
  meta: string;
  /** The new state. Left out, the stored state is kept (a lease renewal); required to create. */
  state?: string;
}

/**
 * Keeps suspended and running agent runs between requests, processes and machines.
 *
 * A store is a tiny driver: three operations on opaque text records, one of them a conditional
 * write. Everything else — who may resume a run, claims and leases, checkpoints, single use,
 * encoding and its limits — is done by the runtime on top, the same way for every store, and
 * checked by the conformance suite in `@org/core/testing`.
 *
 * A store drops a record once it has lived longer than its time to live (each store's factory
 * takes `ttlMs`, default 7 days, counted from the last write); an expired record reads as absent.
 *
 * @example
 * ```ts
 * const store: InteractionStore = createMemoryInteractionStore();
 * const version = await store.set('i-1', { meta: '{}', state: '{"a":1}' }, null); // created
 * await store.set('i-1', { meta: '{}', state: '{"a":2}' }, null); // undefined: it exists
 * await store.set('i-1', { meta: '{"held":true}' }, version!); // a new version; the state is kept
 * ```
 */
export interface InteractionStore {
  /**
   * The largest `state` this store keeps, in UTF-8 bytes. The runtime refuses bigger states with
   * `PAYLOAD_TOO_LARGE` before writing. Default: the runtime's own limit (64 MiB).
   */
  readonly maxStateBytes?: number;
  /** The record under `id`, or `undefined` when there is none (or it expired). */
  get(id: string): Promise<InteractionRecord | undefined>;
  /**
   * Writes the record under `id` if its current version is `expected` (`null`: only if there is
   * no record). Resolves to the new version, or `undefined` when the condition did not hold and
   * nothing was written. Atomic: of several writes with the same `expected`, at most one wins.
   */
  set(id: string, write: InteractionRecordWrite, expected: string | null): Promise<string | undefined>;
  /**
   * Deletes the record under `id` if its current version is `expected` (left out: whatever it
   * holds). Resolves to whether a record was deleted.
   */
  delete(id: string, expected?: string): Promise<boolean>;
}
