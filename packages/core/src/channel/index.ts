export { done, EventChannel } from './event-channel.js';
