import { AgentError, checkRecordId } from '@org/core';
import type { SessionInfo, SessionLog, SessionStatus } from '@org/core';
import { checkStoredSession, checkTtl } from '../store-failure.js';
import {
  attempt,
  createSweeper,
  decodeText,
  encodeText,
  openPostgresConnection,
  type PostgresConnection,
  type PostgresConnectionOptions,
} from './postgres-connection.js';

/** Options of {@link createPostgresSessionLog}. */
export interface PostgresSessionLogOptions extends PostgresConnectionOptions {
  /** Sessions not written for this long read as absent and are deleted with their events. Default 7 days. */
  ttlMs?: number;
}

/** A `SessionLog` in PostgreSQL, with `close()` for the pool it opened itself. */
export interface PostgresSessionLog extends SessionLog {
  /** Ends the pool opened from `url`; a pool passed in stays open. */
  close(): Promise<void>;
}

/** The log on a connection that may be shared with a store and a bus. */
export function postgresSessionLogOn(
  connection: PostgresConnection,
  options: Pick<PostgresSessionLogOptions, 'ttlMs'>,
  close: () => Promise<void>,
): PostgresSessionLog {
  const ttlMs = checkTtl(options.ttlMs, 'createPostgresSessionLog');
  const { sessions, events } = connection.tables;
  const expiresAt = `now() + interval '${ttlMs} milliseconds'`;
  const sweep = createSweeper(connection, sessions, ttlMs);
  const sql = {
    // A session that expired but is still in the table goes first, with its events (cascade).
    dropExpired: `DELETE FROM ${sessions} WHERE id = $1 AND expires_at <= now()`,
    create: `INSERT INTO ${sessions} (id, status, event_count, interaction_id, owner, expires_at)
      VALUES ($1, 'running', 0, $2, $3, ${expiresAt}) ON CONFLICT (id) DO NOTHING`,
    get: `SELECT status, event_count, interaction_id, owner FROM ${sessions} WHERE id = $1 AND expires_at > now()`,
    // One statement, so one transaction: the UPDATE locks the session row until the events are in,
    // so a concurrent append waits and then numbers its events after these.
    append: `WITH session AS (
        UPDATE ${sessions} SET event_count = event_count + cardinality($2::text[]), expires_at = ${expiresAt}
        WHERE id = $1 AND expires_at > now()
        RETURNING event_count - cardinality($2::text[]) AS first
      ), inserted AS (
        INSERT INTO ${events} (session_id, event_index, event)
        SELECT $1, session.first + item.position - 1, item.event
        FROM session, unnest($2::text[]) WITH ORDINALITY AS item(event, position)
      )
      SELECT first FROM session`,
    read: `SELECT e.event_index, e.event FROM ${events} e JOIN ${sessions} s ON s.id = e.session_id
      WHERE e.session_id = $1 AND s.expires_at > now() AND e.event_index > $2
      ORDER BY e.event_index LIMIT $3`,
    update: `UPDATE ${sessions} SET status = $2,
        interaction_id = CASE WHEN $3::boolean THEN $4::text ELSE interaction_id END,
        expires_at = ${expiresAt}
      WHERE id = $1 AND expires_at > now() AND ($5::text[] IS NULL OR status = ANY($5::text[]))`,
  };
  return {
    async create(id, info) {
      checkRecordId('Session', id);
      const result = await attempt(`create session ${id}`, async () => {
        await connection.query(sql.dropExpired, [id]);
        return connection.query(sql.create, [id, encodeText(info.interactionId), info.owner === undefined ? null : encodeText(info.owner)]);
      });
      sweep();
      return (result.rowCount ?? 0) > 0;
    },
    async get(id) {
      checkRecordId('Session', id);
      const { rows } = await attempt(`read session ${id}`, () => connection.query(sql.get, [id]));
      const row = rows[0];
      if (!row) return undefined;
      const eventCount = Number(row.event_count);
      checkStoredSession(id, { status: row.status, eventCount });
      const info: SessionInfo = { status: row.status as SessionStatus, eventCount };
      const damaged = `Session ${id} has a damaged record`;
      if (row.interaction_id !== null) info.interactionId = decodeText(row.interaction_id as string, damaged);
      if (row.owner !== null) info.owner = decodeText(row.owner as string, damaged);
      return info;
    },
    async append(id, list) {
      checkRecordId('Session', id);
      const { rows } = await attempt(`append to session ${id}`, () => connection.query(sql.append, [id, list.map(encodeText)]));
      const row = rows[0];
      if (!row) throw new AgentError('NOT_FOUND', `Session ${id} not found`);
      return Number(row.first);
    },
    async read(id, after, limit) {
      checkRecordId('Session', id);
      const count = Math.min(Math.floor(limit), 100_000);
      const from = Math.max(-1, Math.floor(after));
      if (!(count > 0) || !Number.isFinite(from) || from > 2_147_483_646) return [];
      const { rows } = await attempt(`read session ${id}`, () => connection.query(sql.read, [id, from, count]));
      // Indexes are dense by construction. A row deleted by hand would otherwise shift every later
      // event onto the wrong index, and a reader would see one of them twice.
      return rows.map((row, position) => {
        const expected = from + 1 + position;
        const damaged = `Session ${id} has a damaged event log at event ${expected}`;
        if (Number(row.event_index) !== expected) throw new AgentError('STORE_ERROR', damaged);
        return decodeText(row.event as string, damaged);
      });
    },
    async update(id, change, from) {
      checkRecordId('Session', id);
      const setInteraction = change.interactionId !== undefined;
      const interaction = typeof change.interactionId === 'string' ? encodeText(change.interactionId) : null;
      const result = await attempt(`update session ${id}`, () =>
        connection.query(sql.update, [id, change.status, setInteraction, interaction, from ? [...from] : null]),
      );
      return (result.rowCount ?? 0) > 0;
    },
    close,
  };
}

/**
 * A `SessionLog` in PostgreSQL that every instance of a deployment shares: a row per session in
 * `<prefix>sessions` (status, `event_count`, interaction, owner, `expires_at`) and a row per event
 * in `<prefix>session_events`. An append is one statement that raises `event_count` and inserts
 * the events in the same transaction, so indexes are dense and ordered however many instances
 * append at once. Expired sessions read as absent and are deleted with their events after writes.
 *
 * @example
 * ```ts
 * import { createPostgresSessionLog } from '@org/adapter-node/postgres';
 * const log = createPostgresSessionLog({ url: process.env.DATABASE_URL! });
 * ```
 */
export function createPostgresSessionLog(options: PostgresSessionLogOptions): PostgresSessionLog {
  const connection = openPostgresConnection(options, 'createPostgresSessionLog');
  return postgresSessionLogOn(connection, options, () => connection.close());
}
