import { AgentError } from '../errors/index.js';
import { DEFAULT_INTERACTION_TTL_MS } from '../interactions/index.js';
import type { EventBus, SessionInfo, SessionLog } from '../ports/index.js';

/** Options of {@link createMemorySessionLog}. */
export interface MemorySessionLogOptions {
  /** Sessions not written for this long are gone. Default 7 days. */
  ttlMs?: number;
  /** Clock (epoch ms), for tests of expiry. */
  now?: () => number;
}

/**
 * An in-memory `SessionLog` for tests and single-process servers: every operation is atomic
 * because nothing else runs during it.
 *
 * @example
 * ```ts
 * const log = createMemorySessionLog();
 * ```
 */
export function createMemorySessionLog(options: MemorySessionLogOptions = {}): SessionLog {
  const sessions = new Map<string, { info: SessionInfo; events: string[]; writtenAt: number }>();
  const now = options.now ?? Date.now;
  const ttlMs = options.ttlMs ?? DEFAULT_INTERACTION_TTL_MS;
  const live = (id: string) => {
    const session = sessions.get(id);
    if (session && now() - session.writtenAt >= ttlMs) {
      sessions.delete(id);
      return undefined;
    }
    return session;
  };
  return {
    async create(id, info) {
      if (live(id)) return false;
      const created: SessionInfo = { status: 'running', eventCount: 0, interactionId: info.interactionId };
      if (info.owner !== undefined) created.owner = info.owner;
      sessions.set(id, { info: created, events: [], writtenAt: now() });
      return true;
    },
    async get(id) {
      const session = live(id);
      return session && { ...session.info, eventCount: session.events.length };
    },
    async append(id, events) {
      const session = live(id);
      if (!session) throw new AgentError('NOT_FOUND', `Session ${id} not found`);
      const first = session.events.length;
      session.events.push(...events);
      session.writtenAt = now();
      return first;
    },
    async read(id, after, limit) {
      const session = live(id);
      if (!session) return [];
      return session.events.slice(Math.max(0, after + 1), Math.max(0, after + 1) + limit);
    },
    async update(id, change, from) {
      const session = live(id);
      if (!session || (from && !from.includes(session.info.status))) return false;
      session.info.status = change.status;
      if (change.interactionId === null) delete session.info.interactionId;
      else if (change.interactionId !== undefined) session.info.interactionId = change.interactionId;
      session.writtenAt = now();
      return true;
    },
  };
}

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
