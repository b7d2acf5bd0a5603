export { createHandler, type NodeDriveOptions, type NodeHandlerOptions } from './create-handler.js';
export { createNodeListener, serve, type NodeListenerOptions, type RunningServer, type ServeOptions, type WebHandler } from './node-listener.js';
export { createFileInteractionStore, type FileInteractionStoreOptions } from './file-interaction-store.js';
export { createNodeFetch, type NodeFetch, type NodeFetchOptions } from './node-fetch.js';
export { createFileSessionLog, type FileSessionLogOptions } from './file-session-log.js';
export { createFileEventBus, type FileEventBus, type FileEventBusOptions } from './file-event-bus.js';
