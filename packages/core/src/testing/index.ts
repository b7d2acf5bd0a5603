export { createMemoryInteractionStore, type MemoryInteractionStoreOptions } from './memory-interaction-store.js';
export {
  describeInteractionStoreConformance,
  interactionStoreConformanceCases,
  runInteractionStoreConformance,
  type ConformanceAssert,
  type ConformanceCase,
  type ConformanceOptions,
  type ConformanceStoreFactory,
  type ConformanceStoreOptions,
  type ConformanceTestApi,
} from './interaction-store-conformance.js';
export {
  codeExecutionResultChunk,
  codeExecutionTurn,
  createScriptedBackendClient,
  executableCodeChunk,
  functionCallChunk,
  textChunk,
  thoughtChunk,
  usageChunk,
  type ScriptedBackendClient,
  type ScriptedBackendOptions,
  type ScriptedRequest,
  type ScriptedTurn,
} from './scripted-backend-client.js';
export { createScriptedGemini, type ScriptedGemini } from './scripted-gemini.js';
export { createSimulatedGemini, type SimulatedGemini, type SimulatedGeminiOptions } from './simulated-gemini.js';
export { SIMULATED_IMAGE_PNG, simulatedExecuteStep, toneWav } from './simulated-media.js';
export {
  createFakeGoogleDrive,
  type FakeGoogleDrive,
  type FakeGoogleDriveBaseUrls,
  type FakeGoogleDriveFailure,
  type FakeGoogleDriveFileSeed,
  type FakeGoogleDriveOptions,
  type FakeGoogleDriveRequest,
} from './fake-google-drive.js';
export { createMemoryEventBus, createMemorySessionLog, type MemorySessionLogOptions } from '../sessions/memory-session-log.js';
export {
  describeEventBusConformance,
  describeSessionLogConformance,
  eventBusConformanceCases,
  sessionLogConformanceCases,
  type SessionConformanceCase,
  type SessionConformanceOptions,
  type SessionLogConformanceOptions,
} from './session-conformance.js';
