export * from './errors/index.js';
export type * from './ports/index.js';
export * from './protocol/content.js';
export type * from './protocol/gemini.js';
export * from './sse/index.js';
export * from './agent-fs/index.js';
