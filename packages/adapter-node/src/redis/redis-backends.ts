import { redisEventBusOn, type RedisEventBus } from './redis-event-bus.js';
import { openRedisConnection, type RedisConnectionOptions } from './redis-connection.js';
import { redisInteractionStoreOn, type RedisInteractionStore } from './redis-interaction-store.js';
import { redisSessionLogOn, type RedisSessionLog } from './redis-session-log.js';

/** Options of {@link createRedisBackends}. */
export interface RedisBackendsOptions extends RedisConnectionOptions {
  /** Interactions and sessions not written for this long are gone. Default 7 days. */
  ttlMs?: number;
  /** The largest interaction state kept, in UTF-8 bytes. Default: the runtime's limit (64 MiB). */
  maxStateBytes?: number;
}

/** The interaction store, session log and event bus of one deployment, on one Redis connection. */
export interface RedisBackends {
  store: RedisInteractionStore;
  log: RedisSessionLog;
  bus: RedisEventBus;
  /** Closes the bus's subscriber connection and the connection opened from `url`. */
  close(): Promise<void>;
}

/**
 * The store, the session log and the bus a deployment needs, sharing one Redis connection (plus
 * the bus's subscriber connection). Their own `close()` methods close nothing shared; close the
 * bundle.
 *
 * @example
 * ```ts
 * import { createRedisBackends } from '@org/adapter-node/redis';
 * const { store, log, bus, close } = createRedisBackends({ url: process.env.REDIS_URL! });
 * ```
 */
export function createRedisBackends(options: RedisBackendsOptions): RedisBackends {
  const connection = openRedisConnection(options, 'createRedisBackends');
  const shared = async () => undefined;
  const store = redisInteractionStoreOn(connection, options, shared);
  const log = redisSessionLogOn(connection, options, shared);
  const bus = redisEventBusOn(connection, shared);
  return {
    store,
    log,
    bus,
    async close() {
      await bus.close();
      await connection.close();
    },
  };
}
