import { randomUUID } from 'node:crypto';
import { AgentError, checkRecordId, type InteractionStore } from '@org/core';
import { checkTtl, storeFailure } from '../store-failure.js';
import { defineRedisScript, openRedisConnection, replyText, type RedisConnection, type RedisConnectionOptions } from './redis-connection.js';

/** Options of {@link createRedisInteractionStore}. */
export interface RedisInteractionStoreOptions extends RedisConnectionOptions {
  /** Records not written for this long are gone (Redis expires them). Default 7 days. */
  ttlMs?: number;
  /** The largest state kept, in UTF-8 bytes. Default: the runtime's limit (64 MiB). */
  maxStateBytes?: number;
}

/** An `InteractionStore` in Redis, with `close()` for the connection it opened itself. */
export interface RedisInteractionStore extends InteractionStore {
  /** Closes the connection opened from `url`; a client passed in stays open. */
  close(): Promise<void>;
}

// KEYS[1] the record. ARGV: mode ('create' | 'update'), expected version, meta, new version,
// time to live (ms), and the state when one is written.
const SET = defineRedisScript(`
local current = redis.call('HGET', KEYS[1], 'version')
if ARGV[1] == 'create' then
  if current then return false end
elseif current ~= ARGV[2] then
  return false
end
if #ARGV >= 6 then
  redis.call('HSET', KEYS[1], 'meta', ARGV[3], 'version', ARGV[4], 'state', ARGV[6])
else
  redis.call('HSET', KEYS[1], 'meta', ARGV[3], 'version', ARGV[4])
end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return ARGV[4]
`);

// KEYS[1] the record; ARGV[1] the expected version.
const DELETE_IF = defineRedisScript(`
if redis.call('HGET', KEYS[1], 'version') ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
`);

/** The store on a connection that may be shared with a session log and a bus. */
export function redisInteractionStoreOn(
  connection: RedisConnection,
  options: Pick<RedisInteractionStoreOptions, 'ttlMs' | 'maxStateBytes'>,
  close: () => Promise<void>,
): RedisInteractionStore {
  const ttl = String(checkTtl(options.ttlMs, 'createRedisInteractionStore'));
  const keyOf = (id: string) => `${connection.prefix}interaction:${id}`;
  return {
    ...(options.maxStateBytes === undefined ? {} : { maxStateBytes: options.maxStateBytes }),
    async get(id) {
      checkRecordId('Interaction', id);
      let reply: unknown;
      try {
        reply = await connection.command(['HMGET', keyOf(id), 'meta', 'state', 'version']);
      } catch (error) {
        throw storeFailure('redis', `read interaction ${id}`, error);
      }
      const [meta, state, version] = (reply as unknown[]).map(replyText);
      if (meta === undefined || state === undefined || version === undefined) return undefined;
      return { meta, state, version };
    },
    async set(id, write, expected) {
      checkRecordId('Interaction', id);
      if (expected === null && write.state === undefined) throw new AgentError('STORE_ERROR', `Interaction ${id}: a new record needs a state`);
      const version = randomUUID();
      const args = [expected === null ? 'create' : 'update', expected ?? '', write.meta, version, ttl];
      if (write.state !== undefined) args.push(write.state);
      try {
        return replyText(await connection.script(SET, [keyOf(id)], args));
      } catch (error) {
        throw storeFailure('redis', `save interaction ${id}`, error);
      }
    },
    async delete(id, expected) {
      checkRecordId('Interaction', id);
      try {
        const deleted =
          expected === undefined
            ? await connection.command(['DEL', keyOf(id)])
            : await connection.script(DELETE_IF, [keyOf(id)], [expected]);
        return Number(deleted) > 0;
      } catch (error) {
        throw storeFailure('redis', `delete interaction ${id}`, error);
      }
    },
    close,
  };
}

/**
 * An `InteractionStore` in Redis that every instance of a deployment shares: one hash per record
 * (`meta`, `state`, `version`) under `<prefix>interaction:<id>`. Conditional writes run as one Lua
 * script, so of several writers with the same expected version exactly one wins; every write sets
 * the key's expiry to `ttlMs` (PEXPIRE), so Redis itself drops records nobody wrote for that long.
 *
 * Pass `url` to let the store open its own connection, or `client` to share a connected
 * node-redis client of yours.
 *
 * @example
 * ```ts
 * import { createRedisInteractionStore } from '@org/adapter-node/redis';
 * const store = createRedisInteractionStore({ url: process.env.REDIS_URL! });
 * ```
 */
export function createRedisInteractionStore(options: RedisInteractionStoreOptions): RedisInteractionStore {
  const connection = openRedisConnection(options, 'createRedisInteractionStore');
  return redisInteractionStoreOn(connection, options, () => connection.close());
}
