import { AgentError, toAgentError } from '../errors/index.js';
import type { AgentPorts } from '../ports/index.js';
import type { AgentEvent } from '../protocol/events.js';
import type { ResumeResponse } from '../protocol/resume-responses.js';
import { parseAgentRequestText } from '../protocol/requests.js';
import { toWireEvent } from '../protocol/wire.js';
import { resume, run, type RunOptions } from '../run/index.js';
import { encodeSseComment, encodeSseEvent } from '../sse/index.js';

/** The paths the agent endpoint answers on (decision W2). */
export const AGENT_RUN_PATHS: readonly string[] = ['/v1beta1/streamRunAgent', '/api/agent/run'];

/** What the port factory learns about one request. */
export interface AgentRequestContext {
  /** The caller's token: the body's `accessToken`, else `Authorization: Bearer`. */
  accessToken?: string;
  /** The incoming request (headers such as `Origin` are often forwarded upstream). */
  request: Request;
}

/** Options of {@link createAgentHandler}. */
export interface AgentHandlerOptions {
  /** Builds the ports for one request, bound to that caller's token. */
  createPorts(context: AgentRequestContext): AgentPorts | Promise<AgentPorts>;
  /** Run options for one request (model, mode, extra function groups, ...). */
  runOptions?: (context: AgentRequestContext) => Omit<RunOptions, 'signal' | 'owner'> | undefined;
  /** Refuse bodies larger than this with 413. Default 32 MiB (inline images travel in bodies). */
  maxBodyBytes?: number;
  /** A keep-alive comment is sent after this much silence so proxies keep the stream open. Default 15 s. */
  keepAliveMs?: number;
  /**
   * Who owns a run started with this token; a resume by another owner is refused. Default: a
   * SHA-256 digest of the token (the token itself is never stored). Return `undefined` for anonymous.
   */
  resolveOwner?: (accessToken: string | undefined) => string | undefined | Promise<string | undefined>;
}

const DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024;
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
  const keepAliveMs = options.keepAliveMs ?? DEFAULT_KEEP_ALIVE_MS;
  const resolveOwner = options.resolveOwner ?? digestOwner;
  return async (request) => {
    try {
      const url = new URL(request.url);
      if (!AGENT_RUN_PATHS.includes(url.pathname)) {
        throw new AgentError('NOT_FOUND', `No agent endpoint at ${url.pathname}`);
      }
      if (request.method !== 'POST') {
        throw new AgentError('METHOD_NOT_ALLOWED', `${url.pathname} accepts POST, not ${request.method}`);
      }
      const text = await readBody(request, maxBodyBytes);
      const body = parseAgentRequestText(text);
      const accessToken = body.accessToken ?? bearerToken(request);
      const context: AgentRequestContext = accessToken === undefined ? { request } : { accessToken, request };
      const ports = await options.createPorts(context);
      const owner = await resolveOwner(accessToken);
      const controller = new AbortController();
      const runOptions: RunOptions = { ...(options.runOptions?.(context) ?? {}), signal: controller.signal };
      if (owner !== undefined) runOptions.owner = owner;
      const events =
        body.kind === 'start'
          ? run(body.start, ports, runOptions)
          : // The answer travels as the client sent it; the suspended function reads what it needs.
          resume(body.resume.interactionId, body.resume.response as ResumeResponse, ports, runOptions);
      return new Response(toSseStream(events, controller, request.signal, keepAliveMs), {
        status: 200,
        headers: {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-cache, no-transform',
          'x-accel-buffering': 'no',
        },
      });
    } catch (error) {
      return errorResponse(error);
    }
  };
}

/** A JSON error response with the status of the error's code. */
export function errorResponse(error: unknown): Response {
  const agentError = toAgentError(error);
  return new Response(JSON.stringify(agentError.toJSON()), {
    status: agentError.status,
    headers: { 'content-type': 'application/json; charset=utf-8' },
  });
}

function toSseStream(
  events: AsyncGenerator<AgentEvent>,
  controller: AbortController,
  requestSignal: AbortSignal,
  keepAliveMs: number,
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const keepAlive = encoder.encode(encodeSseComment('keep-alive'));
  let pending: Promise<IteratorResult<AgentEvent>> | undefined;
  const stop = (): void => controller.abort(new AgentError('ABORTED', 'Client disconnected'));
  requestSignal.addEventListener('abort', stop, { once: true });
  return new ReadableStream<Uint8Array>({
    async pull(stream) {
      pending ??= events.next();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const tick = new Promise<'tick'>((resolve) => {
        timer = setTimeout(() => resolve('tick'), keepAliveMs);
      });
      const next = await Promise.race([pending, tick]);
      clearTimeout(timer);
      if (next === 'tick') {
        stream.enqueue(keepAlive);
        return;
      }
      pending = undefined;
      if (next.done) {
        requestSignal.removeEventListener('abort', stop);
        stream.close();
        return;
      }
      stream.enqueue(encoder.encode(encodeSseEvent(toWireEvent(next.value))));
    },
    async cancel() {
      requestSignal.removeEventListener('abort', stop);
      stop();
      await events.return(undefined);
    },
  });
}

async function readBody(request: Request, maxBytes: number): Promise<string> {
  const declared = Number(request.headers.get('content-length') ?? Number.NaN);
  if (Number.isFinite(declared) && declared > maxBytes) throw tooLarge(maxBytes);
  if (!request.body) return '';
  const reader = request.body.getReader();
  const decoder = new TextDecoder();
  let size = 0;
  let text = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel();
      throw tooLarge(maxBytes);
    }
    text += decoder.decode(value, { stream: true });
  }
  return text + decoder.decode();
}

function tooLarge(maxBytes: number): AgentError {
  return new AgentError('PAYLOAD_TOO_LARGE', `Request body exceeds the limit of ${maxBytes} bytes`, {
    details: { limit: maxBytes },
  });
}

function bearerToken(request: Request): string | undefined {
  const header = request.headers.get('authorization');
  if (!header) return undefined;
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  return match?.[1];
}

async function digestOwner(accessToken: string | undefined): Promise<string | undefined> {
  if (accessToken === undefined || accessToken.length === 0) return undefined;
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(accessToken));
  let hex = '';
  for (const byte of new Uint8Array(digest)) hex += byte.toString(16).padStart(2, '0');
  return `sha256:${hex}`;
}
