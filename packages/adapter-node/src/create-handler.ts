import type { IncomingMessage, ServerResponse } from 'node:http';
import { createAgentHandler, type AgentHandlerOptions } from '@org/core/http';
import { createUiMessageStreamHandler, UI_MESSAGE_STREAM_PATH } from '@org/core/ai-sdk';
import { createNodeListener } from './node-listener.js';

/**
 * The agent protocol as a `node:http` listener.
 *
 * @example
 * ```ts
 * http.createServer(createHandler({ createPorts: ({ accessToken }) => ports })).listen(8080);
 * ```
 */
export function createHandler(
  options: AgentHandlerOptions & {
    /**
     * Also serve the AI SDK's `useChat` endpoint (`@org/core/ai-sdk`) with the same ports, run
     * options, owners and sessions: `true` at `/api/chat`, or `{ path }`.
     */
    uiMessageStream?: boolean | { path?: string };
  },
): (request: IncomingMessage, response: ServerResponse) => void {
  const { uiMessageStream, ...agentOptions } = options;
  if (!uiMessageStream) return createNodeListener(createAgentHandler(agentOptions));
  // --- The AI SDK chat endpoint, mounted next to the agent protocol. ---
  // Given a shared session log, a chat's runs are sessions like any other (and span instances).
  const { sessions } = agentOptions;
  const agent = createAgentHandler(agentOptions);
  const path = (typeof uiMessageStream === 'object' ? uiMessageStream.path : undefined) ?? UI_MESSAGE_STREAM_PATH;
  const chat = createUiMessageStreamHandler({
    createPorts: agentOptions.createPorts,
    path,
    ...(sessions ? { sessions } : {}),
    ...(agentOptions.runOptions ? { runOptions: agentOptions.runOptions } : {}),
    ...(agentOptions.resolveOwner ? { resolveOwner: agentOptions.resolveOwner } : {}),
    ...(agentOptions.cors ? { cors: agentOptions.cors } : {}),
    ...(agentOptions.maxBodyBytes === undefined ? {} : { maxBodyBytes: agentOptions.maxBodyBytes }),
    ...(agentOptions.maxJsonDepth === undefined ? {} : { maxJsonDepth: agentOptions.maxJsonDepth }),
    ...(agentOptions.keepAliveMs === undefined ? {} : { keepAliveMs: agentOptions.keepAliveMs }),
  });
  return createNodeListener((request) => {
    const { pathname } = new URL(request.url);
    return pathname === path || pathname.startsWith(`${path}/`) ? chat(request) : agent(request);
  });
}
