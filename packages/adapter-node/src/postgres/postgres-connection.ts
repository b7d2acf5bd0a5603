import { AgentError } from '@org/core';
import { storeFailure, within } from '../store-failure.js';
import { migrateOn } from './postgres-schema.js';

/** What a query resolves to, as `pg` gives it. */
export interface PostgresQueryResult {
  rows: Array<Record<string, unknown>>;
  rowCount: number | null;
}

/** A notification as `pg` reports it on a client that LISTENs. */
export interface PostgresNotification {
  channel: string;
  payload?: string | undefined;
}

/** A connection checked out of a pool (`pg`'s `PoolClient`): the bus listens on one. */
export interface PostgresPoolClientLike {
  query(text: string, values?: unknown[]): Promise<PostgresQueryResult>;
  release(error?: Error | boolean): void;
  on(event: 'notification', listener: (notification: PostgresNotification) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
}

/** The few methods of a `pg` `Pool` (or a pool with the same API) the PostgreSQL stores use. */
export interface PostgresPoolLike {
  query(text: string, values?: unknown[]): Promise<PostgresQueryResult>;
  connect(): Promise<PostgresPoolClientLike>;
}

/** How a PostgreSQL store, log or bus reaches the database: a URL, or a pool of yours. */
export interface PostgresConnectionOptions {
  /**
   * A `postgres://` URL (`pg`'s connection string; credentials allowed, they never appear in an
   * error). The object opens its own `pg` pool on first use and ends it on `close()`.
   */
  url?: string;
  /** A `pg` `Pool` of yours, shared with the rest of your app. It is never ended by these objects. */
  pool?: PostgresPoolLike;
  /**
   * Prefix of the table names and of the notification channels, so deployments can share a
   * database. Letters, digits and `_`, starting with a letter or `_`. Default `agent_`.
   */
  prefix?: string;
  /**
   * Create the tables when missing, once, before the first query (`CREATE TABLE IF NOT EXISTS`,
   * serialised between instances by an advisory lock). Default `true`; set `false` when the
   * database user may not create tables and run the SQL of `postgresSchema()` yourself.
   */
  migrate?: boolean;
  /**
   * With `url`: how long opening a connection may take (`pg`'s `connectionTimeoutMillis`). A
   * database that never answers (a dropped packet, a host that is gone) then fails each call with
   * `STORE_ERROR` instead of holding it forever. Default 10 000 ms.
   */
  connectTimeoutMs?: number;
  /**
   * How long one statement (and the bus's LISTEN) may wait for the database before the call fails
   * with `STORE_ERROR` (`postgres: TIMEOUT`): a database that stops answering mid-operation (a
   * frozen server, a dropped route, a half-open connection) never holds a run forever. The
   * connection it waited on is destroyed, so the next call takes another. Default 10 000 ms.
   */
  queryTimeoutMs?: number;
}

/** Default of {@link PostgresConnectionOptions.connectTimeoutMs}. */
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** Default of {@link PostgresConnectionOptions.queryTimeoutMs}. */
const DEFAULT_QUERY_TIMEOUT_MS = 10_000;

/**
 * Runs one statement on a connection of `pool`, failing after `timeoutMs`. A connection that
 * failed or timed out is destroyed, not given back (as `pg`'s own `pool.query` does on an error):
 * a silent one would otherwise fail every later statement that the pool handed it.
 */
async function queryWithin(pool: PostgresPoolLike, text: string, values: unknown[] | undefined, timeoutMs: number): Promise<PostgresQueryResult> {
  let client: PostgresPoolClientLike | undefined;
  let settled = false;
  const work = (async () => {
    const checkedOut = await pool.connect();
    if (settled) {
      // Checked out after the call gave up: a healthy connection goes back.
      checkedOut.release();
      return undefined as never;
    }
    client = checkedOut;
    return checkedOut.query(text, values);
  })();
  try {
    const result = await within(work, 'PostgreSQL', timeoutMs);
    settled = true;
    client?.release();
    return result;
  } catch (error) {
    settled = true;
    client?.release(error instanceof Error ? error : true);
    throw error;
  }
}

/** The quoted names of the tables for one prefix. */
export interface PostgresTables {
  interactions: string;
  sessions: string;
  events: string;
}

/** One shared way to PostgreSQL for the store, the log and the bus. */
export interface PostgresConnection {
  readonly prefix: string;
  readonly tables: PostgresTables;
  /** How long one statement may wait for the database, in ms. */
  readonly timeoutMs: number;
  /** Runs one statement (after the tables exist). */
  query(text: string, values?: unknown[]): Promise<PostgresQueryResult>;
  /** The pool, for a dedicated connection. */
  pool(): Promise<PostgresPoolLike>;
  /** Ends the pool this object opened itself; a pool passed in stays open. */
  close(): Promise<void>;
}

const DEFAULT_PREFIX = 'agent_';
const PREFIX = /^[A-Za-z_][A-Za-z0-9_]{0,39}$/;

/** The quoted table names for `prefix` (checked: it is part of SQL text). */
export function tablesFor(prefix: string, factory: string): PostgresTables {
  if (typeof prefix !== 'string' || !PREFIX.test(prefix)) {
    throw new TypeError(`${factory}: \`prefix\` must be 1 to 40 letters, digits or "_", starting with a letter or "_"`);
  }
  return { interactions: `"${prefix}interactions"`, sessions: `"${prefix}sessions"`, events: `"${prefix}session_events"` };
}

/** Checks the options and prepares a connection; nothing is opened before the first query. */
export function openPostgresConnection(options: PostgresConnectionOptions, factory: string): PostgresConnection {
  if ((options.url === undefined) === (options.pool === undefined)) throw new TypeError(`${factory}: pass either \`url\` or \`pool\``);
  const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  if (!(connectTimeoutMs > 0) || !Number.isFinite(connectTimeoutMs)) {
    throw new TypeError(`${factory}: \`connectTimeoutMs\` must be a positive number of milliseconds`);
  }
  const queryTimeoutMs = options.queryTimeoutMs ?? DEFAULT_QUERY_TIMEOUT_MS;
  if (!Number.isSafeInteger(queryTimeoutMs) || queryTimeoutMs <= 0) {
    throw new TypeError(`${factory}: \`queryTimeoutMs\` must be a positive whole number of milliseconds`);
  }
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const tables = tablesFor(prefix, factory);
  let opened: Promise<PostgresPoolLike & { end(): Promise<void> }> | undefined;
  let closed = false;
  let migrated: Promise<void> | undefined;
  const pool = (): Promise<PostgresPoolLike> => {
    if (options.pool) return Promise.resolve(options.pool);
    if (closed) return Promise.reject(new Error('CLOSED'));
    return (opened ??= createPool(options.url as string, connectTimeoutMs));
  };
  const ready = async (): Promise<PostgresPoolLike> => {
    const target = await pool();
    if (options.migrate !== false) {
      const timed: PostgresPoolLike = { query: (text, values) => queryWithin(target, text, values, queryTimeoutMs), connect: () => target.connect() };
      migrated ??= migrateOn(timed, prefix).catch((error: unknown) => {
        migrated = undefined;
        throw error;
      });
      await migrated;
    }
    return target;
  };
  return {
    prefix,
    tables,
    timeoutMs: queryTimeoutMs,
    async query(text, values) {
      return queryWithin(await ready(), text, values, queryTimeoutMs);
    },
    pool: ready,
    async close() {
      closed = true;
      const pending = opened;
      opened = undefined;
      if (pending) await (await pending.catch(() => undefined))?.end().catch(() => undefined);
    },
  };
}

async function createPool(url: string, connectTimeoutMs: number): Promise<PostgresPoolLike & { end(): Promise<void> }> {
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({ connectionString: url, keepAlive: true, connectionTimeoutMillis: Math.ceil(connectTimeoutMs) });
  // An idle connection that breaks is reported on the pool; an unheard 'error' would end the process.
  pool.on('error', () => undefined);
  return pool as unknown as PostgresPoolLike & { end(): Promise<void> };
}

// PostgreSQL's `text` cannot hold U+0000. A text that contains it (or starts with the marker) is
// stored as the marker followed by its JSON string, which escapes it; JSON the runtime writes
// never contains a raw U+0000, so this costs a scan and nothing else.
const MARKER = '\u0001';

/** A text as PostgreSQL can store it; {@link decodeText} gives it back exactly. */
export function encodeText(text: string): string {
  return text.includes('\u0000') || text.startsWith(MARKER) ? MARKER + JSON.stringify(text) : text;
}

/**
 * The text {@link encodeText} stored. A marked text that is not a JSON string (a hand edit, a row
 * another program wrote) is refused with `STORE_ERROR`: `damaged` says which record it was.
 */
export function decodeText(stored: string, damaged: string): string {
  if (!stored.startsWith(MARKER)) return stored;
  let text: unknown;
  try {
    text = JSON.parse(stored.slice(1));
  } catch {
    text = undefined;
  }
  if (typeof text !== 'string') throw new AgentError('STORE_ERROR', damaged);
  return text;
}

/** Runs `body`, turning any failure into a `STORE_ERROR` that names `action`. */
export async function attempt<T>(action: string, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (error) {
    throw storeFailure('postgres', action, error);
  }
}

/** Expired rows are deleted at most this often per store (and at most this many at a time). */
const SWEEP_EVERY_MS = 60_000;
const SWEEP_ROWS = 1_000;

/**
 * Deletes expired rows of `table` now and then, after a write; failures are left for the next time.
 */
export function createSweeper(connection: PostgresConnection, table: string, ttlMs: number): () => void {
  let last = 0;
  return () => {
    const now = Date.now();
    if (now - last < Math.min(SWEEP_EVERY_MS, ttlMs)) return;
    last = now;
    void connection
      .query(`DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE expires_at <= now() LIMIT ${SWEEP_ROWS})`)
      .catch(() => undefined);
  };
}
