import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AgentPorts } from '@org/core';
import { createUiMessageStreamHandler, UI_MESSAGE_STREAM_PATH } from '@org/core/ai-sdk';
import { createAgentHandler, createHttpDriveOperationsClient, type AgentHandlerOptions, type AgentRequestContext, type DriveBaseUrls } from '@org/core/http';
import { createNodeListener } from './node-listener.js';

/** How {@link createHandler} gives runs a Google Drive client. */
export interface NodeDriveOptions {
  /** Where the Drive and Sheets APIs live (a gateway, a local fake). Default: Google's. */
  baseUrls?: DriveBaseUrls;
  /** The `fetch` the client uses. Default: Node's global `fetch`. */
  fetch?: typeof fetch;
}

/** Options of {@link createHandler}: the agent handler's, and how runs reach Google Drive. */
export interface NodeHandlerOptions extends AgentHandlerOptions {
  /**
   * Google Drive for memory, the chat log and the google-drive functions: a client bound to the
   * caller's token is added to every request that has a token, unless `createPorts` returns a
   * `drive` of its own. `false`: never.
   */
  drive?: NodeDriveOptions | false;
  /**
   * Also serve the AI SDK's `useChat` endpoint (`@org/core/ai-sdk`) with the same ports, run
   * options, owners and sessions: `true` at `/api/chat`, or `{ path }`.
   */
  uiMessageStream?: boolean | { path?: string };
}

/**
 * The agent protocol as a `node:http` listener. A request that carries the user's token (the
 * body's `accessToken` or `Authorization: Bearer`) gets a Google Drive client bound to it, so a
 * run can use memory.
 *
 * @example
 * ```ts
 * http.createServer(createHandler({ createPorts: ({ accessToken }) => ports })).listen(8080);
 * ```
 */
export function createHandler(options: NodeHandlerOptions): (request: IncomingMessage, response: ServerResponse) => void {
  const { drive, uiMessageStream, ...handlerOptions } = options;
  const driveFetch: typeof fetch = (drive && drive.fetch) || ((input, init) => globalThis.fetch(input, init));
  const createPorts = async (context: AgentRequestContext): Promise<AgentPorts> => {
    const ports = await options.createPorts(context);
    const token = context.accessToken;
    if (drive === false || ports.drive || !token) return ports;
    return {
      ...ports,
      drive: createHttpDriveOperationsClient({ fetch: driveFetch, getAccessToken: () => token, ...(drive?.baseUrls ? { baseUrls: drive.baseUrls } : {}) }),
    };
  };
  const agentOptions: AgentHandlerOptions = { ...handlerOptions, createPorts };
  const agent = createAgentHandler(agentOptions);
  if (!uiMessageStream) return createNodeListener(agent);
  // --- The AI SDK chat endpoint, mounted next to the agent protocol. ---
  // Given a shared session log, a chat's runs are sessions like any other (and span instances).
  const { sessions } = agentOptions;
  const path = (typeof uiMessageStream === 'object' ? uiMessageStream.path : undefined) ?? UI_MESSAGE_STREAM_PATH;
  const chat = createUiMessageStreamHandler({
    createPorts,
    path,
    ...(sessions ? { sessions } : {}),
    ...(agentOptions.runOptions ? { runOptions: agentOptions.runOptions } : {}),
    ...(agentOptions.resolveOwner ? { resolveOwner: agentOptions.resolveOwner } : {}),
    ...(agentOptions.cors ? { cors: agentOptions.cors } : {}),
    ...(agentOptions.maxBodyBytes === undefined ? {} : { maxBodyBytes: agentOptions.maxBodyBytes }),
    ...(agentOptions.maxBodyBytesInFlight === undefined ? {} : { maxBodyBytesInFlight: agentOptions.maxBodyBytesInFlight }),
    ...(agentOptions.maxRunning === undefined ? {} : { maxRunning: agentOptions.maxRunning }),
    ...(agentOptions.maxJsonDepth === undefined ? {} : { maxJsonDepth: agentOptions.maxJsonDepth }),
    ...(agentOptions.keepAliveMs === undefined ? {} : { keepAliveMs: agentOptions.keepAliveMs }),
  });
  return createNodeListener((request) => {
    const { pathname } = new URL(request.url);
    return pathname === path || pathname.startsWith(`${path}/`) ? chat(request) : agent(request);
  });
}
