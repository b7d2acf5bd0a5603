import { AgentError, ERROR_CODES, HTTP_STATUS_BY_CODE, type ErrorCode } from '../errors/agent-error.js';
import { messageOf } from '../errors/message-of.js';
import type { AgentEvent } from '../protocol/events.js';
import { fromWireEvent } from '../protocol/wire.js';
import { parseSseStream, type SseEvent } from '../sse/index.js';
import { AgentClientError } from './errors.js';
import { utf8Length } from '../protocol/utf8-length.js';
import { retryAfterMs } from '../http/retry-after.js';

/** Bounds on what the client accepts from a server. */
export interface ClientLimits {
  /**
   * The largest event, in bytes of its `data`; a longer event or line fails the run with a
   * `protocol` error (not retried) instead of being buffered. Default 16 MiB.
   */
  maxEventBytes?: number;
}

/** What the client needs to reach the server. */
export interface ServerConnectionOptions {
  baseUrl: string;
  fetch?: (input: string, init: RequestInit) => Promise<Response>;
  getAccessToken?: () => string | undefined | Promise<string | undefined>;
  limits?: ClientLimits;
}

/** One request to the server. */
export interface ServerRequest {
  /** A JSON body; the token is added to it as `accessToken`. */
  body?: object;
  signal?: AbortSignal;
  /** Asks for an event stream. */
  stream?: boolean;
}

/** How one event stream is read. */
export interface MessagesOptions {
  /** A stream that sends nothing (not even a comment) for this long is broken: a `network` error. */
  idleTimeoutMs?: number;
  /** An event the stream ends in the middle of is dropped rather than delivered (see the SSE parser). */
  discardIncompleteEvent?: boolean;
  /** Events without their own `id:` line carry no id (see the SSE parser). */
  carryId?: boolean;
}

/** The server as the client sees it: requests that fail as {@link AgentClientError}s. */
export interface ServerConnection {
  /** Sends a request; unreachable is a `network` error, a non-2xx answer an `http` one with the server's code. */
  send(method: 'GET' | 'POST', path: string, request?: ServerRequest): Promise<Response>;
  /** Reads an answer's JSON body. */
  json(response: Response): Promise<Record<string, unknown>>;
  /**
   * The server-sent events of an answer; a broken or idle stream is a `network` error, an event
   * over the size limit a `protocol` one. Closes the body when left.
   */
  messages(response: Response, options?: MessagesOptions): AsyncGenerator<SseEvent>;
  /** Parses one event's JSON; anything else is a `protocol` error. */
  parse(data: string): AgentEvent;
}

const DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024;
/** The longest Retry-After the client waits out; a longer one is read as this. */
const MAX_RETRY_AFTER_MS = 60_000;

/** The wait a 429 or 503 asked for with `Retry-After`, in milliseconds, by error. */
const retryAfters = new WeakMap<AgentClientError, number>();

/** How long the server asked the client to wait before trying again, when it said so. */
export function retryAfterOf(error: AgentClientError): number | undefined {
  return retryAfters.get(error);
}

/** Builds the connection every request of a client goes through: the token travels as a bearer and in the body. */
export function createServerConnection(options: ServerConnectionOptions): ServerConnection {
  const fetchFn = options.fetch ?? ((input: string, init: RequestInit) => globalThis.fetch(input, init));
  const base = options.baseUrl.replace(/\/+$/, '');
  const maxEventBytes = options.limits?.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
  // The tokens sent so far (the last few): a server may echo one back in an error text.
  const tokens: string[] = [];
  const redact = (text: string): string => {
    let clean = text;
    for (const token of tokens) clean = clean.split(`Bearer ${token}`).join('[redacted]').split(token).join('[redacted]');
    return clean;
  };
  const remember = (token: string): void => {
    if (tokens.includes(token)) return;
    tokens.unshift(token);
    tokens.length = Math.min(tokens.length, 4);
  };
  const tooLarge = (): AgentClientError =>
    new AgentClientError('protocol', `The server sent an event larger than ${maxEventBytes} bytes (limits.maxEventBytes)`, { code: 'PAYLOAD_TOO_LARGE' });

  return {
    async send(method, path, request = {}) {
      const url = base + path;
      const token = await options.getAccessToken?.();
      const headers: Record<string, string> = { accept: request.stream ? 'text/event-stream' : 'application/json' };
      const init: RequestInit = { method, headers };
      if (token) {
        remember(token);
        headers.authorization = `Bearer ${token}`;
      }
      if (request.body) {
        headers['content-type'] = 'application/json';
        init.body = JSON.stringify(token ? { ...request.body, accessToken: token } : request.body);
      }
      if (request.signal) init.signal = request.signal;
      let response: Response;
      try {
        response = await fetchFn(url, init);
      } catch (error) {
        throw new AgentClientError('network', redact(`Could not reach ${url}: ${messageOf(error)}`), { cause: error });
      }
      if (!response.ok) throw await httpError(response, redact);
      return response;
    },

    async json(response) {
      const value: unknown = await response.json().catch(() => undefined);
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        throw new AgentClientError('protocol', `${response.url || 'The server'} answered ${response.status} without a JSON object`);
      }
      return value as Record<string, unknown>;
    },

    async *messages(response, messagesOptions = {}) {
      const body = response.body;
      if (!body) throw new AgentClientError('protocol', `${response.url || 'The server'} answered ${response.status} without a body`);
      const reader = body.getReader();
      const { idleTimeoutMs, ...parserOptions } = messagesOptions;
      try {
        for await (const message of parseSseStream(chunks(reader, idleTimeoutMs, response.url || base), { ...parserOptions, maxLineLength: maxEventBytes })) {
          // The parser counts characters; one character is up to 3 bytes of UTF-8.
          if (message.data.length * 3 > maxEventBytes && utf8Length(message.data) > maxEventBytes) throw tooLarge();
          yield message;
        }
      } catch (error) {
        if (error instanceof AgentClientError) throw error;
        if (error instanceof AgentError && error.code === 'PAYLOAD_TOO_LARGE') throw tooLarge();
        throw new AgentClientError('network', redact(`The event stream from ${response.url || base} broke: ${messageOf(error)}`), { cause: error });
      } finally {
        // Left early (a suspend, an abort): let go of the connection.
        await reader.cancel().catch(() => undefined);
        reader.releaseLock();
      }
    },

    parse(data) {
      try {
        return parseEvent(data);
      } catch (error) {
        if (!(error instanceof AgentClientError)) throw error;
        throw new AgentClientError(error.kind, redact(error.message), { cause: error.cause });
      }
    },
  };
}

/** The body's chunks; a wait longer than `idleTimeoutMs` for the next one is a `network` error. */
async function* chunks(reader: ReadableStreamDefaultReader<Uint8Array>, idleTimeoutMs: number | undefined, url: string): AsyncGenerator<Uint8Array> {
  for (;;) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const idle =
      idleTimeoutMs === undefined
        ? undefined
        : new Promise<never>((_, reject) => {
            timer = setTimeout(() => {
              reject(new AgentClientError('network', `The event stream from ${url} sent nothing for ${idleTimeoutMs} ms`));
            }, idleTimeoutMs);
          });
    try {
      const { done, value } = await (idle ? Promise.race([reader.read(), idle]) : reader.read());
      if (done) return;
      yield value;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Parses one event's JSON; anything else is a `protocol` error naming what was wrong. */
function parseEvent(data: string): AgentEvent {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    throw new AgentClientError('protocol', `The server sent an event that is not JSON: ${data.slice(0, 120)}`);
  }
  try {
    return fromWireEvent(value);
  } catch (error) {
    throw new AgentClientError('protocol', `The server sent an invalid event: ${messageOf(error)}`, { cause: error });
  }
}

/** The code of a refusal whose body names none (`{"error": "Session not found"}`, a proxy's page), by its status. */
const CODE_BY_STATUS: ReadonlyMap<number, ErrorCode> = new Map(
  (
    [
      'BAD_REQUEST',
      'UNAUTHENTICATED',
      'FORBIDDEN',
      'NOT_FOUND',
      'METHOD_NOT_ALLOWED',
      'CONFLICT',
      'PAYLOAD_TOO_LARGE',
      'UNSUPPORTED_MEDIA_TYPE',
      'RATE_LIMITED',
      'INTERNAL',
      'NOT_IMPLEMENTED',
      'UPSTREAM_ERROR',
      'TIMEOUT',
    ] as const
  ).map((code) => [HTTP_STATUS_BY_CODE[code], code]),
);

async function httpError(response: Response, redact: (text: string) => string): Promise<AgentClientError> {
  const text = await response.text().catch(() => '');
  let message = text.trim() || response.statusText;
  let code: string | undefined;
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown; code?: unknown } | string };
    if (typeof parsed.error === 'string') message = parsed.error;
    else if (parsed.error && typeof parsed.error.message === 'string') {
      message = parsed.error.message;
      if (typeof parsed.error.code === 'string') code = parsed.error.code;
    }
  } catch {
    // Not JSON: keep the text.
  }
  // A code outside the closed set is dropped; the status still says which kind of refusal it is.
  if (code === undefined || !(ERROR_CODES as readonly string[]).includes(code)) code = CODE_BY_STATUS.get(response.status);
  const error = new AgentClientError('http', redact(`${response.status}: ${message}`), code === undefined ? { status: response.status } : { status: response.status, code });
  const retryAfter = retryAfterMs(response.headers);
  if (retryAfter !== undefined) retryAfters.set(error, Math.min(retryAfter, MAX_RETRY_AFTER_MS));
  return error;
}
