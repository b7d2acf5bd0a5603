import { openPostgresConnection, tablesFor, type PostgresConnectionOptions, type PostgresPoolLike } from './postgres-connection.js';
import { storeFailure } from '../store-failure.js';

/** Options of {@link postgresSchema}. */
export interface PostgresSchemaOptions {
  /** The prefix of the table names, as given to the stores. Default `agent_`. */
  prefix?: string;
}

// Any constant works; it only has to be the same in every instance. ("agent" in ASCII.)
const SCHEMA_LOCK = 418_430_103_156;

/**
 * The SQL that creates the tables of the PostgreSQL store, session log and bus (idempotent:
 * `CREATE … IF NOT EXISTS`), for a migration tool of yours when `migrate: false`.
 *
 * @example
 * ```ts
 * import { postgresSchema } from '@org/adapter-node/postgres';
 * await myPool.query(postgresSchema({ prefix: 'agent_' }));
 * ```
 */
export function postgresSchema(options: PostgresSchemaOptions = {}): string {
  const prefix = options.prefix ?? 'agent_';
  const { interactions, sessions, events } = tablesFor(prefix, 'postgresSchema');
  return `CREATE TABLE IF NOT EXISTS ${interactions} (
  id text PRIMARY KEY,
  meta text NOT NULL,
  state text NOT NULL,
  version text NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS "${prefix}interactions_expires_at" ON ${interactions} (expires_at);
CREATE TABLE IF NOT EXISTS ${sessions} (
  id text PRIMARY KEY,
  status text NOT NULL,
  event_count integer NOT NULL DEFAULT 0,
  interaction_id text,
  owner text,
  expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS "${prefix}sessions_expires_at" ON ${sessions} (expires_at);
CREATE TABLE IF NOT EXISTS ${events} (
  session_id text NOT NULL REFERENCES ${sessions} (id) ON DELETE CASCADE,
  event_index integer NOT NULL,
  event text NOT NULL,
  PRIMARY KEY (session_id, event_index)
);
DO $$
BEGIN
  -- LZ4 compresses large states and events several times faster than the default (PostgreSQL 14+).
  IF EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
    IF (SELECT attcompression FROM pg_attribute WHERE attrelid = '${interactions}'::regclass AND attname = 'state') <> 'l' THEN
      ALTER TABLE ${interactions} ALTER COLUMN state SET COMPRESSION lz4;
    END IF;
    IF (SELECT attcompression FROM pg_attribute WHERE attrelid = '${events}'::regclass AND attname = 'event') <> 'l' THEN
      ALTER TABLE ${events} ALTER COLUMN event SET COMPRESSION lz4;
    END IF;
  END IF;
END
$$;
`;
}

/** Creates the tables on `pool` in one transaction that holds an advisory lock, so instances starting together do not collide. */
export async function migrateOn(pool: PostgresPoolLike, prefix: string): Promise<void> {
  const { interactions, sessions, events } = tablesFor(prefix, 'migratePostgres');
  // Tables already there: nothing to lock (CREATE … IF NOT EXISTS would still take locks).
  const present = await pool
    .query(`SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL AND to_regclass($3) IS NOT NULL AS ready`, [interactions, sessions, events])
    .catch((error: unknown) => {
      throw storeFailure('postgres', 'check the tables', error);
    });
  if (present.rows[0]?.ready === true) return;
  const client = await pool.connect().catch((error: unknown) => {
    throw storeFailure('postgres', 'create the tables', error);
  });
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    await client.query(`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK})`);
    await client.query(postgresSchema({ prefix }));
    await client.query('COMMIT');
  } catch (error) {
    broken = error as Error;
    throw storeFailure('postgres', 'create the tables', error);
  } finally {
    // A connection left in a failed transaction is not given back to the pool.
    client.release(broken ?? undefined);
  }
}

/** Options of {@link migratePostgres}. */
export type MigratePostgresOptions = Omit<PostgresConnectionOptions, 'migrate'>;

/**
 * Creates the tables of the PostgreSQL store, session log and bus if they are missing. The
 * factories do this by themselves before their first query unless `migrate: false`; call it
 * from a deploy step instead when you prefer.
 *
 * @example
 * ```ts
 * import { migratePostgres } from '@org/adapter-node/postgres';
 * await migratePostgres({ url: process.env.DATABASE_URL! });
 * ```
 */
export async function migratePostgres(options: MigratePostgresOptions): Promise<void> {
  const connection = openPostgresConnection({ ...options, migrate: false }, 'migratePostgres');
  try {
    await migrateOn(await connection.pool(), connection.prefix);
  } finally {
    await connection.close();
  }
}
