import { AgentError } from '../errors/index.js';
import { parseAgentRequestBody, parseResumeResponse, type AgentRequestLimits } from '../protocol/requests.js';
import type { ResumeResponse } from '../protocol/resume-responses.js';
import type { SessionContext, SessionEvent, SessionService } from '../sessions/session-service.js';
import { createSseEventStream, encodeSseEvent } from '../sse/index.js';
import { publicError } from './redact.js';

/** The prefix of every sessions path. */
export const SESSIONS_PATH = '/v1beta1/sessions/';

/** What the sessions endpoint needs from the handler that serves it. */
export interface SessionsEndpointOptions {
  service: SessionService;
  /** The caller's ports and identity, from the request and the token it carries. */
  contextFor(request: Request, accessToken: string | undefined): Promise<SessionContext>;
  /**
   * Reads a JSON body within the handler's limits (size, depth); throws coded errors. With
   * `optional`, an empty body is `undefined` rather than an error.
   */
  readJson(request: Request, options?: { optional?: boolean }): Promise<unknown>;
  /** A keep-alive comment after this much silence on a stream. */
  keepAliveMs: number;
  /** The id for a session `sessions/new` creates; default a fresh UUID. */
  newSessionId?: (request: Request) => string | undefined;
  /** The limits a `sessions/new` body is parsed under (the most segments); default the parser's. */
  limits?: AgentRequestLimits;
}

const SESSION_ID = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * The sessions protocol: `POST sessions/new` → `{sessionId}`; `GET sessions/{id}?alt=sse&after=N`
 * → the start envelope, numbered events, the done envelope; `POST sessions/{id}:resume` (the body
 * is the answer) → `{ok:true}`; `GET sessions/{id}/status`; `POST sessions/{id}:cancel`. `HEAD`
 * answers as `GET` without a body, `OPTIONS` with the methods a path takes.
 * Returns `undefined` for paths it does not serve.
 */
export function createSessionsEndpoint(options: SessionsEndpointOptions): (request: Request, url: URL) => Promise<Response> | undefined {
  const { service } = options;
  return (request, url) => {
    if (!url.pathname.startsWith(SESSIONS_PATH)) return undefined;
    const rest = url.pathname.slice(SESSIONS_PATH.length);
    return route(rest).then(
      (response) => (request.method === 'HEAD' ? withoutBody(response) : response),
      (error: unknown) => errorJson(request, error),
    );

    async function route(path: string): Promise<Response> {
      if (path === 'new') {
        const answered = allow(request, 'POST', url);
        if (answered) return answered;
        const raw = await options.readJson(request);
        const body = parseAgentRequestBody(raw, options.limits);
        if (body.kind !== 'start') {
          const field = 'resume' in (raw as object) ? 'resume' : 'interactionId';
          throw new AgentError('BAD_REQUEST', `${field}: sessions/new takes a start request: { segments, flags?, graph? }; answer a session with sessions/{id}:resume`, {
            details: { path: field },
          });
        }
        const context = await options.contextFor(request, body.accessToken ?? bearerToken(request));
        const chosen = options.newSessionId?.(request);
        const sessionId = await service.start(body.start, context, chosen === undefined ? {} : { sessionId: chosen });
        return json({ sessionId });
      }
      const match = /^([^/:]+)(?::(resume|cancel)|\/(status))?$/.exec(path);
      const sessionId = match?.[1];
      if (!match || sessionId === undefined) throw new AgentError('NOT_FOUND', `No sessions endpoint at ${url.pathname}`);
      if (!SESSION_ID.test(sessionId)) throw new AgentError('NOT_FOUND', 'Session not found');
      const action = match[2] ?? match[3];
      if (action === 'status') {
        const answered = allow(request, 'GET', url);
        if (answered) return answered;
        const info = await service.status(sessionId);
        return json({ sessionId, status: info.status, eventCount: info.eventCount });
      }
      if (action === 'resume') {
        const answered = allow(request, 'POST', url);
        if (answered) return answered;
        const body = await options.readJson(request);
        let answer: Record<string, unknown>;
        try {
          answer = parseResumeResponse(body, '');
        } catch (error) {
          // An unknown session is a 404 whatever the answer.
          await service.status(sessionId);
          throw error;
        }
        const { accessToken, ...response } = answer;
        if (accessToken !== undefined && typeof accessToken !== 'string') {
          throw new AgentError('BAD_REQUEST', 'accessToken: expected string', { details: { path: 'accessToken' } });
        }
        const context = await options.contextFor(request, (accessToken as string | undefined) || bearerToken(request));
        await service.resume(sessionId, response as ResumeResponse, context);
        return json({ ok: true });
      }
      if (action === 'cancel') {
        const answered = allow(request, 'POST', url);
        if (answered) return answered;
        // The token may come in a JSON body (read within the limits), as with :resume; a body of
        // another type is not read.
        let accessToken: unknown;
        const hasBody = request.body !== null && request.headers.get('content-length') !== '0';
        if (hasBody && /^application\/json\b/i.test(request.headers.get('content-type') ?? '')) {
          const body = await options.readJson(request, { optional: true });
          if (typeof body === 'object' && body !== null && !Array.isArray(body)) accessToken = (body as { accessToken?: unknown }).accessToken;
        }
        if (accessToken !== undefined && typeof accessToken !== 'string') {
          throw new AgentError('BAD_REQUEST', 'accessToken: expected string', { details: { path: 'accessToken' } });
        }
        await service.cancel(sessionId, await options.contextFor(request, (accessToken as string | undefined) || bearerToken(request)));
        return json({ sessionId, status: 'cancelled' });
      }
      const answered = allow(request, 'GET', url);
      if (answered) return answered;
      const after = cursorOf(url, request);
      await service.status(sessionId);
      // A HEAD learns the session is there and what its stream would be, without opening it.
      if (request.method === 'HEAD') return new Response(null, { status: 200, headers: sseHeaders() });
      return new Response(sessionStream(service.eventBatches(sessionId, after, request.signal), sessionId, options.keepAliveMs), {
        status: 200,
        headers: sseHeaders(),
      });
    }
  };
}

/** `after` from the query, else `Last-Event-ID`, else -1 (everything). */
function cursorOf(url: URL, request: Request): number {
  const query = url.searchParams.get('after');
  const raw = query ?? request.headers.get('last-event-id');
  if (raw === null || raw === '') return -1;
  // Decimal digits only: `Number` would also take " 3", "0x3" and "1e1".
  const value = /^-?\d{1,16}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < -1) {
    const field = query === null ? 'Last-Event-ID' : 'after';
    throw new AgentError('BAD_REQUEST', `${field}: expected an event index (an integer of -1 or more), got "${raw.slice(0, 40)}"`, {
      details: { path: field },
    });
  }
  return value;
}

function sessionStream(events: AsyncGenerator<SessionEvent[]>, sessionId: string, keepAliveMs: number): ReadableStream<Uint8Array> {
  async function* frames(): AsyncGenerator<string> {
    yield encodeSseEvent(JSON.stringify({ sessionId }), { event: 'start' });
    try {
      for await (const batch of events) {
        let text = '';
        for (const event of batch) text += `event: event\nid: ${event.index}\ndata: ${event.json}\n\n`;
        yield text;
      }
    } catch (error) {
      const failure = publicError(error);
      yield encodeSseEvent(JSON.stringify({ error: { message: failure.message, code: failure.code } }), { event: 'event' });
    }
    yield encodeSseEvent('{}', { event: 'done' });
  }
  return createSseEventStream(frames(), { encode: (frame) => frame, keepAliveMs });
}

/** What a path answers to, as an `Allow` header says it: a GET path answers HEAD too. */
function allowed(method: 'GET' | 'POST'): string {
  return method === 'GET' ? 'GET, HEAD, OPTIONS' : 'POST, OPTIONS';
}

/**
 * `undefined` when the request has the path's method (or HEAD for GET); else the answer: 204 with
 * the `Allow` header to an `OPTIONS`, and 405 (thrown) with it to any other method.
 */
function allow(request: Request, method: 'GET' | 'POST', url: URL): Response | undefined {
  if (request.method === method || (method === 'GET' && request.method === 'HEAD')) return undefined;
  if (request.method === 'OPTIONS') return new Response(null, { status: 204, headers: { allow: allowed(method) } });
  throw new AgentError('METHOD_NOT_ALLOWED', `${url.pathname} accepts ${method}, not ${request.method}`, { details: { allow: allowed(method) } });
}

/** The headers of every SSE answer: no caching, no proxy buffering. */
export function sseHeaders(): Record<string, string> {
  return {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    'x-accel-buffering': 'no',
  };
}

/** The response's status and headers without its body (the answer to a HEAD). */
export function withoutBody(response: Response): Response {
  if (response.body === null) return response;
  void response.body.cancel().catch(() => undefined);
  return new Response(null, { status: response.status, statusText: response.statusText, headers: response.headers });
}

function json(value: unknown): Response {
  return new Response(JSON.stringify(value), { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' } });
}

function errorJson(request: Request, error: unknown): Response {
  const failure = publicError(error);
  return new Response(request.method === 'HEAD' ? null : JSON.stringify(failure.toJSON()), { status: failure.status, headers: errorHeaders(failure) });
}

/** The headers of a JSON error: a 405 says which methods the path takes, a 429 when to try again. */
export function errorHeaders(failure: AgentError): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8' };
  if (failure.code === 'METHOD_NOT_ALLOWED' && typeof failure.details?.allow === 'string') headers.allow = failure.details.allow;
  if (failure.status === 429) headers['retry-after'] = '1';
  return headers;
}

function bearerToken(request: Request): string | undefined {
  const header = request.headers.get('authorization');
  const match = header ? /^Bearer\s+(.+)$/i.exec(header.trim()) : null;
  return match?.[1];
}
