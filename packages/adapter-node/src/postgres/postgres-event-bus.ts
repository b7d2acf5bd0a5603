import { createHash } from 'node:crypto';
import { AgentError } from '@org/core';
import type { EventBus, EventSubscription } from '@org/core';
import { storeFailure } from '../store-failure.js';
import {
  openPostgresConnection,
  type PostgresConnection,
  type PostgresConnectionOptions,
  type PostgresNotification,
  type PostgresPoolClientLike,
} from './postgres-connection.js';

/** Options of {@link createPostgresEventBus}. */
export type PostgresEventBusOptions = PostgresConnectionOptions;

/** An `EventBus` on PostgreSQL LISTEN/NOTIFY, with `close()` for its connections. */
export interface PostgresEventBus extends EventBus {
  /** Ends every subscription, closes the listening connection and the pool opened from `url`. */
  close(): Promise<void>;
}

/** PostgreSQL refuses NOTIFY payloads of 8000 bytes or more. */
const MAX_MESSAGE_BYTES = 7_999;

/** The bus on a connection that may be shared with a store and a log. */
export function postgresEventBusOn(connection: PostgresConnection, close: () => Promise<void>): PostgresEventBus {
  /** Listeners by notification channel. */
  const channels = new Map<string, Set<(message: string) => void>>();
  let listener: Promise<PostgresPoolClientLike> | undefined;
  let current: PostgresPoolClientLike | undefined;
  let closed = false;
  let retryMs = 100;

  // A channel name is an identifier of at most 63 bytes, and the session ids inside ours may be
  // anything: the name is (the start of) the prefix and a hash of prefix and channel.
  const nameOf = (channel: string) =>
    connection.prefix.slice(0, 15) + createHash('sha256').update(`${connection.prefix}\u0000${channel}`).digest('hex').slice(0, 47);

  const deliver = (notification: PostgresNotification) => {
    const listeners = channels.get(notification.channel);
    if (!listeners) return;
    const message = notification.payload ?? '';
    for (const each of listeners) each(message);
  };

  const connect = (): Promise<PostgresPoolClientLike> =>
    (listener ??= (async () => {
      const pool = await connection.pool();
      const client = await pool.connect();
      const lost = (error?: Error) => {
        if (current !== client) return;
        current = undefined;
        listener = undefined;
        // Destroyed, not given back: the pool must not hand out a connection that LISTENs.
        client.release(error ?? true);
        if (!closed && channels.size > 0) setTimeout(resume, retryMs);
        retryMs = Math.min(retryMs * 2, 5_000);
      };
      client.on('notification', deliver);
      client.on('error', lost);
      client.on('end', () => lost());
      current = client;
      return client;
    })().catch((error: unknown) => {
      listener = undefined;
      throw error;
    }));

  // After a lost connection: listen again on every channel that still has listeners. What was
  // sent in between is lost; readers catch up from the log.
  const resume = () => {
    if (closed || channels.size === 0) return;
    void (async () => {
      const client = await connect();
      for (const name of channels.keys()) await client.query(`LISTEN "${name}"`);
      retryMs = 100;
    })().catch(() => {
      setTimeout(resume, retryMs);
      retryMs = Math.min(retryMs * 2, 5_000);
    });
  };

  return {
    async subscribe(channel, listen) {
      const name = nameOf(channel);
      let active = true;
      const entry = (message: string) => {
        if (active) queueMicrotask(() => active && listen(message));
      };
      // Registered before any await, so a close of another subscription to this channel in the
      // meantime does not UNLISTEN it.
      let listeners = channels.get(name);
      if (!listeners) channels.set(name, (listeners = new Set()));
      listeners.add(entry);
      const unregister = (): boolean => {
        const set = channels.get(name);
        set?.delete(entry);
        if (set && set.size === 0) {
          channels.delete(name);
          return true;
        }
        return false;
      };
      try {
        if (closed) throw new Error('CLOSED');
        const client = await connect();
        // LISTEN takes effect before its reply: from here on, notifications reach this connection.
        await client.query(`LISTEN "${name}"`);
      } catch (error) {
        active = false;
        if (unregister()) void current?.query(`UNLISTEN "${name}"`).catch(() => undefined);
        throw storeFailure('postgres', `subscribe to ${channel}`, error);
      }
      const subscription: EventSubscription = {
        async close() {
          if (!active) return;
          active = false;
          // Queued on the same connection as any later LISTEN of this channel, so the order holds.
          if (unregister()) await current?.query(`UNLISTEN "${name}"`).catch(() => undefined);
        },
      };
      return subscription;
    },
    async publish(channel, message) {
      if (Buffer.byteLength(message, 'utf8') > MAX_MESSAGE_BYTES) {
        throw new AgentError('PAYLOAD_TOO_LARGE', `Bus message for ${channel}: ${MAX_MESSAGE_BYTES} bytes at most (PostgreSQL NOTIFY)`);
      }
      try {
        await connection.query('SELECT pg_notify($1, $2)', [nameOf(channel), message]);
      } catch (error) {
        throw storeFailure('postgres', `publish to ${channel}`, error);
      }
    },
    async close() {
      closed = true;
      channels.clear();
      const client = current;
      current = undefined;
      listener = undefined;
      client?.release(true);
      await close();
    },
  };
}

/**
 * An `EventBus` on PostgreSQL LISTEN/NOTIFY, for the wake-up messages of sessions between the
 * instances of a deployment. Publishing is `pg_notify` through the pool; subscriptions share one
 * dedicated connection taken from the pool (and replaced, listening again, when it breaks).
 * `subscribe` resolves once the server has accepted the LISTEN. Channel names are a hash of
 * prefix and channel, so any channel text is safe; messages are at most 7999 bytes.
 *
 * @example
 * ```ts
 * import { createPostgresEventBus } from '@org/adapter-node/postgres';
 * const bus = createPostgresEventBus({ url: process.env.DATABASE_URL! });
 * ```
 */
export function createPostgresEventBus(options: PostgresEventBusOptions): PostgresEventBus {
  const connection = openPostgresConnection(options, 'createPostgresEventBus');
  return postgresEventBusOn(connection, () => connection.close());
}
