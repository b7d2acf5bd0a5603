import { randomUUID } from 'node:crypto';
import { AgentError, checkRecordId, type InteractionStore } from '@org/core';
import { checkTtl } from '../store-failure.js';
import {
  attempt,
  createSweeper,
  decodeText,
  encodeText,
  openPostgresConnection,
  type PostgresConnection,
  type PostgresConnectionOptions,
} from './postgres-connection.js';

/** Options of {@link createPostgresInteractionStore}. */
export interface PostgresInteractionStoreOptions extends PostgresConnectionOptions {
  /** Records not written for this long read as absent and are deleted. Default 7 days. */
  ttlMs?: number;
  /** The largest state kept, in UTF-8 bytes. Default: the runtime's limit (64 MiB). */
  maxStateBytes?: number;
}

/** An `InteractionStore` in PostgreSQL, with `close()` for the pool it opened itself. */
export interface PostgresInteractionStore extends InteractionStore {
  /** Ends the pool opened from `url`; a pool passed in stays open. */
  close(): Promise<void>;
}

/** The store on a connection that may be shared with a session log and a bus. */
export function postgresInteractionStoreOn(
  connection: PostgresConnection,
  options: Pick<PostgresInteractionStoreOptions, 'ttlMs' | 'maxStateBytes'>,
  close: () => Promise<void>,
): PostgresInteractionStore {
  const ttlMs = checkTtl(options.ttlMs, 'createPostgresInteractionStore');
  const table = connection.tables.interactions;
  const expiresAt = `now() + interval '${ttlMs} milliseconds'`;
  const sweep = createSweeper(connection, table, ttlMs);
  const sql = {
    get: `SELECT meta, state, version FROM ${table} WHERE id = $1 AND expires_at > now()`,
    // An expired row still in the table is replaced as if it were absent.
    create: `INSERT INTO ${table} AS current (id, meta, state, version, expires_at) VALUES ($1, $2, $3, $4, ${expiresAt})
      ON CONFLICT (id) DO UPDATE SET meta = excluded.meta, state = excluded.state, version = excluded.version, expires_at = excluded.expires_at
      WHERE current.expires_at <= now() RETURNING version`,
    // Concurrent updates of one row queue on its lock and re-check the version, so one wins.
    update: `UPDATE ${table} SET meta = $2, state = $3, version = $4, expires_at = ${expiresAt}
      WHERE id = $1 AND version = $5 AND expires_at > now() RETURNING version`,
    updateMeta: `UPDATE ${table} SET meta = $2, version = $3, expires_at = ${expiresAt}
      WHERE id = $1 AND version = $4 AND expires_at > now() RETURNING version`,
    delete: `DELETE FROM ${table} WHERE id = $1 AND expires_at > now()`,
    deleteIf: `DELETE FROM ${table} WHERE id = $1 AND expires_at > now() AND version = $2`,
  };
  return {
    ...(options.maxStateBytes === undefined ? {} : { maxStateBytes: options.maxStateBytes }),
    async get(id) {
      checkRecordId('Interaction', id);
      const { rows } = await attempt(`read interaction ${id}`, () => connection.query(sql.get, [id]));
      const row = rows[0];
      if (!row) return undefined;
      const damaged = `Interaction ${id} has a damaged record`;
      return { meta: decodeText(row.meta as string, damaged), state: decodeText(row.state as string, damaged), version: row.version as string };
    },
    async set(id, write, expected) {
      checkRecordId('Interaction', id);
      if (expected === null && write.state === undefined) throw new AgentError('STORE_ERROR', `Interaction ${id}: a new record needs a state`);
      const version = randomUUID();
      const meta = encodeText(write.meta);
      const { rows } = await attempt(`save interaction ${id}`, () => {
        if (expected === null) return connection.query(sql.create, [id, meta, encodeText(write.state as string), version]);
        if (write.state === undefined) return connection.query(sql.updateMeta, [id, meta, version, expected]);
        return connection.query(sql.update, [id, meta, encodeText(write.state), version, expected]);
      });
      sweep();
      return rows.length > 0 ? version : undefined;
    },
    async delete(id, expected) {
      checkRecordId('Interaction', id);
      const result = await attempt(`delete interaction ${id}`, () =>
        expected === undefined ? connection.query(sql.delete, [id]) : connection.query(sql.deleteIf, [id, expected]),
      );
      return (result.rowCount ?? 0) > 0;
    },
    close,
  };
}

/**
 * An `InteractionStore` in PostgreSQL that every instance of a deployment shares: one row per
 * record in `<prefix>interactions` (`meta`, `state`, `version`, `expires_at`). A create is an
 * `INSERT … ON CONFLICT` and every other write an `UPDATE … WHERE version = $expected`, so of
 * several writers with the same expected version exactly one wins. Rows past `expires_at` read as
 * absent and are deleted in batches after writes (at most once a minute per store).
 *
 * Pass `url` to let the store open its own `pg` pool, or `pool` to share yours. The tables are
 * created on first use unless `migrate: false`.
 *
 * @example
 * ```ts
 * import { createPostgresInteractionStore } from '@org/adapter-node/postgres';
 * const store = createPostgresInteractionStore({ url: process.env.DATABASE_URL! });
 * ```
 */
export function createPostgresInteractionStore(options: PostgresInteractionStoreOptions): PostgresInteractionStore {
  const connection = openPostgresConnection(options, 'createPostgresInteractionStore');
  return postgresInteractionStoreOn(connection, options, () => connection.close());
}
