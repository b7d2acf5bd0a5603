export * from './errors/index.js';
export type * from './ports/index.js';
export * from './protocol/index.js';
export * from './sse/index.js';
export * from './agent-fs/index.js';
export * from './model/index.js';
