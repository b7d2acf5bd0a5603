export {
  defineFunction,
  toFunctionDeclaration,
  type FunctionContext,
  type FunctionDefinition,
  type FunctionGroup,
} from './define-function.js';
export { isSuspend, Suspend, type SuspendEventInput } from './suspend.js';
export { createSystemGroup } from './system-group.js';
export { createChatGroup, SKIPPED_INPUT } from './chat-group.js';
