import { AgentError, DEFAULT_INTERACTION_TTL_MS, type InteractionRecord, type InteractionStore } from '@org/core';
import { checkId, checkTtl, DEFAULT_MAX_VALUE_BYTES, encodeState, incomplete, joinBytes, splitBytes, storeError } from './stored-value.js';

/** Workers KV's limit on one value: 25 MiB. */
export const KV_MAX_VALUE_BYTES = 25 * 1024 * 1024;

/** Workers KV's limit on one key: 512 bytes. */
const KV_MAX_KEY_BYTES = 512;

/** Workers KV refuses an `expirationTtl` under 60 seconds. */
const KV_MIN_TTL_SECONDS = 60;

/** Room left in a key for the piece suffix `#<generation>:<index>`. */
const PIECE_SUFFIX_BYTES = 24;

/** States up to this size live in the record's own key; bigger ones in piece keys next to it. */
const INLINE_STATE_BYTES = 128 * 1024;

/** How many times a read starts over when a writer replaced the pieces it was reading. */
const READ_ATTEMPTS = 3;

/** Options of {@link createKvInteractionStore}. */
export interface KvInteractionStoreOptions {
  /**
   * Records not written for this long read as absent. Default 7 days. KV itself drops the keys
   * a little later (it keeps a key at least 60 seconds).
   */
  ttlMs?: number;
  /** Prefix of every key this store writes. Default `interaction:`. */
  prefix?: string;
  /**
   * The largest state kept, in UTF-8 bytes; the runtime refuses bigger ones with
   * `PAYLOAD_TOO_LARGE` before writing. Default 32 MiB ({@link DEFAULT_MAX_VALUE_BYTES}).
   */
  maxStateBytes?: number;
  /** States are split into pieces of at most this many bytes. Default (and maximum) 25 MiB, the KV value limit. */
  pieceBytes?: number;
  /** Clock (epoch ms), for tests of expiry. */
  now?: () => number;
}

/** Where a state too big for the record's key lives: `<key>#<generation>:<index>`. */
interface KvPieces {
  generation: string;
  count: number;
  byteLength: number;
  /** Epoch ms when KV drops the pieces; a write of meta alone renews them before then. */
  expiresAt: number;
}

/** The record key's KV metadata. Its value is the meta text followed by the state when it fits. */
interface KvHead {
  version: string;
  /** Epoch ms from which the record reads as absent. */
  expiresAt: number;
  /** UTF-16 length of the meta at the start of the value. */
  metaLength: number;
  pieces?: KvPieces;
}

interface HeadEntry {
  head: KvHead;
  value: string;
}

/**
 * An `InteractionStore` on Workers KV. KV has no conditional write, so `set` reads the version,
 * compares it, and writes: best effort. KV is also **eventually consistent**: a write is seen at
 * once where it was made but can take 60 seconds or more to reach other locations. So two claims
 * of one interaction that race (in one location within a few milliseconds, or in different
 * locations within about a minute) can both win and continue the run twice, and a resume served
 * far away right after a suspend may not find the run yet. Use
 * {@link createDurableObjectInteractionStore} when a run must never be resumed twice.
 *
 * A record's meta and a state up to 128 KiB share one key (value: the meta, then the state;
 * metadata: version and expiry). A bigger state lives in piece keys beside it, written before the
 * record key, so a write of meta alone (a claim, a lease renewal) does not rewrite it. Records
 * expire `ttlMs` after their last write: KV's `expirationTtl` drops the keys (at least 60 s later,
 * a KV rule), and a read treats an expired record as absent at once.
 *
 * @example
 * ```ts
 * const store = createKvInteractionStore(env.INTERACTIONS_KV, { ttlMs: 24 * 60 * 60 * 1000 });
 * const version = await store.set('i-1', { meta: '{}', state: '{"step":1}' }, null);
 * await store.get('i-1'); // { meta: '{}', state: '{"step":1}', version }
 * ```
 */
export function createKvInteractionStore(kv: KVNamespace, options: KvInteractionStoreOptions = {}): InteractionStore {
  const prefix = options.prefix ?? 'interaction:';
  const maxStateBytes = options.maxStateBytes ?? DEFAULT_MAX_VALUE_BYTES;
  const pieceBytes = options.pieceBytes ?? KV_MAX_VALUE_BYTES;
  const now = options.now ?? Date.now;
  if (!(pieceBytes > 0 && pieceBytes <= KV_MAX_VALUE_BYTES)) {
    throw new AgentError('INTERNAL', `createKvInteractionStore: pieceBytes must be between 1 and ${KV_MAX_VALUE_BYTES}, got ${pieceBytes}`);
  }
  const ttlMs = options.ttlMs ?? DEFAULT_INTERACTION_TTL_MS;
  checkTtl('createKvInteractionStore', ttlMs);
  const ttlSeconds = Math.max(KV_MIN_TTL_SECONDS, Math.ceil(ttlMs / 1000));
  // Pieces outlive the record key, so renewing the record by a write of meta alone seldom has to renew them.
  const pieceTtlSeconds = Math.max(KV_MIN_TTL_SECONDS, Math.ceil((2 * ttlMs) / 1000));
  const encoder = new TextEncoder();

  const keyOf = (id: string): string => {
    checkId(id);
    const key = prefix + id;
    if (encoder.encode(key).byteLength > KV_MAX_KEY_BYTES - PIECE_SUFFIX_BYTES) {
      throw new AgentError('BAD_REQUEST', `Interaction id "${id.slice(0, 64)}" is too long for a Workers KV key (512 bytes with the prefix)`);
    }
    return key;
  };
  const pieceKeys = (key: string, pieces: KvPieces): string[] =>
    Array.from({ length: pieces.count }, (_, index) => `${key}#${pieces.generation}:${index}`);
  const readHead = async (key: string): Promise<HeadEntry | undefined> => {
    const entry = await kv.getWithMetadata<KvHead>(key, { type: 'text' });
    if (entry.value === null || !entry.metadata || typeof entry.metadata.version !== 'string') return undefined;
    return { head: entry.metadata, value: entry.value };
  };
  const live = (entry: HeadEntry | undefined): HeadEntry | undefined => (entry && entry.head.expiresAt > now() ? entry : undefined);
  /** The pieces' bytes, or `undefined` when one is missing (a writer replaced them meanwhile). */
  const readPieces = async (id: string, key: string, pieces: KvPieces): Promise<Uint8Array | undefined> => {
    const found = await Promise.all(pieceKeys(key, pieces).map((pieceKey) => kv.get(pieceKey, { type: 'arrayBuffer' })));
    if (found.some((piece) => piece === null)) return undefined;
    return joinBytes(id, found.map((piece) => new Uint8Array(piece as ArrayBuffer)), pieces.byteLength);
  };
  const writePieces = async (key: string, chunks: Uint8Array[], pieces: KvPieces): Promise<void> => {
    const keys = pieceKeys(key, pieces);
    await Promise.all(chunks.map((chunk, index) => kv.put(keys[index] as string, chunk, { expirationTtl: pieceTtlSeconds })));
  };
  const deletePieces = async (key: string, pieces: KvPieces): Promise<void> => {
    await Promise.all(pieceKeys(key, pieces).map((pieceKey) => kv.delete(pieceKey)));
  };

  return {
    maxStateBytes,
    async get(id) {
      const key = keyOf(id);
      try {
        let missing = 0;
        for (let attempt = 0; attempt < READ_ATTEMPTS; attempt += 1) {
          const entry = live(await readHead(key));
          if (!entry) return undefined;
          const meta = entry.value.slice(0, entry.head.metaLength);
          const { pieces } = entry.head;
          if (!pieces) return { meta, state: entry.value.slice(entry.head.metaLength), version: entry.head.version } satisfies InteractionRecord;
          const bytes = await readPieces(id, key, pieces);
          if (bytes) return { meta, state: new TextDecoder().decode(bytes), version: entry.head.version } satisfies InteractionRecord;
          missing = pieces.byteLength;
        }
        throw incomplete(id, missing);
      } catch (error) {
        throw storeError(id, 'read', error);
      }
    },
    async set(id, write, expected) {
      const key = keyOf(id);
      // Encoded first: a state over the limit is refused before any read or write.
      const small = write.state !== undefined && write.state.length * 3 <= Math.min(INLINE_STATE_BYTES, maxStateBytes);
      const bytes = write.state === undefined || small ? undefined : encodeState(id, write.state, maxStateBytes);
      try {
        const stored = await readHead(key);
        const current = live(stored);
        if (expected === null ? current !== undefined : current?.head.version !== expected) return undefined;
        if (write.state === undefined && !current) throw new AgentError('STORE_ERROR', `Interaction ${id}: a new record needs a state`);
        const written = now();
        const head: KvHead = { version: crypto.randomUUID(), expiresAt: written + ttlMs, metaLength: write.meta.length };
        let value = write.meta;
        if (write.state === undefined) {
          const kept = (current as HeadEntry).head.pieces;
          if (kept) {
            head.pieces = kept;
            if (kept.expiresAt < head.expiresAt) {
              // The record now outlives its pieces: write them again with a fresh expiry.
              const keptBytes = await readPieces(id, key, kept);
              if (!keptBytes) throw incomplete(id, kept.byteLength);
              head.pieces = { ...kept, expiresAt: written + pieceTtlSeconds * 1000 };
              await writePieces(key, splitBytes(keptBytes, pieceBytes), head.pieces);
            }
          } else {
            value += (current as HeadEntry).value.slice((current as HeadEntry).head.metaLength);
          }
        } else if (!bytes || bytes.byteLength <= INLINE_STATE_BYTES) {
          value += write.state;
        } else {
          const chunks = splitBytes(bytes, pieceBytes);
          head.pieces = { generation: crypto.randomUUID().slice(0, 8), count: chunks.length, byteLength: bytes.byteLength, expiresAt: written + pieceTtlSeconds * 1000 };
          // Pieces first, the record key last: a reader that finds the record key finds its pieces
          // (in this location; elsewhere see the consistency note above).
          await writePieces(key, chunks, head.pieces);
        }
        await kv.put(key, value, { expirationTtl: ttlSeconds, metadata: head });
        // Read back: a newer version than ours and the one we replaced means another write raced
        // ours here and came later, so it wins and ours is reported lost. Our own write not being
        // visible yet proves nothing, so that counts as a win. This narrows races in one location;
        // it cannot close them (see above).
        const seen = (await readHead(key))?.head.version;
        const ours = head.pieces?.generation;
        if (seen !== undefined && seen !== head.version && seen !== stored?.head.version) {
          if (ours !== undefined && ours !== stored?.head.pieces?.generation) await deletePieces(key, head.pieces as KvPieces).catch(() => undefined);
          return undefined;
        }
        // Only a winner removes the state it replaced: a loser's reader may still need it.
        const replaced = stored?.head.pieces;
        if (replaced && replaced.generation !== ours) await deletePieces(key, replaced).catch(() => undefined);
        return head.version;
      } catch (error) {
        throw storeError(id, 'save', error);
      }
    },
    async delete(id, expected) {
      const key = keyOf(id);
      try {
        const current = live(await readHead(key));
        if (!current || (expected !== undefined && current.head.version !== expected)) return false;
        await kv.delete(key);
        if (current.head.pieces) await deletePieces(key, current.head.pieces);
        return true;
      } catch (error) {
        throw storeError(id, 'delete', error);
      }
    },
  };
}
