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
export { createUpstreamBackendClient, type UpstreamBackendClientOptions } from './upstream-backend-client.js';
export {
  createHttpDriveOperationsClient,
  type DriveBaseUrls,
  type HttpDriveOperationsClientOptions,
} from './http-drive-operations-client.js';
