import type { EventBus, EventSubscription } from '@org/core';
import { storeFailure } from '../store-failure.js';
import { closeRedisClient, openRedisConnection, type RedisConnection, type RedisConnectionOptions, type RedisSubscriberLike } from './redis-connection.js';

/** Options of {@link createRedisEventBus}. */
export type RedisEventBusOptions = RedisConnectionOptions;

/** An `EventBus` on Redis pub/sub, with `close()` for its connections. */
export interface RedisEventBus extends EventBus {
  /** Ends every subscription, closes the subscriber connection and the connection opened from `url`. */
  close(): Promise<void>;
}

/** The bus on a connection that may be shared with a store and a log. */
export function redisEventBusOn(connection: RedisConnection, close: () => Promise<void>): RedisEventBus {
  let subscriber: Promise<RedisSubscriberLike> | undefined;
  let closed = false;
  const open = (): Promise<RedisSubscriberLike> =>
    (subscriber ??= connection.subscriber().catch((error: unknown) => {
      subscriber = undefined;
      throw error;
    }));
  return {
    async subscribe(channel, listener) {
      const name = connection.prefix + channel;
      let active = true;
      // Each subscription has its own function, so closing one never removes another's.
      const deliver = (message: string) => {
        if (active) queueMicrotask(() => active && listener(message));
      };
      let connected: RedisSubscriberLike | undefined;
      try {
        if (closed) throw new Error('CLOSED');
        connected = await open();
        // node-redis resolves SUBSCRIBE once the server has confirmed it; a silent server never does.
        await connection.within(connected.subscribe(name, deliver));
      } catch (error) {
        // A subscription that failed never calls its listener, even if Redis confirms it later.
        active = false;
        void connected?.unsubscribe(name, deliver).catch(() => undefined);
        throw storeFailure('redis', `subscribe to ${channel}`, error);
      }
      const subscribed = connected;
      const subscription: EventSubscription = {
        async close() {
          if (!active) return;
          active = false;
          await connection.within(subscribed.unsubscribe(name, deliver)).catch(() => undefined);
        },
      };
      return subscription;
    },
    async publish(channel, message) {
      try {
        await connection.command(['PUBLISH', connection.prefix + channel, message]);
      } catch (error) {
        throw storeFailure('redis', `publish to ${channel}`, error);
      }
    },
    async close() {
      closed = true;
      const pending = subscriber;
      subscriber = undefined;
      if (pending) await closeRedisClient(await pending.catch(() => undefined), connection.timeoutMs);
      await close();
    },
  };
}

/**
 * An `EventBus` on Redis pub/sub, for the wake-up messages of sessions between the instances of a
 * deployment. Publishing uses the main connection; subscriptions share one dedicated subscriber
 * connection (opened on the first `subscribe`, re-subscribed by node-redis after a reconnect).
 * `subscribe` resolves once Redis has confirmed the subscription; `subscribe` and `publish` fail
 * with `STORE_ERROR` after `commandTimeoutMs` without an answer. Channels carry the key prefix.
 *
 * @example
 * ```ts
 * import { createRedisEventBus } from '@org/adapter-node/redis';
 * const bus = createRedisEventBus({ url: process.env.REDIS_URL! });
 * ```
 */
export function createRedisEventBus(options: RedisEventBusOptions): RedisEventBus {
  const connection = openRedisConnection(options, 'createRedisEventBus');
  return redisEventBusOn(connection, () => connection.close());
}
