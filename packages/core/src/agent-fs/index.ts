/**
 * The agent file system (`/mnt/...` files, routes, system files such as the chat log), the pidgin
 * translation between request segments / model text and content parts, and the task tree.
 */
export { AgentFileSystem, checkFileName, fileSystemSnapshotSchema } from './agent-file-system.js';
export type { FileDescriptor, FileDescriptorType, FileSystemSnapshot, MountedDirectory, SystemFileGetter } from './agent-file-system.js';
export { addChatLogFile, CHAT_LOG_PATH, deriveChatLog, type ChatLogEntry } from './chat-log.js';
export {
  DEFAULT_EXTENSION,
  DEFAULT_MIME_TYPE,
  extensionFromMimeType,
  fileNamePrefixFromMimeType,
  mimeTypeFromFileName,
} from './mime-types.js';
export { contentToPidginString, fromPidginString, mergeTextParts, toPidgin } from './pidgin.js';
export type {
  ContentToPidginOptions,
  CustomToolUrl,
  PidginObjective,
  PidginSegment,
  ToPidginOptions,
} from './pidgin.js';
export { checkTaskTree, TASK_TREE_PATH, taskNodeSchema, TaskTreeManager } from './task-tree-manager.js';
export type { TaskNode, TaskTreeProblem, TaskTreeSnapshot } from './task-tree-manager.js';
