export { EventChannel } from './event-channel.js';
