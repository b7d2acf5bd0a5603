/**
 * Functions the model can call: `defineFunction`, `Suspend`, and the built-in groups (system,
 * generate, image, video, audio, chat, memory, google-drive) with the media step and error classification they share.
 */
export { createChatGroup, SKIPPED_INPUT } from './chat-group.js';
export { composeFunctionGroups, defaultFunctionGroups, type OptionalGroups } from './default-groups.js';
export {
  defineFunction,
  toFunctionDeclaration,
  type FunctionContext,
  type FunctionDefinition,
  type FunctionGroup,
} from './define-function.js';
export { classifyError, toErrorOrResponse, type ErrorKind } from './error-classification.js';
export { CODE_MODEL, createGenerateGroup, TEXT_MODELS, WEBPAGE_CONSENT } from './generate-group.js';
export { createAudioGroup, createImageGroup, createVideoGroup, expandVeoError, IMAGE_MODELS, VIDEO_MODEL } from './media-groups.js';
export { executeMediaStep, partToChunk, textStepChunk, type MediaStep, type MediaStepResult, type StepChunk } from './media-step.js';
export { isSuspend, Suspend, type SuspendEventInput } from './suspend.js';
export { createGoogleDriveGroup } from './google-drive-group.js';
export { createMemoryGroup } from './memory-group.js';
export { createSystemGroup } from './system-group.js';
