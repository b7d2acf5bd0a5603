export {
  AGENT_RUN_PATHS,
  createAgentHandler,
  errorResponse,
  type AgentHandlerOptions,
  type AgentRequestContext,
} from './agent-handler.js';
export {
  createGeminiBackendClient,
  type GeminiBackendClientOptions,
  type RetryOptions,
} from './gemini-backend-client.js';
export { withCors, type CorsOptions } from './cors.js';
export { createUpstreamBackendClient, type UpstreamBackendClientOptions } from './upstream-backend-client.js';
