export * from './content.js';
export type * from './gemini.js';
export * from './events.js';
export * from './requests.js';
export * from './wire.js';
export type * from './resume-responses.js';
