/**
 * Persists suspended runs between the request that suspends and the one that resumes, which may
 * be served by different processes or machines.
 *
 * Values are plain JSON. `take` is the only way to read: it loads **and** deletes atomically, so
 * an interaction can be resumed at most once even when two requests race for it.
 *
 * @example
 * ```ts
 * const store: InteractionStore = createInMemoryInteractionStore();
 * await store.save('i-1', { version: 1, state: {} });
 * await store.take('i-1'); // -> the value
 * await store.take('i-1'); // -> undefined: already used
 * ```
 */
export interface InteractionStore {
  /** Stores `value` under `id`, replacing any earlier value. */
  save(id: string, value: unknown): Promise<void>;
  /** Loads and deletes the value under `id` in one atomic step; `undefined` when absent. */
  take(id: string): Promise<unknown | undefined>;
  /** Whether a value is stored under `id`. */
  has(id: string): Promise<boolean>;
  /** Deletes the value under `id`, if any. */
  delete(id: string): Promise<void>;
}
