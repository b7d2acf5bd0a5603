export {
  createIndexedDbInteractionStore,
  type IndexedDbInteractionStoreOptions,
} from './indexed-db-interaction-store.js';
export {
  createBrowserAgentClient,
  createLocalAgentClient,
  createLocalAgentRun,
  type BrowserAgentClientOptions,
  type LocalAgentOptions,
} from './local-agent.js';
export {
  AgentClientError,
  createAgentClient,
  dispatchAgentEvents,
  type AgentClient,
  type AgentClientOptions,
  type AgentEventHandlers,
  type AgentRun,
  type AgentRunOptions,
  type RunInput,
  type SuspendHandler,
} from '@org/core/client';
