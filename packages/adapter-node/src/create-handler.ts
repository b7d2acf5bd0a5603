import type { IncomingMessage, ServerResponse } from 'node:http';
import { createAgentHandler, type AgentHandlerOptions } from '@org/core/http';
import { createNodeListener } from './node-listener.js';

/**
 * The agent protocol as a `node:http` listener.
 *
 * @example
 * ```ts
 * http.createServer(createHandler({ createPorts: ({ accessToken }) => ports })).listen(8080);
 * ```
 */
export function createHandler(options: AgentHandlerOptions): (request: IncomingMessage, response: ServerResponse) => void {
  return createNodeListener(createAgentHandler(options));
}
