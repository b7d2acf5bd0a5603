import type { SessionInfo, SessionStatus } from '@org/core';
import { DURABLE_OBJECT_CHUNK_BYTES } from './durable-object-interaction-store.js';
import { splitBytes } from './stored-value.js';

/** The storage API accepts at most 128 keys per multi-key get, put or delete. */
const KEYS_PER_CALL = 128;

const SESSION_KEY = 'session';
const EVENT_PREFIX = 'event:';

/** What the object keeps under {@link SESSION_KEY}: the session's info and bookkeeping. */
export interface StoredSession {
  id: string;
  status: SessionStatus;
  eventCount: number;
  interactionId?: string;
  owner?: string;
  /** Epoch ms from which the session reads as absent (and the alarm removes it). */
  expiresAt: number;
}

/** An event too big for one storage value: its UTF-8 bytes are in `pieces` keys after its own. */
interface PiecedEvent {
  pieces: number;
  bytes: number;
}

/** What {@link SessionLogStorage.read} returns: events in order, and whether a big one comes next. */
export interface SessionLogReadResult {
  events: Uint8Array[];
  /** The next event is larger than the budget of one reply: fetch it alone with `readEvent`. */
  largeNext: boolean;
}

/**
 * One session's log in a Durable Object's storage. The session record is cached in memory, so
 * an append takes its indexes and an update checks and sets the status without awaiting
 * anything in between: of any number of concurrent calls, each sees the effect of the previous
 * ones. The matching writes are issued in the same turn, so the runtime commits them together.
 *
 * Events are stored as UTF-8 bytes under `event:<index>` (ten digits), split into
 * {@link DURABLE_OBJECT_CHUNK_BYTES} pieces under `event:<index>:<piece>` when bigger, which fits
 * both storage backends.
 */
export class SessionLogStorage {
  readonly #state: DurableObjectState;
  readonly #storage: DurableObjectStorage;
  #session: StoredSession | undefined;

  private constructor(state: DurableObjectState, session: StoredSession | undefined) {
    this.#state = state;
    this.#storage = state.storage;
    this.#session = session;
  }

  /** Loads the session record; call inside the object's `blockConcurrencyWhile` in its constructor. */
  static async load(state: DurableObjectState): Promise<SessionLogStorage> {
    return new SessionLogStorage(state, await state.storage.get<StoredSession>(SESSION_KEY));
  }

  /** The live session, if it is `id` (any live session when `id` is left out). */
  live(id?: string): StoredSession | undefined {
    const session = this.#session;
    if (!session || session.expiresAt <= Date.now() || (id !== undefined && session.id !== id)) return undefined;
    return session;
  }

  /** When the stored session (live or not) expires, for the object's alarm. */
  get expiresAt(): number | undefined {
    return this.#session?.expiresAt;
  }

  async create(id: string, info: { interactionId: string; owner?: string }, ttlMs: number): Promise<boolean> {
    if (this.live()) return false;
    const created: StoredSession = { id, status: 'running', eventCount: 0, interactionId: info.interactionId, expiresAt: Date.now() + ttlMs };
    if (info.owner !== undefined) created.owner = info.owner;
    if (!this.#session) {
      this.#session = created;
      await this.#storage.put(SESSION_KEY, created);
      return true;
    }
    // An expired session's events go first, with nothing else let in meanwhile.
    return this.#state.blockConcurrencyWhile(async () => {
      if (this.live()) return false;
      await this.#deleteEvents();
      this.#session = created;
      await this.#storage.put(SESSION_KEY, created);
      return true;
    });
  }

  get(id: string): SessionInfo | undefined {
    const session = this.live(id);
    if (!session) return undefined;
    const info: SessionInfo = { status: session.status, eventCount: session.eventCount };
    if (session.interactionId !== undefined) info.interactionId = session.interactionId;
    if (session.owner !== undefined) info.owner = session.owner;
    return info;
  }

  /** Appends events (UTF-8 bytes) and resolves to the index of the first; `undefined` when there is no such session. */
  async append(id: string, events: readonly Uint8Array[], ttlMs: number): Promise<number | undefined> {
    const session = this.live(id);
    if (!session) return undefined;
    const first = session.eventCount;
    const next: StoredSession = { ...session, eventCount: first + events.length, expiresAt: Date.now() + ttlMs };
    this.#session = next;
    const entries: Array<[string, Uint8Array | PiecedEvent]> = [];
    events.forEach((bytes, offset) => {
      const key = eventKey(first + offset);
      if (bytes.byteLength <= DURABLE_OBJECT_CHUNK_BYTES) {
        entries.push([key, bytes]);
        return;
      }
      const pieces = splitBytes(bytes, DURABLE_OBJECT_CHUNK_BYTES);
      entries.push([key, { pieces: pieces.length, bytes: bytes.byteLength }]);
      pieces.forEach((piece, index) => entries.push([pieceKey(first + offset, index), piece]));
    });
    // Issued in one turn with the record, so they commit together.
    const writes = batches(entries).map((batch) => this.#storage.put(Object.fromEntries(batch)));
    writes.push(this.#storage.put(SESSION_KEY, next));
    await Promise.all(writes);
    return first;
  }

  /**
   * Up to `limit` events after index `after`, stopping before the reply would pass `budgetBytes`
   * (the first event is returned whatever its size, unless it alone passes the budget: then
   * `largeNext` says to fetch it with {@link readEvent}).
   */
  async read(id: string, after: number, limit: number, budgetBytes: number): Promise<SessionLogReadResult> {
    const session = this.live(id);
    const events: Uint8Array[] = [];
    if (!session) return { events, largeNext: false };
    const end = Math.min(session.eventCount, Math.max(0, after + 1) + Math.max(0, limit));
    let index = Math.max(0, after + 1);
    let used = 0;
    while (index < end) {
      const keys = Array.from({ length: Math.min(KEYS_PER_CALL, end - index) }, (_, offset) => eventKey(index + offset));
      const values = await this.#storage.get<Uint8Array | PiecedEvent>(keys);
      for (const key of keys) {
        const value = values.get(key);
        if (value === undefined) return { events, largeNext: false };
        const size = value instanceof Uint8Array ? value.byteLength : value.bytes;
        if (used + size > budgetBytes && events.length > 0) return { events, largeNext: false };
        if (size > budgetBytes) return { events, largeNext: true };
        events.push(value instanceof Uint8Array ? value : await this.#joinPieces(index, value));
        used += size;
        index += 1;
      }
    }
    return { events, largeNext: false };
  }

  /** One event's bytes, whatever its size; `undefined` when there is none at `index`. */
  async readEvent(id: string, index: number): Promise<Uint8Array | undefined> {
    const session = this.live(id);
    if (!session || index < 0 || index >= session.eventCount) return undefined;
    const value = await this.#storage.get<Uint8Array | PiecedEvent>(eventKey(index));
    if (value === undefined) return undefined;
    return value instanceof Uint8Array ? value : this.#joinPieces(index, value);
  }

  async update(
    id: string,
    change: { status: SessionStatus; interactionId?: string | null },
    from: readonly SessionStatus[] | undefined,
    ttlMs: number,
  ): Promise<boolean> {
    const session = this.live(id);
    if (!session || (from && !from.includes(session.status))) return false;
    const next: StoredSession = { ...session, status: change.status, expiresAt: Date.now() + ttlMs };
    if (change.interactionId === null) delete next.interactionId;
    else if (change.interactionId !== undefined) next.interactionId = change.interactionId;
    this.#session = next;
    await this.#storage.put(SESSION_KEY, next);
    return true;
  }

  /** Removes an expired session and its events; `false` when the session is still live (or there is none). */
  async dropIfExpired(): Promise<boolean> {
    if (!this.#session || this.#session.expiresAt > Date.now()) return false;
    return this.#state.blockConcurrencyWhile(async () => {
      if (!this.#session || this.#session.expiresAt > Date.now()) return false;
      await this.#deleteEvents();
      await this.#storage.delete(SESSION_KEY);
      this.#session = undefined;
      return true;
    });
  }

  /** Whether the object holds a session record at all (live or expired). */
  get holdsSession(): boolean {
    return this.#session !== undefined;
  }

  async #joinPieces(index: number, event: PiecedEvent): Promise<Uint8Array> {
    const keys = Array.from({ length: event.pieces }, (_, piece) => pieceKey(index, piece));
    const joined = new Uint8Array(event.bytes);
    let offset = 0;
    for (const batch of batches(keys)) {
      const values = await this.#storage.get<Uint8Array>(batch);
      for (const key of batch) {
        const piece = values.get(key);
        if (!piece || offset + piece.byteLength > event.bytes) throw new Error(`event ${index} is stored incompletely`);
        joined.set(piece, offset);
        offset += piece.byteLength;
      }
    }
    if (offset !== event.bytes) throw new Error(`event ${index} is stored incompletely`);
    return joined;
  }

  async #deleteEvents(): Promise<void> {
    for (;;) {
      const keys = [...(await this.#storage.list({ prefix: EVENT_PREFIX, limit: KEYS_PER_CALL })).keys()];
      if (keys.length === 0) return;
      await Promise.all(batches(keys).map((batch) => this.#storage.delete(batch)));
    }
  }
}

function eventKey(index: number): string {
  return `${EVENT_PREFIX}${String(index).padStart(10, '0')}`;
}

function pieceKey(index: number, piece: number): string {
  return `${eventKey(index)}:${String(piece).padStart(6, '0')}`;
}

function batches<T>(items: readonly T[]): T[][] {
  const result: T[][] = [];
  for (let start = 0; start < items.length; start += KEYS_PER_CALL) result.push(items.slice(start, start + KEYS_PER_CALL));
  return result;
}
