import { openPostgresConnection, type PostgresConnectionOptions } from './postgres-connection.js';
import { postgresEventBusOn, type PostgresEventBus } from './postgres-event-bus.js';
import { postgresInteractionStoreOn, type PostgresInteractionStore } from './postgres-interaction-store.js';
import { postgresSessionLogOn, type PostgresSessionLog } from './postgres-session-log.js';

/** Options of {@link createPostgresBackends}. */
export interface PostgresBackendsOptions extends PostgresConnectionOptions {
  /** Interactions and sessions not written for this long are gone. Default 7 days. */
  ttlMs?: number;
  /** The largest interaction state kept, in UTF-8 bytes. Default: the runtime's limit (64 MiB). */
  maxStateBytes?: number;
}

/** The interaction store, session log and event bus of one deployment, on one PostgreSQL pool. */
export interface PostgresBackends {
  store: PostgresInteractionStore;
  log: PostgresSessionLog;
  bus: PostgresEventBus;
  /** Closes the bus's listening connection and ends the pool opened from `url`. */
  close(): Promise<void>;
}

/**
 * The store, the session log and the bus a deployment needs, sharing one `pg` pool (the bus keeps
 * one of its connections for LISTEN). Their own `close()` methods close nothing shared; close the
 * bundle.
 *
 * @example
 * ```ts
 * import { createPostgresBackends } from '@org/adapter-node/postgres';
 * const { store, log, bus, close } = createPostgresBackends({ url: process.env.DATABASE_URL! });
 * ```
 */
export function createPostgresBackends(options: PostgresBackendsOptions): PostgresBackends {
  const connection = openPostgresConnection(options, 'createPostgresBackends');
  const shared = async () => undefined;
  const store = postgresInteractionStoreOn(connection, options, shared);
  const log = postgresSessionLogOn(connection, options, shared);
  const bus = postgresEventBusOn(connection, shared);
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
