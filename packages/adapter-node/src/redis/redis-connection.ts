import { createHash } from 'node:crypto';
import { storeFailure, within } from '../store-failure.js';

/** A pub/sub listener as node-redis calls it. */
export type RedisMessageListener = (message: string, channel: string) => unknown;

/**
 * The few methods of a node-redis client (`createClient()` from `redis` 5 or 6) the Redis stores
 * use: raw commands, and `duplicate()` for the bus's subscriber connection.
 */
export interface RedisClientLike {
  sendCommand(args: readonly string[]): Promise<unknown>;
  duplicate(): RedisSubscriberLike;
}

/** A node-redis client used as a subscriber: the connection the bus listens on. */
export interface RedisSubscriberLike {
  connect(): Promise<unknown>;
  subscribe(channel: string, listener: RedisMessageListener): Promise<unknown>;
  unsubscribe(channel: string, listener: RedisMessageListener): Promise<unknown>;
  close?(): Promise<unknown>;
  quit?(): Promise<unknown>;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

/** How a Redis store, log or bus reaches Redis: a URL, or a client of yours. */
export interface RedisConnectionOptions {
  /**
   * A `redis://` or `rediss://` URL (credentials allowed; they never appear in an error). The
   * object opens its own connection on first use and closes it on `close()`.
   */
  url?: string;
  /**
   * A connected node-redis client of yours, shared with the rest of your app. It is never closed
   * by these objects; the bus opens its one subscriber connection with `client.duplicate()`.
   */
  client?: RedisClientLike;
  /** Prefix of every key and pub/sub channel, so deployments can share a server. Default `agent:`. */
  prefix?: string;
  /**
   * How long one command (or the subscription of the bus) may wait for Redis before the call
   * fails with `STORE_ERROR` (`redis: TIMEOUT`): a server that stops answering (a frozen process,
   * a dropped route, a half-open connection) never holds a run forever. A connection opened from
   * `url` that timed out is dropped, so the next call opens a new one. Default 10 000 ms.
   */
  commandTimeoutMs?: number;
}

/** Default of {@link RedisConnectionOptions.commandTimeoutMs}. */
const DEFAULT_COMMAND_TIMEOUT_MS = 10_000;

/** A Lua script with its SHA1, run with EVALSHA and loaded with EVAL when the server lacks it. */
export interface RedisScript {
  source: string;
  sha: string;
}

/** Prepares a Lua script for {@link RedisConnection.script}. */
export function defineRedisScript(source: string): RedisScript {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

/** One shared way to Redis for the store, the log and the bus. */
export interface RedisConnection {
  readonly prefix: string;
  /** How long one command may wait for Redis, in ms. */
  readonly timeoutMs: number;
  /** Runs one command. */
  command(args: readonly string[]): Promise<unknown>;
  /** Runs a Lua script atomically on `keys` with `args`. */
  script(script: RedisScript, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  /** Opens a new connection for SUBSCRIBE (it cannot run other commands), closed with {@link closeRedisClient}. */
  subscriber(): Promise<RedisSubscriberLike>;
  /** Closes the connection this object opened itself; a client passed in stays open. */
  close(): Promise<void>;
  /** `task`, failing after the command timeout instead of waiting on for a silent server. */
  within<T>(task: Promise<T>): Promise<T>;
}

const DEFAULT_PREFIX = 'agent:';

/** Checks the options and prepares a connection; nothing is opened before the first command. */
export function openRedisConnection(options: RedisConnectionOptions, factory: string): RedisConnection {
  if ((options.url === undefined) === (options.client === undefined)) {
    throw new TypeError(`${factory}: pass either \`url\` or \`client\``);
  }
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  if (typeof prefix !== 'string' || prefix.length > 100) throw new TypeError(`${factory}: \`prefix\` must be a string of at most 100 characters`);
  const timeoutMs = options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0) throw new TypeError(`${factory}: \`commandTimeoutMs\` must be a positive whole number of milliseconds`);
  const url = options.url;
  let opened: Promise<RedisClientLike> | undefined;
  let closed = false;
  const ready = (): Promise<RedisClientLike> => {
    if (options.client) return Promise.resolve(options.client);
    if (closed) return Promise.reject(storeFailure('redis', 'reach Redis', new Error('CLOSED')));
    opened ??= connect(url as string).catch((error: unknown) => {
      opened = undefined;
      throw error;
    });
    return opened;
  };
  const command = (args: readonly string[]): Promise<unknown> => {
    const pending = ready();
    return within(
      pending.then((client) => client.sendCommand(args)),
      'Redis',
      timeoutMs,
      () => {
        // A connection of ours that went silent may never answer again (node-redis would queue
        // every later command behind the lost one): drop it, the next command opens a new one.
        if (options.client || opened !== pending) return;
        opened = undefined;
        pending.then(destroyRedisClient, () => undefined);
      },
    );
  };
  return {
    prefix,
    timeoutMs,
    command,
    within: (task) => within(task, 'Redis', timeoutMs),
    async script(script, keys, args) {
      const tail = [String(keys.length), ...keys].concat(args);
      try {
        return await command(['EVALSHA', script.sha].concat(tail));
      } catch (error) {
        // The server was restarted or its script cache flushed: EVAL loads the script again.
        if (!/^NOSCRIPT/.test((error as Error | undefined)?.message ?? '')) throw error;
        return command(['EVAL', script.source].concat(tail));
      }
    },
    async subscriber() {
      const subscriber = (await within(ready(), 'Redis', timeoutMs)).duplicate();
      // node-redis reports connection trouble as 'error' events (and reconnects by itself); an
      // unheard 'error' event would end the process.
      subscriber.on('error', () => undefined);
      // A copy of a connected client retries its first connection for ever: bound it, and stop it.
      await within(subscriber.connect(), 'Redis', timeoutMs, () => destroyRedisClient(subscriber));
      return subscriber;
    },
    async close() {
      closed = true;
      const client = opened;
      opened = undefined;
      if (client) await closeRedisClient((await client.catch(() => undefined)) as RedisSubscriberLike | undefined, timeoutMs);
    },
  };
}

/** Attempts of the first connection before the operation that needed it fails. */
const FIRST_CONNECT_ATTEMPTS = 3;

async function connect(url: string): Promise<RedisClientLike> {
  const { createClient } = await import('redis');
  let connected = false;
  const client = createClient({
    url,
    socket: {
      // A server that cannot be reached (or refuses the password) at first fails the operation
      // after a few tries instead of holding it forever; the next operation tries again. Once
      // connected, a lost connection is re-established for as long as it takes, and commands
      // wait for it.
      reconnectStrategy: (retries: number, cause: Error) =>
        connected ? Math.min(50 * 2 ** retries, 2_000) : retries >= FIRST_CONNECT_ATTEMPTS - 1 ? cause : 100 * 2 ** retries,
    },
  });
  client.on('error', () => undefined);
  await client.connect();
  connected = true;
  return client as unknown as RedisClientLike;
}

/** Ends a connection opened by these objects at once, failing whatever still waits on it. */
function destroyRedisClient(client: RedisClientLike | RedisSubscriberLike): void {
  try {
    (client as unknown as { destroy?: () => void }).destroy?.();
  } catch {
    // Already closed.
  }
}

/** Closes a connection opened by these objects, whichever node-redis version made it. */
export async function closeRedisClient(client: RedisSubscriberLike | undefined, timeoutMs: number): Promise<void> {
  if (!client) return;
  try {
    // A graceful close waits for the replies still due, which a silent server never sends.
    await within(Promise.resolve(client.close ? client.close() : client.quit?.()), 'Redis', timeoutMs, () => destroyRedisClient(client));
  } catch {
    // Already closed, or closed by force.
  }
}

/** A reply as text: node-redis gives strings, or Buffers under a client's type mapping. */
export function replyText(value: unknown): string | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value === 'string') return value;
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf8');
  return String(value);
}
