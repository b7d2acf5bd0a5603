export { createPostgresBackends, type PostgresBackends, type PostgresBackendsOptions } from './postgres/postgres-backends.js';
export {
  type PostgresConnectionOptions,
  type PostgresNotification,
  type PostgresPoolClientLike,
  type PostgresPoolLike,
  type PostgresQueryResult,
} from './postgres/postgres-connection.js';
export { createPostgresEventBus, type PostgresEventBus, type PostgresEventBusOptions } from './postgres/postgres-event-bus.js';
export {
  createPostgresInteractionStore,
  type PostgresInteractionStore,
  type PostgresInteractionStoreOptions,
} from './postgres/postgres-interaction-store.js';
export { migratePostgres, postgresSchema, type MigratePostgresOptions, type PostgresSchemaOptions } from './postgres/postgres-schema.js';
export { createPostgresSessionLog, type PostgresSessionLog, type PostgresSessionLogOptions } from './postgres/postgres-session-log.js';
