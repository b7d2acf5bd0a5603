export {
  AGENT_RUN_PATHS,
  createAgentHandler,
  digestOwner,
  errorResponse,
  runErrorResponse,
  type AgentHandlerOptions,
  type AgentSessionsOptions,
  type AgentRequestContext,
} from './agent-handler.js';
export {
  createGeminiBackendClient,
  type GeminiBackendClientOptions,
  type RetryOptions,
} from './gemini-backend-client.js';
export { withCors, type CorsOptions } from './cors.js';
export { createGoogleAccountOwner, GOOGLE_TOKEN_INFO_URL, type GoogleAccountOwnerOptions } from './google-account-owner.js';
export { createPrefixCache, type PrefixCache, type PrefixCacheOptions } from './prefix-cache.js';
export { createUpstreamBackendClient, type UpstreamBackendClientOptions } from './upstream-backend-client.js';
export {
  createHttpDriveOperationsClient,
  type DriveBaseUrls,
  type HttpDriveOperationsClientOptions,
} from './http-drive-operations-client.js';
export { readDriveBaseUrls } from './drive-base-urls.js';
export { createOpenAiResponsesBackendClient } from './providers/openai-responses-backend-client.js';
export type { OpenAiResponsesBackendClientOptions } from './providers/openai-responses-backend-client.js';
export { createAnthropicBackendClient } from './providers/anthropic-backend-client.js';
export type { AnthropicBackendClientOptions } from './providers/anthropic-backend-client.js';
export { createOpenAiCompatibleBackendClient } from './providers/openai-compatible-backend-client.js';
export type { OpenAiCompatibleBackendClientOptions } from './providers/openai-compatible-backend-client.js';
export type { ProviderClientOptions } from './providers/provider-transport.js';
export type { ProviderStreamLimits } from './providers/provider-transport.js';
export { PROVIDER_DATA_FIELD } from './providers/provider-data.js';
export type { ProviderPartData } from './providers/provider-data.js';
export { SERVER_TOOL_PROGRESS_FIELD } from './providers/gemini-chunks.js';
export type { ServerToolProgress } from './providers/gemini-chunks.js';
export { createSessionsEndpoint, SESSIONS_PATH, type SessionsEndpointOptions } from './sessions-endpoint.js';
export {
  createSessionService,
  type SessionContext,
  type SessionEvent,
  type SessionService,
  type SessionServiceOptions,
} from '../sessions/session-service.js';
