export { encodeSseComment, encodeSseEvent, type SseEventOptions } from './sse-encoder.js';
export { createSseEventStream, type SseEventStreamOptions } from './sse-event-stream.js';
export { createSseParser, parseSseStream, type SseEvent, type SseParser, type SseParserOptions } from './sse-parser.js';
