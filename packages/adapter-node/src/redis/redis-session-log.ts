import { AgentError, checkRecordId } from '@org/core';
import type { SessionInfo, SessionLog, SessionStatus } from '@org/core';
import { checkStoredSession, checkTtl, storeFailure } from '../store-failure.js';
import { defineRedisScript, openRedisConnection, replyText, type RedisConnection, type RedisConnectionOptions } from './redis-connection.js';

/** Options of {@link createRedisSessionLog}. */
export interface RedisSessionLogOptions extends RedisConnectionOptions {
  /** Sessions not written for this long are gone (Redis expires them). Default 7 days. */
  ttlMs?: number;
}

/** A `SessionLog` in Redis, with `close()` for the connection it opened itself. */
export interface RedisSessionLog extends SessionLog {
  /** Closes the connection opened from `url`; a client passed in stays open. */
  close(): Promise<void>;
}

// Every script gets KEYS[1] = the session's hash, KEYS[2] = its event list, ARGV[1] = the time to live.

// ARGV[2] interaction, ARGV[3] owner (optional).
const CREATE = defineRedisScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'status', 'running', 'count', 0, 'interactionId', ARGV[2])
if #ARGV >= 3 then redis.call('HSET', KEYS[1], 'owner', ARGV[3]) end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
`);

// ARGV[2..] the events. RPUSH answers with the list's new length, which gives the first index;
// the whole script runs alone, so the count and the list never disagree.
const APPEND = defineRedisScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local length = redis.call('LLEN', KEYS[2])
for first = 2, #ARGV, 1000 do
  length = redis.call('RPUSH', KEYS[2], unpack(ARGV, first, math.min(first + 999, #ARGV)))
end
redis.call('HSET', KEYS[1], 'count', length)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return length - (#ARGV - 1)
`);

// ARGV[2] the new status, ARGV[3] 'keep' | 'set' | 'clear' the interaction, ARGV[4] the
// interaction, ARGV[5] 'any' | 'only', ARGV[6..] the statuses it may change from.
const UPDATE = defineRedisScript(`
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 0 end
if ARGV[5] == 'only' then
  local allowed = false
  for index = 6, #ARGV do
    if ARGV[index] == status then allowed = true end
  end
  if not allowed then return 0 end
end
redis.call('HSET', KEYS[1], 'status', ARGV[2])
if ARGV[3] == 'set' then
  redis.call('HSET', KEYS[1], 'interactionId', ARGV[4])
elseif ARGV[3] == 'clear' then
  redis.call('HDEL', KEYS[1], 'interactionId')
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return 1
`);

/** The log on a connection that may be shared with a store and a bus. */
export function redisSessionLogOn(connection: RedisConnection, options: Pick<RedisSessionLogOptions, 'ttlMs'>, close: () => Promise<void>): RedisSessionLog {
  const ttl = String(checkTtl(options.ttlMs, 'createRedisSessionLog'));
  const keysOf = (id: string) => [`${connection.prefix}session:${id}`, `${connection.prefix}session-events:${id}`];
  const attempt = async <T>(action: string, body: () => Promise<T>): Promise<T> => {
    try {
      return await body();
    } catch (error) {
      throw storeFailure('redis', action, error);
    }
  };
  return {
    async create(id, info) {
      checkRecordId('Session', id);
      const args = [ttl, info.interactionId];
      if (info.owner !== undefined) args.push(info.owner);
      return attempt(`create session ${id}`, async () => Number(await connection.script(CREATE, keysOf(id), args)) === 1);
    },
    async get(id) {
      checkRecordId('Session', id);
      const reply = await attempt(`read session ${id}`, () => connection.command(['HMGET', keysOf(id)[0] as string, 'status', 'count', 'interactionId', 'owner']));
      const [status, count, interactionId, owner] = (reply as unknown[]).map(replyText);
      if (status === undefined) return undefined;
      const eventCount = Number(count ?? 0);
      checkStoredSession(id, { status, eventCount });
      const info: SessionInfo = { status: status as SessionStatus, eventCount };
      if (interactionId !== undefined) info.interactionId = interactionId;
      if (owner !== undefined) info.owner = owner;
      return info;
    },
    async append(id, events) {
      checkRecordId('Session', id);
      const first = await attempt(`append to session ${id}`, () => connection.script(APPEND, keysOf(id), [ttl, ...events]));
      if (Number(first) < 0) throw new AgentError('NOT_FOUND', `Session ${id} not found`);
      return Number(first);
    },
    async read(id, after, limit) {
      checkRecordId('Session', id);
      const start = Math.max(0, Math.floor(after) + 1);
      // LRANGE takes integers only (`1e+21` and `Infinity` are errors); no list reaches 2^53.
      const count = Math.min(Math.floor(limit), 100_000);
      if (!(count > 0) || !Number.isSafeInteger(start)) return [];
      const reply = await attempt(`read session ${id}`, () => connection.command(['LRANGE', keysOf(id)[1] as string, String(start), String(start + count - 1)]));
      return (reply as unknown[]).map((event) => replyText(event) ?? '');
    },
    async update(id, change, from) {
      checkRecordId('Session', id);
      const interaction = change.interactionId === undefined ? ['keep', ''] : change.interactionId === null ? ['clear', ''] : ['set', change.interactionId];
      const args = [ttl, change.status, ...interaction, from ? 'only' : 'any', ...(from ?? [])];
      return attempt(`update session ${id}`, async () => Number(await connection.script(UPDATE, keysOf(id), args)) === 1);
    },
    close,
  };
}

/**
 * A `SessionLog` in Redis that every instance of a deployment shares: per session a hash
 * (`status`, `count`, `interactionId`, `owner`) under `<prefix>session:<id>` and a list of events
 * under `<prefix>session-events:<id>`. Appends, creates and status changes each run as one Lua
 * script, so indexes are dense and ordered however many instances append at once. Every write
 * sets both keys to expire after `ttlMs`.
 *
 * @example
 * ```ts
 * import { createRedisSessionLog } from '@org/adapter-node/redis';
 * const log = createRedisSessionLog({ url: process.env.REDIS_URL! });
 * ```
 */
export function createRedisSessionLog(options: RedisSessionLogOptions): RedisSessionLog {
  const connection = openRedisConnection(options, 'createRedisSessionLog');
  return redisSessionLogOn(connection, options, () => connection.close());
}
