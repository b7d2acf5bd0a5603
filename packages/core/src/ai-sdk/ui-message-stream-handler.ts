import { AgentError, toAgentError } from '../errors/index.js';
import type { AgentRequestContext } from '../http/agent-handler.js';
import { bearerToken, createBodyBudget, digestOwner, errorResponse, readBody, requireJson } from '../http/agent-handler.js';
import { createCorsPolicy, type CorsOptions } from '../http/cors.js';
import { publicError } from '../http/redact.js';
import type { AgentPorts, EventBus, SessionInfo, SessionLog } from '../ports/index.js';
import { parseJsonBody } from '../protocol/requests.js';
import type { SuspendEventType } from '../protocol/events.js';
import { readInteractionState } from '../run/interaction-state.js';
import type { RunOptions } from '../run/run-options.js';
import { createMemoryEventBus, createMemorySessionLog } from '../sessions/memory-session-log.js';
import { createSessionService, type SessionContext, type SessionEvent, type SessionService } from '../sessions/session-service.js';
import { encodeSseComment } from '../sse/index.js';
import { AssistantMessageBuilder } from './assistant-message.js';
import type { AgentUIMessage, AgentUIMessageChunk } from './agent-ui-message.js';
import { keptUserMessage, readChat, requireOwner, updateChat, type ChatRun, type StoredChat } from './chat-record.js';
import { answerOf, CHAT_ID, parseChatRequest, toStartRequest, type ChatMessageInput, type ChatRequest, type PendingCall } from './chat-request.js';
import { UiChunkMapper, type UiChunkMapperOptions } from './ui-message-chunks.js';

/** The path `useChat` posts to unless told otherwise, and where the handler serves by default. */
export const UI_MESSAGE_STREAM_PATH = '/api/chat';

/** Options of {@link createUiMessageStreamHandler}. */
export interface UiMessageStreamHandlerOptions {
  /** Builds the ports for one request, bound to that caller's token. The store also keeps each chat's record. */
  createPorts(context: AgentRequestContext): AgentPorts | Promise<AgentPorts>;
  /** Run options for one request (model, mode, extra function groups, ...). */
  runOptions?: (context: AgentRequestContext) => Omit<RunOptions, 'signal' | 'owner'> | undefined;
  /**
   * Who owns a chat started with this token (`Authorization: Bearer`); a request by another owner
   * is refused with 403. Default: a SHA-256 digest of the token (for refreshed tokens see
   * `createGoogleAccountOwner` in `@org/core/http`). `undefined`: anyone.
   */
  resolveOwner?: (accessToken: string | undefined) => string | undefined | Promise<string | undefined>;
  /**
   * Where runs keep their events (the same options as `createAgentHandler`'s `sessions`). Default:
   * a log and a bus in this process. Share a Redis or PostgreSQL log and bus to span instances.
   */
  sessions?: { log: SessionLog; bus: EventBus; livenessMs?: number };
  /** The path of the chat endpoint. Default {@link UI_MESSAGE_STREAM_PATH}. */
  path?: string;
  /** Refuse bodies larger than this with 413. Default 32 MiB (`useChat` sends the whole conversation). */
  maxBodyBytes?: number;
  /** Most bytes of request bodies read at once, over all requests; past it, 429. Default 256 MiB. */
  maxBodyBytesInFlight?: number;
  /** Most runs this endpoint runs at once; past it, a new message or an answer gets 429 (as `createAgentHandler`'s). Default: no limit. */
  maxRunning?: number;
  /** Refuse bodies nesting arrays and objects deeper than this with 400. Default 64. */
  maxJsonDepth?: number;
  /** Refuse conversations of more messages than this with 400. Default 1000. */
  maxMessages?: number;
  /** Refuse messages of more parts than this with 400. Default 1000. */
  maxParts?: number;
  /** Which other origins a browser page may call from. Default: none (same origin only). */
  cors?: CorsOptions;
  /** A keep-alive comment is sent after this much silence. Default 15 s. */
  keepAliveMs?: number;
}

const DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024;
const DEFAULT_KEEP_ALIVE_MS = 15_000;
const LOG_BATCH = 500;
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/**
 * Serves agent runs to the AI SDK's `useChat` (`@ai-sdk/react` and the other UI bindings) in its UI
 * message stream protocol, so a chat page needs no server code of its own:
 *
 * - `POST {path}` takes `useChat`'s request (`id`, `messages`, `trigger`). A last message from the
 *   user starts a run (a run still waiting in that chat is cancelled); a last assistant message
 *   whose waiting tool part now has its output (`addToolOutput`, or `addToolApprovalResponse` for a
 *   consent) resumes the suspended run with exactly that answer. The answer streams back as UI
 *   message chunks (`x-vercel-ai-ui-message-stream: v1`).
 * - `GET {path}/{chatId}` gives `{ id, messages }`: the conversation as it stands, to restore a page.
 * - `GET {path}/{chatId}/stream` follows a run that is still running (`useChat`'s `resume`), else 204.
 *
 * Each chat is a record in the interaction store (keyed by the chat id, bound to its owner) listing
 * its runs; each run is a session on the log, so any instance sharing the store and the log serves
 * any chat. A client that leaves mid-answer stops the run where it is; sending the conversation
 * again continues it.
 *
 * @example
 * ```ts
 * const chat = createUiMessageStreamHandler({
 *   createPorts: () => ({ backend: createGeminiBackendClient({ apiKey, fetch }), store }),
 * });
 * // In a page: useChat<AgentUIMessage>({ sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls })
 * const response = await chat(request);
 * ```
 */
export function createUiMessageStreamHandler(options: UiMessageStreamHandlerOptions): (request: Request) => Promise<Response> {
  const path = (options.path ?? UI_MESSAGE_STREAM_PATH).replace(/\/+$/, '');
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const budget = createBodyBudget(options.maxBodyBytesInFlight);
  const keepAliveMs = options.keepAliveMs ?? DEFAULT_KEEP_ALIVE_MS;
  const resolveOwner = options.resolveOwner ?? digestOwner;
  const limits = { maxMessages: options.maxMessages ?? 1000, maxParts: options.maxParts ?? 1000 };
  const cors = createCorsPolicy(options.cors, { methods: ['GET', 'POST'], headers: ['content-type', 'authorization'] });
  const log = options.sessions?.log ?? createMemorySessionLog();

  const contextFor = async (request: Request | undefined, accessToken: string | undefined): Promise<SessionContext> => {
    const context: AgentRequestContext = {};
    if (accessToken !== undefined) context.accessToken = accessToken;
    if (request !== undefined) context.request = request;
    const session: SessionContext = { ports: await options.createPorts(context) };
    const owner = await resolveOwner(accessToken);
    if (owner !== undefined) session.owner = owner;
    const runOptions = options.runOptions?.(context);
    if (runOptions !== undefined) session.runOptions = runOptions;
    return session;
  };
  const service = createSessionService({
    log,
    bus: options.sessions?.bus ?? createMemoryEventBus(),
    pickUpContext: () => contextFor(undefined, undefined),
    ...(options.sessions?.livenessMs === undefined ? {} : { livenessMs: options.sessions.livenessMs }),
    ...(options.maxRunning === undefined ? {} : { maxRunning: options.maxRunning }),
  });
  const chats: ChatRoutes = { service, log, keepAliveMs };

  return async (request) => {
    const url = new URL(request.url);
    const rest = url.pathname === path ? '' : url.pathname.startsWith(`${path}/`) ? url.pathname.slice(path.length + 1) : undefined;
    if (rest === undefined) return errorResponse(new AgentError('NOT_FOUND', `No chat endpoint at ${url.pathname}`));
    if (cors.isPreflight(request)) return cors.preflight(request);
    const refused = cors.refuse(request);
    if (refused) return refused;
    try {
      const response = await route(request, rest, url);
      return cors.decorate(request, response);
    } catch (error) {
      return cors.decorate(request, errorResponse(error));
    }
  };

  async function route(request: Request, rest: string, url: URL): Promise<Response> {
    if (rest === '') {
      allow(request, 'POST', url);
      requireJson(request);
      const body = parseChatRequest(parseJsonBody(await readBody(request, maxBodyBytes, budget), options.maxJsonDepth === undefined ? {} : { maxJsonDepth: options.maxJsonDepth }), limits);
      const context = await contextFor(request, bearerToken(request));
      return post(chats, body, context, request.signal);
    }
    const match = /^([^/]+)(\/stream)?$/.exec(rest);
    const chatId = match?.[1] === undefined ? undefined : decodedSegment(match[1]);
    if (!match || chatId === undefined || !CHAT_ID.test(chatId)) throw new AgentError('NOT_FOUND', `No chat endpoint at ${url.pathname}`);
    allow(request, 'GET', url);
    const context = await contextFor(request, bearerToken(request));
    const chat = await readChat(context.ports.store, chatId);
    if (!chat) throw new AgentError('NOT_FOUND', `Chat ${chatId} not found`, { details: { chatId } });
    requireOwner(chatId, chat, context.owner);
    if (match[2] === undefined) return json({ id: chatId, messages: await conversation(chats, chat) });
    return follow(chats, chat, request.signal);
  }
}

/** What the chat routes share. */
interface ChatRoutes {
  service: SessionService;
  log: SessionLog;
  keepAliveMs: number;
}

/** A chat request: a user message starts a run, an assistant message answers the waiting one. */
async function post(chats: ChatRoutes, body: ChatRequest, context: SessionContext, signal: AbortSignal): Promise<Response> {
  const index = body.messages.length - 1;
  const last = body.messages[index] as ChatMessageInput;
  const chat = await readChat(context.ports.store, body.id);
  requireOwner(body.id, chat, context.owner);
  if (last.role === 'user') return startRun(chats, body, index, chat, context, signal);
  if (last.role === 'assistant') return continueRun(chats, body, index, chat, context, signal);
  throw new AgentError('BAD_REQUEST', `messages[${index}].role: expected the last message to be "user" or "assistant"`, {
    details: { path: `messages[${index}].role` },
  });
}

async function startRun(
  chats: ChatRoutes,
  body: ChatRequest,
  index: number,
  chat: StoredChat | undefined,
  context: SessionContext,
  signal: AbortSignal,
): Promise<Response> {
  const start = toStartRequest(body.messages, index);
  const previous = chat?.record.runs.at(-1);
  if (previous) {
    // A new message (or a regenerate) replaces the run the chat had: one that still waits is over.
    const info = await chats.service.status(previous.sessionId).catch(() => undefined);
    if (info && !TERMINAL.has(info.status)) await chats.service.cancel(previous.sessionId, context).catch(() => undefined);
  }
  const sessionId = await chats.service.start(start, context);
  const run: ChatRun = { sessionId, user: keptUserMessage(body.messages[index] as ChatMessageInput), answers: {} };
  let latestBefore: string | undefined;
  try {
    await updateChat(
      context.ports.store,
      body.id,
      context.owner,
      (record) => {
        latestBefore = record.runs.at(-1)?.sessionId;
        return { ...record, runs: [...record.runs, run] };
      },
      chat,
    );
  } catch (error) {
    await chats.service.cancel(sessionId, context).catch(() => undefined);
    throw error;
  }
  // A new message sent at the same time started a run after this request looked: this one comes
  // after it in the chat, so that run is replaced too rather than left running unseen.
  if (latestBefore !== undefined && latestBefore !== previous?.sessionId) await chats.service.cancel(latestBefore, context).catch(() => undefined);
  return streamSession(chats, sessionId, -1, {}, signal, true);
}

async function continueRun(
  chats: ChatRoutes,
  body: ChatRequest,
  index: number,
  chat: StoredChat | undefined,
  context: SessionContext,
  signal: AbortSignal,
): Promise<Response> {
  const message = body.messages[index] as ChatMessageInput;
  const current = chat?.record.runs.at(-1);
  if (!chat || !current) {
    throw new AgentError('INTERACTION_NOT_FOUND', `Chat ${body.id} has no run to continue; send a user message to start one`);
  }
  if (message.id !== current.sessionId) {
    throw new AgentError('CONFLICT', `messages[${index}].id: this message belongs to an earlier run of chat ${body.id}; only its latest answer can be continued`, {
      details: { path: `messages[${index}].id` },
    });
  }
  const info = await chats.service.status(current.sessionId).catch((error: unknown) => {
    // Anything but a missing session goes on as it was thrown, so the error response redacts it.
    if (toAgentError(error).code !== 'NOT_FOUND') throw error;
    throw new AgentError('INTERACTION_NOT_FOUND', `The run of chat ${body.id} is no longer in the session log (it expired, or the log was kept in a process that stopped)`);
  });
  if (info.status === 'running') {
    throw new AgentError('CONFLICT', `The run of chat ${body.id} is still running; follow it with GET …/${body.id}/stream`);
  }
  if (TERMINAL.has(info.status)) {
    throw new AgentError('CONFLICT', `The run of chat ${body.id} has ended (${info.status}); send a user message to start another`);
  }
  const mapperOptions: UiChunkMapperOptions = {};
  if (info.status === 'suspended') {
    const pending = await pendingCall(chats.log, context.ports, current.sessionId, info);
    const { response, answer } = answerOf(message, index, pending.call);
    const callId = pending.call.callId;
    let kept = false;
    const keep = (replace: boolean, known?: StoredChat) =>
      updateChat(context.ports.store, body.id, context.owner, (record) => {
        kept = false;
        const runs = record.runs.map((run) => {
          if (run.sessionId !== current.sessionId || (!replace && run.answers[callId] !== undefined)) return run;
          kept = true;
          return { ...run, answers: { ...run.answers, [callId]: answer } };
        });
        return { ...record, runs };
      }, known);
    // Kept first, so the conversation restored later shows the answer exactly as the app gave it; but
    // never over one already kept: of two answers sent at once, the run takes only the one whose resume wins.
    await keep(false, chat);
    if (pending.call.event.type === 'queryConsent') mapperOptions.awaitingResult = { callId, position: pending.position };
    await chats.service.resume(current.sessionId, response, context);
    // This answer is the run's: it replaces one kept by a request whose resume lost or failed. The run
    // goes on either way, so a failure here leaves only the restored conversation behind.
    if (!kept) await keep(true).catch(() => undefined);
  } else {
    // Paused (a model failure, or a client that left): it goes on from its last checkpoint.
    await chats.service.resume(current.sessionId, {}, context);
  }
  return streamSession(chats, current.sessionId, info.eventCount - 1, mapperOptions, signal, true);
}

/** The call a suspended run waits for: the suspend event (the log's last) and the call in the saved state. */
async function pendingCall(log: SessionLog, ports: AgentPorts, sessionId: string, info: SessionInfo): Promise<{ call: PendingCall; position: number }> {
  const [last] = info.eventCount > 0 ? await log.read(sessionId, info.eventCount - 2, 1) : [];
  const wire = last === undefined ? undefined : (JSON.parse(last) as Record<string, Record<string, unknown>>);
  const type = wire === undefined ? undefined : (Object.keys(wire)[0] as SuspendEventType | undefined);
  const record = info.interactionId === undefined ? undefined : await ports.store.get(info.interactionId);
  if (!wire || type === undefined || !record || info.interactionId === undefined) {
    throw new AgentError('INTERACTION_NOT_FOUND', `The run ${sessionId} has no saved state to resume`);
  }
  const state = readInteractionState(info.interactionId, record.state);
  const calls = state.calls ?? [];
  const position = calls.findIndex((call) => call.callId === state.pendingCallId);
  const call = calls[position];
  if (!call) throw new AgentError('INTERACTION_NOT_FOUND', `The run ${sessionId} waits for no call`);
  return { call: { callId: call.callId, name: call.name, event: { ...wire[type], type } }, position };
}

/** Follows the chat's current run while it runs (a reconnecting page); 204 when nothing runs. */
async function follow(chats: ChatRoutes, chat: StoredChat, signal: AbortSignal): Promise<Response> {
  const current = chat.record.runs.at(-1);
  const info = current === undefined ? undefined : await chats.service.status(current.sessionId).catch(() => undefined);
  if (!current || info?.status !== 'running') return new Response(null, { status: 204 });
  return streamSession(chats, current.sessionId, -1, { answers: current.answers }, signal, false);
}

/** The chat's conversation: each run's user message and its assistant message, rebuilt from the run's events. */
async function conversation(chats: ChatRoutes, chat: StoredChat): Promise<AgentUIMessage[]> {
  const messages: AgentUIMessage[] = [];
  for (const run of chat.record.runs) {
    messages.push({ id: run.user.id, role: 'user', parts: run.user.parts as AgentUIMessage['parts'] });
    const info = await chats.log.get(run.sessionId);
    if (info === undefined) continue;
    const mapper = new UiChunkMapper({ answers: run.answers });
    const builder = new AssistantMessageBuilder();
    // A log may answer a read with fewer events than asked for (a reply-size bound): read on to
    // the count the log reported, or until it has no more.
    for (let cursor = -1; cursor < info.eventCount - 1; ) {
      const batch = await chats.log.read(run.sessionId, cursor, LOG_BATCH);
      if (batch.length === 0) break;
      for (const json of batch) for (const chunk of mapper.pushJson(json)) builder.add(chunk);
      cursor += batch.length;
    }
    for (const chunk of mapper.end({ stopped: info.status !== 'running' })) builder.add(chunk);
    messages.push(builder.message(run.sessionId));
  }
  return messages;
}

/**
 * A session's events after `after` as a UI message stream of the assistant message `sessionId`.
 * `interruptOnLeave`: a client that leaves stops the segment this request runs (it stays resumable).
 */
function streamSession(
  chats: ChatRoutes,
  sessionId: string,
  after: number,
  mapperOptions: UiChunkMapperOptions,
  requestSignal: AbortSignal,
  interruptOnLeave: boolean,
): Response {
  const reading = new AbortController();
  const events = chats.service.events(sessionId, after, reading.signal);
  const mapper = new UiChunkMapper(mapperOptions);
  const encoder = new TextEncoder();
  const keepAlive = encoder.encode(encodeSseComment('keep-alive'));
  const encode = (chunks: readonly AgentUIMessageChunk[]): Uint8Array => {
    let text = '';
    for (const chunk of chunks) text += `data: ${JSON.stringify(chunk)}\n\n`;
    return encoder.encode(text);
  };
  let pending: Promise<IteratorResult<SessionEvent>> | undefined;
  let finished = false;
  const leave = (): void => {
    if (finished) return;
    finished = true;
    reading.abort();
    if (interruptOnLeave) chats.service.interrupt(sessionId);
  };
  requestSignal.addEventListener('abort', leave, { once: true });
  const body = new ReadableStream<Uint8Array>({
    start(stream) {
      stream.enqueue(encode([{ type: 'start', messageId: sessionId }]));
    },
    async pull(stream) {
      // An event may map to no chunk: read on until something is sent (a pull that sends nothing is not repeated).
      for (;;) {
        if (await step(stream)) return;
      }
    },
    async cancel() {
      requestSignal.removeEventListener('abort', leave);
      leave();
      await events.return(undefined);
    },
  });
  /** Reads one event; `true` once something was sent or the stream closed. */
  const step = async (stream: ReadableStreamDefaultController<Uint8Array>): Promise<boolean> => {
    pending ??= events.next();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = new Promise<'tick'>((resolve) => {
      timer = setTimeout(() => resolve('tick'), chats.keepAliveMs);
    });
    let next: IteratorResult<SessionEvent> | 'tick';
    try {
      next = await Promise.race([pending, tick]);
    } catch (error) {
      // A log's own failure may name its files or its connection URL: only what a caller may see goes out.
      // It ends the message as a run's failure does: what was streaming is ended, no call is left running.
      const failure = publicError(error);
      stream.enqueue(encode([...mapper.push({ type: 'error', message: failure.message, code: failure.code }), ...mapper.end()]));
      close(stream);
      return true;
    } finally {
      clearTimeout(timer);
    }
    if (next === 'tick') {
      stream.enqueue(keepAlive);
      return true;
    }
    pending = undefined;
    if (next.done) {
      stream.enqueue(encode(mapper.end()));
      close(stream);
      return true;
    }
    const chunks = mapper.pushJson(next.value.json);
    if (chunks.length === 0) return false;
    stream.enqueue(encode(chunks));
    return true;
  };
  const close = (stream: ReadableStreamDefaultController<Uint8Array>): void => {
    finished = true;
    requestSignal.removeEventListener('abort', leave);
    stream.enqueue(encoder.encode('data: [DONE]\n\n'));
    stream.close();
  };
  return new Response(body, {
    status: 200,
    headers: {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      'x-accel-buffering': 'no',
      'x-vercel-ai-ui-message-stream': 'v1',
    },
  });
}

/** A path segment decoded, or `undefined` when it is not valid percent-encoding (`%`, `%E0%A4%A`). */
function decodedSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

function allow(request: Request, method: string, url: URL): void {
  if (request.method === method) return;
  throw new AgentError('METHOD_NOT_ALLOWED', `${url.pathname} accepts ${method}, not ${request.method}`);
}

function json(value: unknown): Response {
  return new Response(JSON.stringify(value), { status: 200, headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' } });
}
