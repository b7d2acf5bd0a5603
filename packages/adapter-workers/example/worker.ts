import { createHandler, InteractionStoreObject, SessionObject, type AgentWorkerEnv } from '@org/adapter-workers';

// Durable Object classes must be exported from the entry module for their bindings to find them.
export { InteractionStoreObject, SessionObject };

export default createHandler<AgentWorkerEnv>();
