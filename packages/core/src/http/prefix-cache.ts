/** Options of {@link createPrefixCache}. */
export interface PrefixCacheOptions {
  /** How long a cached prefix lives at the provider, in seconds. Default 1800. */
  ttlSeconds?: number;
  /** A prefix in use has its life extended (in the background) once its last extension is this old, in seconds. Default 1200. */
  extendAfterSeconds?: number;
  /**
   * Prefixes (system instruction + tools + tool config, as JSON) smaller than this many bytes are
   * sent uncached: a cache of a few thousand tokens saves less than it costs, and Gemini refuses
   * very small ones. Default 16 384 (about 4,000 tokens).
   */
  minPrefixBytes?: number;
  /** After a prefix could not be cached or a cached request failed, requests go uncached for this long before caching is tried again. Default 300 000 ms. */
  retryAfterMs?: number;
  /** Most distinct prefixes held; the oldest is forgotten first. Default 64. */
  maxEntries?: number;
  /** The clock, in milliseconds (tests). Default `Date.now`. */
  now?: () => number;
}

/**
 * A process-wide table of prefixes cached at Gemini (`cachedContents`): one per distinct system
 * instruction, tool set, tool config, model and credential. Pass the same one to every Gemini
 * client of a process so that all their requests share one cached prefix.
 */
export interface PrefixCache {
  /** How many prefixes are cached (or being cached) now. */
  readonly size: number;
  /** Forgets every cached prefix; they expire at the provider on their own. */
  clear(): void;
}

/** One prefix as the table knows it. */
interface Entry {
  name?: string;
  expiresAt: number;
  extendedAt: number;
  extending?: boolean;
  pending?: Promise<string | undefined>;
  failedUntil?: number;
}

/** What creating or extending a cached prefix answers: its name and when it expires (ms since the epoch, when known). */
export interface CachedPrefix {
  name: string;
  expiresAt?: number;
}

/** The table behind {@link PrefixCache}; the Gemini client drives it. */
export class PrefixCacheTable implements PrefixCache {
  readonly ttlMs: number;
  readonly minPrefixBytes: number;
  readonly #extendAfterMs: number;
  readonly #retryAfterMs: number;
  readonly #maxEntries: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();

  constructor(options: PrefixCacheOptions = {}) {
    this.ttlMs = positive(options.ttlSeconds, 1800, 'ttlSeconds') * 1000;
    this.#extendAfterMs = positive(options.extendAfterSeconds, 1200, 'extendAfterSeconds') * 1000;
    this.minPrefixBytes = Math.max(0, options.minPrefixBytes ?? 16_384);
    this.#retryAfterMs = Math.max(0, options.retryAfterMs ?? 300_000);
    this.#maxEntries = Math.max(1, Math.floor(options.maxEntries ?? 64));
    this.#now = options.now ?? Date.now;
  }

  get size(): number {
    return this.#entries.size;
  }

  clear(): void {
    this.#entries.clear();
  }

  /**
   * The name of the cached prefix for `key`, creating it when there is none (one creation at a
   * time per key, shared by the requests that wait for it), or `undefined` when requests with this
   * prefix go uncached for now. A prefix past two thirds of its life is extended in the background.
   */
  resolve(key: string, create: () => Promise<CachedPrefix>, extend: (name: string) => Promise<CachedPrefix>): Promise<string | undefined> | string | undefined {
    const now = this.#now();
    const entry = this.#entries.get(key);
    if (entry?.failedUntil !== undefined && now < entry.failedUntil) return undefined;
    if (entry?.pending) return entry.pending;
    // A minute of margin: a request must not reach the provider just after its prefix expired.
    if (entry?.name !== undefined && now < entry.expiresAt - 60_000) {
      if (now - entry.extendedAt >= this.#extendAfterMs && !entry.extending) this.#extend(entry, extend);
      return entry.name;
    }
    const fresh: Entry = { expiresAt: 0, extendedAt: now };
    fresh.pending = create().then(
      (created) => {
        const createdAt = this.#now();
        delete fresh.pending;
        fresh.name = created.name;
        fresh.extendedAt = createdAt;
        fresh.expiresAt = created.expiresAt ?? createdAt + this.ttlMs;
        return created.name;
      },
      () => {
        delete fresh.pending;
        fresh.failedUntil = this.#now() + this.#retryAfterMs;
        return undefined;
      },
    );
    this.#entries.delete(key);
    this.#entries.set(key, fresh);
    while (this.#entries.size > this.#maxEntries) {
      const oldest = this.#entries.keys().next().value as string;
      this.#entries.delete(oldest);
    }
    return fresh.pending;
  }

  /** A request with the cached prefix `name` failed: requests with this prefix go uncached for a while. */
  invalidate(key: string, name: string): void {
    const entry = this.#entries.get(key);
    if (entry?.name !== name) return;
    delete entry.name;
    entry.failedUntil = this.#now() + this.#retryAfterMs;
  }

  #extend(entry: Entry, extend: (name: string) => Promise<CachedPrefix>): void {
    const name = entry.name as string;
    entry.extending = true;
    void extend(name)
      .then((extended) => {
        if (entry.name !== name) return;
        const now = this.#now();
        entry.extendedAt = now;
        entry.expiresAt = extended.expiresAt ?? now + this.ttlMs;
      })
      // A failed extension only means the prefix expires on its old schedule and is created again.
      .catch(() => undefined)
      .finally(() => {
        entry.extending = false;
      });
  }
}

/**
 * Creates a table of prefixes cached at Gemini, to share between Gemini clients (option
 * `prefixCache` of `createGeminiBackendClient`). Each distinct system instruction + tool set is
 * cached once, its life extended while it is in use; a request whose prefix could not be cached,
 * or whose cached prefix failed, is sent whole.
 *
 * @example
 * ```ts
 * const prefixCache = createPrefixCache({ ttlSeconds: 1800 });
 * const backendFor = (apiKey: string) => createGeminiBackendClient({ apiKey, fetch, prefixCache });
 * ```
 */
export function createPrefixCache(options: PrefixCacheOptions = {}): PrefixCache {
  return new PrefixCacheTable(options);
}

function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0) throw new RangeError(`createPrefixCache: ${name} must be a positive number, got ${value}`);
  return value;
}
