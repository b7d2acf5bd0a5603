export { createHandler, type NodeDriveOptions, type NodeHandlerOptions } from './create-handler.js';
export { createNodeListener, serve, type RunningServer, type ServeOptions, type WebHandler } from './node-listener.js';
export { createFileInteractionStore, type FileInteractionStoreOptions } from './file-interaction-store.js';
export { createNodeFetch, type NodeFetch, type NodeFetchOptions } from './node-fetch.js';
