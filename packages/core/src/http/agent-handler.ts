import { AgentError } from '../errors/index.js';
import type { AgentPorts, EventBus, SessionLog } from '../ports/index.js';
import type { ResumeResponse } from '../protocol/resume-responses.js';
import { parseAgentRequestText, parseJsonBody, type AgentRequestLimits } from '../protocol/requests.js';
import type { RunEvent } from '../protocol/run-events.js';
import { toWireEventJson } from '../protocol/wire.js';
import { resume, type RunOptions } from '../run/index.js';
import { createMemoryEventBus, createMemorySessionLog } from '../sessions/memory-session-log.js';
import { createSessionService, type SessionContext, type SessionEvent, type SessionService } from '../sessions/session-service.js';
import { createSseEventStream, encodeSseEvent } from '../sse/index.js';
import { createCorsPolicy, type CorsOptions } from './cors.js';
import { publicError } from './redact.js';
import { createSessionsEndpoint, errorHeaders, SESSIONS_PATH, sseHeaders, withoutBody } from './sessions-endpoint.js';

/** The paths the agent endpoint answers on (decision W2). */
export const AGENT_RUN_PATHS: readonly string[] = ['/v1beta1/streamRunAgent', '/api/agent/run'];

/** What the port factory learns about one request. */
export interface AgentRequestContext {
  /** The caller's token: the body's `accessToken`, else `Authorization: Bearer`. */
  accessToken?: string;
  /**
   * The incoming request (headers such as `Origin` are often forwarded upstream). Absent for a
   * session this instance picked up after the instance running it died: nobody asked, so there
   * is no request and no token.
   */
  request?: Request;
}

/** Where sessions keep their events, and how the instances of a deployment reach each other. */
export interface AgentSessionsOptions {
  /** The event log every instance shares. */
  log: SessionLog;
  /** The bus every instance shares. */
  bus: EventBus;
  /** A reader that heard nothing from a running session for this long checks its instance is alive. Default 15 000 ms. */
  livenessMs?: number;
  /**
   * The id for a session this request creates (`sessions/new`, a legacy start). Default: a fresh
   * UUID. A platform that routes requests by session id (one Durable Object per session) picks
   * the id before the request reaches the handler and returns it here.
   */
  newSessionId?: (request: Request) => string | undefined;
}

/** Options of {@link createAgentHandler}. */
export interface AgentHandlerOptions {
  /** Builds the ports for one request, bound to that caller's token. */
  createPorts(context: AgentRequestContext): AgentPorts | Promise<AgentPorts>;
  /** Run options for one request (model, mode, extra function groups, ...). */
  runOptions?: (context: AgentRequestContext) => Omit<RunOptions, 'signal' | 'owner'> | undefined;
  /** Refuse bodies larger than this with 413. Default 32 MiB (inline images travel in bodies). */
  maxBodyBytes?: number;
  /**
   * Most bytes of request bodies read at once, over all requests: past it a request is refused
   * with 429 `RATE_LIMITED` instead of adding to the server's memory. Default 256 MiB.
   */
  maxBodyBytesInFlight?: number;
  /**
   * Most runs (session segments) this handler runs at once. Past it, a start or resume is refused
   * with 429 `RATE_LIMITED` (an SSE caller gets it as an `error` event) and a session whose
   * instance died is left for another instance to pick up. Each run keeps its history in memory
   * and a model request open, so this bounds what a burst of callers can make a server hold. Runs
   * resumed from a record saved outside sessions (by `run()` in your own code) are not counted.
   * Default: no limit.
   */
  maxRunning?: number;
  /** Refuse bodies nesting arrays and objects deeper than this with 400. Default 64. */
  maxJsonDepth?: number;
  /** Refuse start requests with more segments than this with 400. Default 1000. */
  maxSegments?: number;
  /**
   * Which other origins a browser page may start and resume runs from. Default: none, so only
   * pages served from this server's own host can (and a request with another `Origin` gets 403).
   * Preflights allow `POST` with the headers `content-type` and `authorization`.
   */
  cors?: CorsOptions;
  /** A keep-alive comment is sent after this much silence so proxies keep the stream open. Default 15 s. */
  keepAliveMs?: number;
  /**
   * Who owns a run started with this token; a resume by another owner is refused. Default: a
   * SHA-256 digest of the token (the token itself is never stored), so only the same token resumes;
   * for tokens that expire and are refreshed (Google OAuth: within the hour) map them to the user,
   * e.g. `createGoogleAccountOwner()`. Return `undefined` for anonymous.
   */
  resolveOwner?: (accessToken: string | undefined) => string | undefined | Promise<string | undefined>;
  /**
   * Sessions (`/v1beta1/sessions/*`, and `streamRunAgent` runs on the same machinery). Default: a
   * log and a bus in this process, which serve one instance (the log holds 64 MiB of events at
   * most: old sessions give way, see `createMemorySessionLog`). Share a Redis or PostgreSQL log and
   * bus (`@org/adapter-node/redis`, `/postgres`) to span many.
   */
  sessions?: AgentSessionsOptions;
}

const DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024;
const DEFAULT_MAX_BODY_BYTES_IN_FLIGHT = 256 * 1024 * 1024;
const DEFAULT_KEEP_ALIVE_MS = 15_000;

/**
 * The agent protocol as one Web-standard handler: `POST /v1beta1/streamRunAgent` (and
 * `/api/agent/run`) with a start or resume body, answered with the run's events as SSE.
 *
 * @example
 * ```ts
 * const handler = createAgentHandler({
 *   createPorts: ({ accessToken }) => ({ backend: createGeminiBackendClient({ apiKey, fetch }), store }),
 * });
 * const response = await handler(new Request('http://localhost/v1beta1/streamRunAgent', { method: 'POST', body }));
 * ```
 */
export function createAgentHandler(options: AgentHandlerOptions): (request: Request) => Promise<Response> {
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const budget = createBodyBudget(options.maxBodyBytesInFlight);
  const keepAliveMs = options.keepAliveMs ?? DEFAULT_KEEP_ALIVE_MS;
  const resolveOwner = options.resolveOwner ?? digestOwner;
  const limits: AgentRequestLimits = {};
  if (options.maxJsonDepth !== undefined) limits.maxJsonDepth = options.maxJsonDepth;
  if (options.maxSegments !== undefined) limits.maxSegments = options.maxSegments;
  const cors = createCorsPolicy(options.cors, { methods: ['GET', 'POST'], headers: ['content-type', 'authorization', 'last-event-id'] });

  const contextFor = async (request: Request | undefined, accessToken: string | undefined): Promise<SessionContext> => {
    const context: AgentRequestContext = {};
    if (accessToken !== undefined) context.accessToken = accessToken;
    if (request !== undefined) context.request = request;
    const ports = await options.createPorts(context);
    const owner = await resolveOwner(accessToken);
    const runOptions = options.runOptions?.(context);
    const session: SessionContext = { ports };
    if (owner !== undefined) session.owner = owner;
    if (runOptions !== undefined) session.runOptions = runOptions;
    return session;
  };
  const service = createSessionService({
    log: options.sessions?.log ?? createMemorySessionLog(),
    bus: options.sessions?.bus ?? createMemoryEventBus(),
    pickUpContext: () => contextFor(undefined, undefined),
    ...(options.sessions?.livenessMs === undefined ? {} : { livenessMs: options.sessions.livenessMs }),
    ...(options.maxRunning === undefined ? {} : { maxRunning: options.maxRunning }),
  });
  const readJson = async (request: Request, readOptions?: { optional?: boolean }): Promise<unknown> => {
    requireJson(request);
    const text = await readBody(request, maxBodyBytes, budget);
    if (readOptions?.optional && text.trim().length === 0) return undefined;
    return parseJsonBody(text, limits);
  };
  const newSessionId = options.sessions?.newSessionId;
  const sessions = createSessionsEndpoint({ service, contextFor, readJson, keepAliveMs, limits, ...(newSessionId ? { newSessionId } : {}) });

  const handle = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    const isRun = AGENT_RUN_PATHS.includes(url.pathname);
    if (!isRun && !url.pathname.startsWith(SESSIONS_PATH)) {
      return errorResponse(new AgentError('NOT_FOUND', `No agent endpoint at ${url.pathname}`));
    }
    if (cors.isPreflight(request)) return cors.preflight(request);
    const refused = cors.refuse(request);
    if (refused) return refused;
    if (!isRun) return cors.decorate(request, await (sessions(request, url) as Promise<Response>));
    if (request.method === 'OPTIONS') return cors.decorate(request, new Response(null, { status: 204, headers: { allow: 'POST, OPTIONS' } }));
    if (request.method !== 'POST') {
      const response = errorResponse(new AgentError('METHOD_NOT_ALLOWED', `${url.pathname} accepts POST, not ${request.method}`));
      response.headers.set('allow', 'POST, OPTIONS');
      return cors.decorate(request, response);
    }
    try {
      requireJson(request);
      const text = await readBody(request, maxBodyBytes, budget);
      const body = parseAgentRequestText(text, limits);
      const accessToken = body.accessToken ?? bearerToken(request);
      const context = await contextFor(request, accessToken);
      const stream =
        body.kind === 'start'
          ? await startLegacy(service, body.start, context, request.signal, keepAliveMs, newSessionId?.(request))
          : await resumeLegacy(service, body.resume.interactionId, body.resume.response as ResumeResponse, context, request.signal, keepAliveMs);
      return cors.decorate(request, new Response(stream, { status: 200, headers: sseHeaders() }));
    } catch (error) {
      return cors.decorate(request, runErrorResponse(request, error));
    }
  };
  // A HEAD answer has the status and headers of the GET, and no body.
  return async (request) => (request.method === 'HEAD' ? withoutBody(await handle(request)) : handle(request));
}

/**
 * The legacy start: a session like any other, whose first segment streams back on this response.
 * A client that leaves before the segment ends cancels it (it never learned an id to resume).
 */
async function startLegacy(
  service: SessionService,
  start: Parameters<SessionService['start']>[0],
  context: SessionContext,
  requestSignal: AbortSignal,
  keepAliveMs: number,
  chosenId: string | undefined,
): Promise<ReadableStream<Uint8Array>> {
  const sessionId = await service.start(start, context, chosenId === undefined ? {} : { sessionId: chosenId });
  const reading = new AbortController();
  return toSseStream(service.eventBatches(sessionId, -1, reading.signal), requestSignal, keepAliveMs, () => {
    reading.abort();
    void service.cancel(sessionId, context).catch(() => undefined);
  });
}

/**
 * The legacy resume: the session the interaction belongs to goes on, and its next segment streams
 * back on this response. A client that leaves stops the segment without ending the run: the same
 * interaction id resumes it. An interaction saved outside sessions resumes directly.
 */
async function resumeLegacy(
  service: SessionService,
  interactionId: string,
  response: ResumeResponse,
  context: SessionContext,
  requestSignal: AbortSignal,
  keepAliveMs: number,
): Promise<ReadableStream<Uint8Array>> {
  const sessionId = await service.sessionOf(interactionId, context.ports);
  // Saved outside sessions, or by a session whose log this instance does not share: resume directly.
  const info = sessionId === undefined ? undefined : await service.status(sessionId).catch(() => undefined);
  if (sessionId === undefined || info === undefined) {
    const controller = new AbortController();
    const runOptions: RunOptions = { ...context.runOptions, signal: controller.signal };
    if (context.owner !== undefined) runOptions.owner = context.owner;
    const events = runEvents(resume(interactionId, response, context.ports, runOptions));
    return toSseStream(events, requestSignal, keepAliveMs, () => controller.abort(new AgentError('ABORTED', 'Client disconnected')));
  }
  if (info.interactionId !== interactionId) {
    return singleEvent({ error: { message: `Unknown interaction ID: ${interactionId}`, code: 'INTERACTION_NOT_FOUND' } });
  }
  try {
    await service.resume(sessionId, response, context);
  } catch (error) {
    const failure = publicError(error);
    // The legacy protocol speaks of interactions, not sessions (a resume that lost a race, or of a
    // run not waiting for an answer, gets the reference's words).
    const message =
      failure.code === 'INTERACTION_NOT_FOUND'
        ? `Unknown interaction ID: ${interactionId}`
        : failure.code === 'FORBIDDEN'
          ? `Interaction ${interactionId} belongs to another user`
          : failure.code === 'CONFLICT'
            ? `No suspended session for interaction: ${interactionId}`
            : failure.message;
    return singleEvent({ error: { message, code: failure.code } });
  }
  const reading = new AbortController();
  return toSseStream(service.eventBatches(sessionId, info.eventCount - 1, reading.signal), requestSignal, keepAliveMs, () => {
    reading.abort();
    service.interrupt(sessionId);
  });
}

/** A run's events as session events (the path for interactions saved outside sessions). */
async function* runEvents(events: AsyncGenerator<RunEvent>): AsyncGenerator<SessionEvent[]> {
  let index = 0;
  for await (const event of events) yield [{ index: index++, json: toWireEventJson(event) }];
}

function singleEvent(payload: object): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(encodeSseEvent(payload));
  return new ReadableStream({
    start(stream) {
      stream.enqueue(bytes);
      stream.close();
    },
  });
}

/**
 * A JSON error response with the status of the error's code. An error that is not an
 * `AgentError` becomes `INTERNAL`, its message stripped of secrets and server file paths.
 */
export function errorResponse(error: unknown): Response {
  const agentError = publicError(error);
  return new Response(JSON.stringify(agentError.toJSON()), { status: agentError.status, headers: errorHeaders(agentError) });
}

/**
 * The answer to a start or resume that could not be served. A caller that asked for SSE
 * (`?alt=sse` or `Accept: text/event-stream`) gets a 200 stream holding one `error` event with the
 * message and code, which is what the Opal client can show to its user (it reports any non-2xx
 * answer only by its status line); any other caller gets {@link errorResponse}. Either way the
 * message is stripped of secrets and server file paths.
 */
export function runErrorResponse(request: Request, error: unknown): Response {
  if (!wantsSse(request)) return errorResponse(error);
  const agentError = publicError(error);
  const event = encodeSseEvent({ error: { message: agentError.message, code: agentError.code } });
  return new Response(event, { status: 200, headers: sseHeaders() });
}

function wantsSse(request: Request): boolean {
  return new URL(request.url).searchParams.get('alt') === 'sse' || (request.headers.get('accept') ?? '').toLowerCase().includes('text/event-stream');
}

/**
 * Only JSON bodies start or resume runs: a browser sends `application/json` across origins only
 * after a preflight, so a page elsewhere cannot start a run with a "simple" form or text post.
 */
export function requireJson(request: Request): void {
  const contentType = request.headers.get('content-type');
  const mediaType = contentType?.split(';')[0]?.trim().toLowerCase();
  if (mediaType === 'application/json') return;
  throw new AgentError(
    'UNSUPPORTED_MEDIA_TYPE',
    contentType === null
      ? 'content-type: missing; send the body as application/json'
      : `content-type: expected application/json, got "${contentType.slice(0, 100)}"`,
    { details: { path: 'content-type' } },
  );
}

/**
 * Writes a segment's events as `data:` lines (batched, with one keep-alive timer per stream).
 * `onLeave` runs when the client goes away before the segment ends.
 */
function toSseStream(
  events: AsyncGenerator<SessionEvent[]>,
  requestSignal: AbortSignal,
  keepAliveMs: number,
  onLeave: () => void,
): ReadableStream<Uint8Array> {
  let finished = false;
  const leave = (): void => {
    if (finished) return;
    finished = true;
    onLeave();
  };
  requestSignal.addEventListener('abort', leave, { once: true });
  async function* untilEnd(): AsyncGenerator<SessionEvent[]> {
    try {
      yield* events;
    } finally {
      // Ended (or cancelled): a late abort of the request means nothing any more.
      requestSignal.removeEventListener('abort', leave);
      finished = true;
    }
  }
  return createSseEventStream(untilEnd(), { encode: dataLines, keepAliveMs, onCancel: leave });
}

/** Events as `data:` frames, one after another. */
function dataLines(batch: readonly SessionEvent[]): string {
  let text = '';
  for (const event of batch) text += `data: ${event.json}\n\n`;
  return text;
}

/** Bytes of request bodies being read, shared by the requests of one handler, and their most. */
export interface BodyBudget {
  used: number;
  readonly max: number;
}

/** A budget for the bodies one handler reads at once (default 256 MiB). */
export function createBodyBudget(max: number = DEFAULT_MAX_BODY_BYTES_IN_FLIGHT): BodyBudget {
  if (!(max > 0)) throw new TypeError(`maxBodyBytesInFlight must be a positive number, got ${max}`);
  return { used: 0, max };
}

/**
 * The body as text, refused with `PAYLOAD_TOO_LARGE` once it passes `maxBytes` (declared or
 * streamed), and with `RATE_LIMITED` when the bodies being read at once would pass `budget.max`.
 * A compressed body (`Content-Encoding` other than `identity`) is refused with
 * `UNSUPPORTED_MEDIA_TYPE`, and bytes that are not UTF-8 with `BAD_REQUEST`: JSON travels as UTF-8
 * (RFC 8259), so a `charset` parameter changes nothing, and text is never silently replaced.
 */
export async function readBody(request: Request, maxBytes: number, budget?: BodyBudget): Promise<string> {
  const encoding = request.headers.get('content-encoding')?.trim().toLowerCase();
  if (encoding && encoding !== 'identity') {
    throw new AgentError('UNSUPPORTED_MEDIA_TYPE', `content-encoding: "${encoding.slice(0, 40)}" is not supported; send the body uncompressed`, {
      details: { path: 'content-encoding' },
    });
  }
  const declared = Number(request.headers.get('content-length') ?? Number.NaN);
  if (Number.isFinite(declared) && declared > maxBytes) throw tooLarge(maxBytes);
  if (budget && Number.isFinite(declared) && budget.used + declared > budget.max) throw busy(budget.max);
  if (!request.body) return '';
  const reader = request.body.getReader();
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let size = 0;
  let text = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (budget) budget.used += value.byteLength;
      if (size > maxBytes) {
        await reader.cancel();
        throw tooLarge(maxBytes);
      }
      if (budget && budget.used > budget.max) {
        await reader.cancel();
        throw busy(budget.max);
      }
      text += decodeUtf8(decoder, value);
    }
    return text + decodeUtf8(decoder);
  } catch (error) {
    await reader.cancel().catch(() => undefined);
    throw error;
  } finally {
    if (budget) budget.used -= size;
  }
}

/** Decodes the next bytes of a body (none: the end), refusing bytes that are not UTF-8. */
function decodeUtf8(decoder: TextDecoder, bytes?: Uint8Array): string {
  try {
    return bytes === undefined ? decoder.decode() : decoder.decode(bytes, { stream: true });
  } catch {
    throw new AgentError('BAD_REQUEST', '(body): not valid UTF-8; send JSON as UTF-8', { details: { path: '(body)' } });
  }
}

function busy(max: number): AgentError {
  return new AgentError('RATE_LIMITED', `(body): the server is reading ${max} bytes of requests already; try again shortly`, {
    details: { path: '(body)', limit: max },
  });
}

function tooLarge(maxBytes: number): AgentError {
  return new AgentError('PAYLOAD_TOO_LARGE', `(body): the request body exceeds the limit of ${maxBytes} bytes`, {
    details: { path: '(body)', limit: maxBytes },
  });
}

/** The token of an `Authorization: Bearer` header, if any. */
export function bearerToken(request: Request): string | undefined {
  const header = request.headers.get('authorization');
  if (!header) return undefined;
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  return match?.[1];
}

/** The default owner of a token: its SHA-256 digest (the token itself is never stored); `undefined` without one. */
export async function digestOwner(accessToken: string | undefined): Promise<string | undefined> {
  if (accessToken === undefined || accessToken.length === 0) return undefined;
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(accessToken));
  let hex = '';
  for (const byte of new Uint8Array(digest)) hex += byte.toString(16).padStart(2, '0');
  return `sha256:${hex}`;
}
