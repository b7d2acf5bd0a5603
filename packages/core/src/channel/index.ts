export { done, EventChannel, nextTurn, queuedReader, READ_QUEUED, type QueuedItems } from './event-channel.js';
