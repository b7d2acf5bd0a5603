export type {
  BackendClient,
  ExecuteStepRequest,
  ExecuteStepResponse,
  UploadGeminiFileRequest,
  UploadGeminiFileResponse,
} from './backend-client.js';
export type { InteractionRecord, InteractionRecordWrite, InteractionStore } from './interaction-store.js';
export type {
  DriveFile,
  DriveOperationsClient,
  DriveUploadMedia,
  SheetProperties,
  SheetValues,
  SpreadsheetMetadata,
} from './drive-operations-client.js';

export { SESSION_STATUSES, TERMINAL_SESSION_STATUSES } from './session-log.js';
export type { EventBus, EventSubscription, SessionInfo, SessionLog, SessionStatus } from './session-log.js';

import type { BackendClient } from './backend-client.js';
import type { DriveOperationsClient } from './drive-operations-client.js';
import type { InteractionStore } from './interaction-store.js';

/** The three injected ports a run needs. `drive` is optional: memory features turn off without it. */
export interface AgentPorts {
  backend: BackendClient;
  store: InteractionStore;
  drive?: DriveOperationsClient;
}
