export {
  createHandler,
  type AgentWorkerEnv,
  type WorkerHandlerOptions,
  type WorkerRequestContext,
} from './create-handler.js';
export {
  createDurableObjectInteractionStore,
  DURABLE_OBJECT_CHUNK_BYTES,
  InteractionStoreObject,
  type DurableObjectInteractionStoreOptions,
} from './durable-object-interaction-store.js';
export { createDurableObjectEventBus } from './durable-object-event-bus.js';
export { createDurableObjectSessionLog, type DurableObjectSessionLogOptions } from './durable-object-session-log.js';
export { createKvInteractionStore, KV_MAX_VALUE_BYTES, type KvInteractionStoreOptions } from './kv-interaction-store.js';
export { createSessionObject, SessionObject, type SessionObjectOptions } from './session-object.js';
export { DEFAULT_MAX_VALUE_BYTES } from './stored-value.js';
