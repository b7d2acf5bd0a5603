/**
 * `@org/core/ai-sdk`: agent runs served to the AI SDK's `useChat` in its UI message stream
 * protocol. The types come from the `ai` package (an optional peer dependency, used for types
 * only: nothing of it is loaded at run time).
 */
export {
  createUiMessageStreamHandler,
  UI_MESSAGE_STREAM_PATH,
  type UiMessageStreamHandlerOptions,
} from './ui-message-stream-handler.js';
export { toUiMessageChunks } from './ui-message-chunks.js';
export type {
  AgentUIDataTypes,
  AgentUIMessage,
  AgentUIMessageChunk,
  AgentUITools,
  PresentChoicesArguments,
  RequestUserInputArguments,
} from './agent-ui-message.js';
