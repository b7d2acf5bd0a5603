import { createHash } from 'node:crypto';
import { AgentError } from '@org/core';
import type { EventBus, EventSubscription } from '@org/core';
import { storeFailure, StoreTimeoutError, within } from '../store-failure.js';
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
  /** Gives up the listening connection (and listens again on a new one). */
  let drop: ((error?: Error) => void) | undefined;
  /** Stops the heartbeat of the listening connection. */
  let stop: (() => void) | undefined;
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
      if (closed) {
        client.release(true);
        throw new Error('CLOSED');
      }
      // A connection that went silent while idle (a route dropped, a NAT that forgot it) reports
      // nothing and hears nothing: a small query every `timeoutMs` finds it out (and keeps such
      // routes alive), and a silent one is given up like a broken one.
      let beating = false;
      const heartbeat = setInterval(() => {
        if (beating) return;
        beating = true;
        within(client.query('SELECT 1'), 'PostgreSQL', connection.timeoutMs)
          .catch((error: unknown) => lost(error instanceof Error ? error : undefined))
          .finally(() => {
            beating = false;
          });
      }, connection.timeoutMs);
      heartbeat.unref?.();
      const lost = (error?: Error) => {
        if (current !== client) return;
        clearInterval(heartbeat);
        current = undefined;
        drop = undefined;
        stop = undefined;
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
      drop = lost;
      stop = () => clearInterval(heartbeat);
      return client;
    })().catch((error: unknown) => {
      listener = undefined;
      throw error;
    }));

  // A LISTEN the server does not answer in time: the connection went silent and would stay deaf,
  // so it is given up and every channel is listened to again on a new one.
  const listenOn = async (client: PostgresPoolClientLike, name: string): Promise<void> => {
    try {
      await within(client.query(`LISTEN "${name}"`), 'PostgreSQL', connection.timeoutMs);
    } catch (error) {
      if (error instanceof StoreTimeoutError && current === client) drop?.(error);
      throw error;
    }
  };

  // After a lost connection: listen again on every channel that still has listeners. What was
  // sent in between is lost; readers catch up from the log.
  const resume = () => {
    if (closed || channels.size === 0) return;
    void (async () => {
      const client = await connect();
      for (const name of channels.keys()) await listenOn(client, name);
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
        await listenOn(client, name);
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
          const client = current;
          if (unregister() && client) await within(client.query(`UNLISTEN "${name}"`), 'PostgreSQL', connection.timeoutMs).catch(() => undefined);
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
      stop?.();
      current = undefined;
      drop = undefined;
      stop = undefined;
      listener = undefined;
      client?.release(true);
      await close();
    },
  };
}

/**
 * An `EventBus` on PostgreSQL LISTEN/NOTIFY, for the wake-up messages of sessions between the
 * instances of a deployment. Publishing is `pg_notify` through the pool; subscriptions share one
 * dedicated connection taken from the pool (checked every `queryTimeoutMs`, and replaced, listening
 * again, when it breaks or goes silent).
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
