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
export { createKvInteractionStore, KV_MAX_VALUE_BYTES, type KvInteractionStoreOptions } from './kv-interaction-store.js';
export { DEFAULT_MAX_VALUE_BYTES } from './stored-value.js';
