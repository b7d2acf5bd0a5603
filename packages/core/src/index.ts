/**
 * `@org/core`: the runtime-agnostic agent loop. Everything a user writes code against is listed
 * here by name; `docs/api.md` describes each export, and a test keeps the two in step.
 */

// Runs
export {
  DEFAULT_MAX_TURNS,
  DEFAULT_MODEL,
  resume,
  run,
  type RunErrorEvent,
  type RunEvent,
  type RunOptions,
  type RunSuspendEvent,
} from './run/index.js';
export type { LoopMode } from './loop/agent-loop.js';

// Functions
export {
  createAudioGroup,
  createChatGroup,
  createGenerateGroup,
  createGoogleDriveGroup,
  createImageGroup,
  createMemoryGroup,
  createSystemGroup,
  createVideoGroup,
  defineFunction,
  isSuspend,
  Suspend,
  toFunctionDeclaration,
  type FunctionContext,
  type FunctionDefinition,
  type FunctionGroup,
  type SuspendEventInput,
} from './functions/index.js';
export type { AgentFileSystem, FileDescriptor, MountedDirectory, TaskNode, TaskTreeManager } from './agent-fs/index.js';

// Memory
export { createSheetManager, type MemoryGraph, type MemorySheet, type SheetManager, type SheetManagerOptions } from './memory/index.js';

// Ports
export { checkRecordId, DEFAULT_INTERACTION_TTL_MS, MAX_RECORD_ID_LENGTH } from './interactions/index.js';
export { SESSION_STATUSES, TERMINAL_SESSION_STATUSES } from './ports/index.js';
export type {
  AgentPorts,
  BackendClient,
  DriveFile,
  DriveOperationsClient,
  DriveUploadMedia,
  EventBus,
  EventSubscription,
  ExecuteStepRequest,
  ExecuteStepResponse,
  InteractionRecord,
  InteractionRecordWrite,
  InteractionStore,
  SessionInfo,
  SessionLog,
  SessionStatus,
  SheetProperties,
  SheetValues,
  SpreadsheetMetadata,
  UploadGeminiFileRequest,
  UploadGeminiFileResponse,
} from './ports/index.js';

// Protocol
export {
  AGENT_EVENT_TYPES,
  AgentResultSchema,
  DEFAULT_MAX_JSON_DEPTH,
  DEFAULT_MAX_SEGMENTS,
  FileDataSchema,
  fromWireEvent,
  isSuspendEvent,
  LLMContentSchema,
  parseAgentRequestBody,
  parseAgentRequestText,
  PartSchema,
  SUSPEND_EVENT_TYPES,
  toWireEvent,
  toWireEventJson,
  type AgentEvent,
  type AgentEventOf,
  type AgentEventType,
  type AgentRequestBody,
  type AgentRequestLimits,
  type AgentResult,
  type FileData,
  type JsonObject,
  type LLMContent,
  type Part,
  type ResumeRequest,
  type ResumeResponse,
  type ResumeResponseOf,
  type ResumeResponses,
  type Segment,
  type StartRequest,
  type SuspendEvent,
  type SuspendEventType,
  type WireEvent,
} from './protocol/index.js';
export type {
  Candidate,
  FunctionDeclaration,
  GenerateContentRequest,
  GenerateContentResponse,
  Tool,
  UsageMetadata,
} from './protocol/gemini.js';

// Server-sent events
export {
  createSseEventStream,
  createSseParser,
  encodeSseComment,
  encodeSseEvent,
  parseSseStream,
  type SseEvent,
  type SseEventOptions,
  type SseEventStreamOptions,
  type SseParser,
  type SseParserOptions,
} from './sse/index.js';

// Errors
export {
  AgentError,
  ERROR_CODES,
  HTTP_STATUS_BY_CODE,
  isAgentError,
  toAgentError,
  type AgentErrorOptions,
  type ErrorBody,
  type ErrorCode,
} from './errors/index.js';
