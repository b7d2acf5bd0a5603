export { AgentClientError, type AgentClientErrorKind, type AgentClientErrorOptions } from './errors.js';
export {
  createAgentRun,
  type AgentRun,
  type AgentRunOptions,
  type RunSegmentOpener,
  type RunSegmentRequest,
  type SuspendHandler,
} from './agent-run.js';
export {
  createAgentClient,
  toStartRequest,
  type AgentClient,
  type AgentClientOptions,
  type AttachRunOptions,
  type RemoteAgentClient,
  type RunInput,
} from './agent-client.js';
export type { ReconnectOptions } from './session-transport.js';
export type { ClientLimits } from './server-connection.js';
export { dispatchAgentEvents, type AgentEventHandlers } from './dispatch.js';
export type { AgentEvent, AgentEventOf, AgentEventType, AgentResult, FileData, SuspendEvent } from '../protocol/events.js';
export type { JsonObject, LLMContent, Part } from '../protocol/content.js';
export type { Segment, StartRequest } from '../protocol/requests.js';
export type { ResumeResponse, ResumeResponseOf, ResumeResponses } from '../protocol/resume-responses.js';
export type { ErrorCode } from '../errors/agent-error.js';
