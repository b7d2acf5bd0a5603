export { conformBody, blobIdOf } from './conform-body.js';
export { classifyError, toErrorOrResponse, type ErrorKind } from './error-classification.js';
export {
  executeMediaStep,
  partToChunk,
  textChunk,
  toBase64Text,
  fromBase64Text,
  type MediaStep,
  type MediaStepResult,
  type StepChunk,
} from './step-executor.js';
export { createGenerateGroup, CODE_MODEL, TEXT_MODELS, WEBPAGE_CONSENT } from './generate-group.js';
export { createAudioGroup, createImageGroup, createVideoGroup, expandVeoError, IMAGE_MODELS, VIDEO_MODEL } from './media-groups.js';
