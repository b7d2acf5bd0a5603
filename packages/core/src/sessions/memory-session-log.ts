import { AgentError } from '../errors/index.js';
import { DEFAULT_INTERACTION_TTL_MS } from '../interactions/index.js';
import { TERMINAL_SESSION_STATUSES, type EventBus, type SessionInfo, type SessionLog, type SessionStatus } from '../ports/index.js';

/** Options of {@link createMemorySessionLog}. */
export interface MemorySessionLogOptions {
  /** Sessions not written for this long are gone. Default 7 days. */
  ttlMs?: number;
  /**
   * Most characters of event JSON the log holds in all. Past it, the sessions written longest ago
   * make room: ended ones first, then suspended or paused ones; a running session is never
   * dropped. Default 64 MiB.
   */
  maxChars?: number;
  /** Clock (epoch ms), for tests of expiry. */
  now?: () => number;
}

/** Default of {@link MemorySessionLogOptions.maxChars}. */
const DEFAULT_MAX_CHARS = 64 * 1024 * 1024;

interface StoredSession {
  info: SessionInfo;
  /**
   * The events in the batches they were appended in, oldest first: one event's text as it is, or
   * the texts of several joined into one string. A joined batch is one object for the garbage
   * collector to copy where its events would be hundreds, and copying kept events is most of what
   * a long stream of small events costs it.
   */
  batches: Array<string | JoinedBatch>;
  /** The index of each batch's first event. */
  starts: number[];
  eventCount: number;
  chars: number;
  writtenAt: number;
}

/** Several events' texts in one string; `ends[k]` is where event `k` ends in it. */
interface JoinedBatch {
  text: string;
  ends: number[];
}

/**
 * An in-memory `SessionLog` for tests and single-process servers: every operation is atomic
 * because nothing else runs during it. Its memory is bounded: sessions past their time to live
 * are swept as others are written, and a character budget makes old sessions give way (see
 * {@link MemorySessionLogOptions}).
 *
 * @example
 * ```ts
 * const log = createMemorySessionLog({ maxChars: 16 * 1024 * 1024 });
 * ```
 */
export function createMemorySessionLog(options: MemorySessionLogOptions = {}): SessionLog {
  /** In the order they were last written: the oldest first. */
  const sessions = new Map<string, StoredSession>();
  const now = options.now ?? Date.now;
  const ttlMs = options.ttlMs ?? DEFAULT_INTERACTION_TTL_MS;
  const maxChars = options.maxChars ?? DEFAULT_MAX_CHARS;
  let totalChars = 0;
  const drop = (id: string, session: StoredSession) => {
    sessions.delete(id);
    totalChars -= session.chars;
  };
  const live = (id: string) => {
    const session = sessions.get(id);
    if (session && now() - session.writtenAt >= ttlMs) {
      drop(id, session);
      return undefined;
    }
    return session;
  };
  /** Marks a session written now: it moves to the end of the order, and expired ones at the front go. */
  const written = (id: string, session: StoredSession) => {
    const at = now();
    session.writtenAt = at;
    sessions.delete(id);
    sessions.set(id, session);
    for (const [oldId, old] of sessions) {
      if (at - old.writtenAt < ttlMs) break;
      drop(oldId, old);
    }
  };
  /** Drops the sessions written longest ago until the events fit: ended ones first, never running ones. */
  const makeRoom = () => {
    for (const mayDrop of [isEnded, isWaiting]) {
      for (const [id, session] of sessions) {
        if (totalChars <= maxChars) return;
        if (mayDrop(session.info.status)) drop(id, session);
      }
    }
  };
  return {
    async create(id, info) {
      if (live(id)) return false;
      const created: SessionInfo = { status: 'running', eventCount: 0, interactionId: info.interactionId };
      if (info.owner !== undefined) created.owner = info.owner;
      const session: StoredSession = { info: created, batches: [], starts: [], eventCount: 0, chars: 0, writtenAt: 0 };
      written(id, session);
      return true;
    },
    async get(id) {
      const session = live(id);
      return session && { ...session.info, eventCount: session.eventCount };
    },
    async append(id, events) {
      const session = live(id);
      if (!session) throw new AgentError('NOT_FOUND', `Session ${id} not found`);
      const first = session.eventCount;
      let chars = 0;
      if (events.length === 1) {
        const only = events[0] as string;
        chars = only.length;
        session.batches.push(only);
        session.starts.push(first);
      } else if (events.length > 1) {
        const ends = new Array<number>(events.length);
        for (let at = 0; at < events.length; at += 1) {
          chars += (events[at] as string).length;
          ends[at] = chars;
        }
        session.batches.push({ text: events.join(''), ends });
        session.starts.push(first);
      }
      session.eventCount += events.length;
      session.chars += chars;
      totalChars += chars;
      written(id, session);
      if (totalChars > maxChars) makeRoom();
      return first;
    },
    async read(id, after, limit) {
      const session = live(id);
      if (!session) return [];
      return readEvents(session, Math.max(0, after + 1), Math.min(session.eventCount, Math.max(0, after + 1) + limit));
    },
    async update(id, change, from) {
      const session = live(id);
      if (!session || (from && !from.includes(session.info.status))) return false;
      session.info.status = change.status;
      if (change.interactionId === null) delete session.info.interactionId;
      else if (change.interactionId !== undefined) session.info.interactionId = change.interactionId;
      written(id, session);
      if (totalChars > maxChars) makeRoom();
      return true;
    },
  };
}

/** The texts of events `from` (inclusive) to `to` (exclusive). */
function readEvents(session: StoredSession, from: number, to: number): string[] {
  const events: string[] = [];
  if (from >= to) return events;
  // The last batch that starts at or before `from`.
  let low = 0;
  let high = session.starts.length - 1;
  while (low < high) {
    const middle = (low + high + 1) >> 1;
    if ((session.starts[middle] as number) <= from) low = middle;
    else high = middle - 1;
  }
  let index = from;
  for (let at = low; index < to && at < session.batches.length; at += 1) {
    const batch = session.batches[at] as string | JoinedBatch;
    if (typeof batch === 'string') {
      events.push(batch);
      index += 1;
      continue;
    }
    const { text, ends } = batch;
    for (let k = index - (session.starts[at] as number); k < ends.length && index < to; k += 1, index += 1) {
      events.push(text.slice(k === 0 ? 0 : ends[k - 1], ends[k]));
    }
  }
  return events;
}

const isEnded = (status: SessionStatus): boolean => (TERMINAL_SESSION_STATUSES as readonly string[]).includes(status);
const isWaiting = (status: SessionStatus): boolean => status === 'suspended' || status === 'paused';

/**
 * An in-memory `EventBus` for one process: messages reach the channel's current subscribers on
 * a later microtask, as they would from a real broker.
 *
 * @example
 * ```ts
 * const bus = createMemoryEventBus();
 * ```
 */
export function createMemoryEventBus(): EventBus {
  const channels = new Map<string, Set<(message: string) => void>>();
  return {
    async subscribe(channel, listener) {
      let listeners = channels.get(channel);
      if (!listeners) channels.set(channel, (listeners = new Set()));
      const entry = (message: string) => listener(message);
      listeners.add(entry);
      return {
        async close() {
          listeners.delete(entry);
          if (listeners.size === 0 && channels.get(channel) === listeners) channels.delete(channel);
        },
      };
    },
    async publish(channel, message) {
      const listeners = channels.get(channel);
      if (!listeners) return;
      for (const listener of [...listeners]) queueMicrotask(() => listener(message));
    },
  };
}
