import { createHandler, InteractionStoreObject, type AgentWorkerEnv } from '@org/adapter-workers';

// The Durable Object class must be exported from the entry module for the binding to find it.
export { InteractionStoreObject };

export default createHandler<AgentWorkerEnv>();
