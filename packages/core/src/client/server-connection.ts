import { AgentError, ERROR_CODES, HTTP_STATUS_BY_CODE, type ErrorCode } from '../errors/agent-error.js';
import { messageOf } from '../errors/message-of.js';
import { AGENT_EVENT_PAYLOADS, type AgentEvent } from '../protocol/events.js';
import { fromWireEvent } from '../protocol/wire.js';
import { createSseParser, type SseEvent } from '../sse/index.js';
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
  /** How long to wait for the answer's status line; longer is a `network` error with code `TIMEOUT`. */
  timeoutMs?: number;
}

/** How one event stream is read. */
export interface MessagesOptions {
  /** A stream that sends nothing (not even a comment) for this long is broken: a `network` error with code `TIMEOUT`. */
  idleTimeoutMs?: number;
  /** An event the stream ends in the middle of is dropped rather than delivered (see the SSE parser). */
  discardIncompleteEvent?: boolean;
  /** Events without their own `id:` line carry no id (see the SSE parser). */
  carryId?: boolean;
}

/** One event of a stream; `unterminated` when the stream ended before the blank line that closes it. */
export interface ServerMessage extends SseEvent {
  unterminated?: true;
}

/** The server as the client sees it: requests that fail as {@link AgentClientError}s. */
export interface ServerConnection {
  /** Sends a request; unreachable is a `network` error, a non-2xx answer an `http` one with the server's code. */
  send(method: 'GET' | 'POST', path: string, request?: ServerRequest): Promise<Response>;
  /** Reads an answer's JSON body. */
  json(response: Response): Promise<Record<string, unknown>>;
  /**
   * The server-sent events of an answer; a broken or idle stream is a `network` error, an event
   * over the size limit or an answer that is not an event stream a `protocol` one. Closes the body
   * when left.
   */
  messages(response: Response, options?: MessagesOptions): AsyncGenerator<ServerMessage>;
  /**
   * Parses one event's JSON; anything else is a `protocol` error. An event of a type this client
   * does not know (a newer server's) is `undefined`, for the caller to pass over.
   */
  parse(data: string): AgentEvent | undefined;
}

const DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024;
/** How much of an error answer's body is read: enough for any error object, not a whole page. */
const ERROR_BODY_BYTES = 64 * 1024;
/** The longest text taken from an error answer that is not JSON (a proxy's page). */
const ERROR_TEXT_CHARS = 300;
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
        response = await answerWithin(fetchFn(url, init), request.timeoutMs, () => new AgentClientError('network', `${describeUrl(url)} sent no answer for ${request.timeoutMs} ms`, { code: 'TIMEOUT' }));
      } catch (error) {
        if (error instanceof AgentClientError) throw error;
        // A fetch may name the whole URL in its message: its query is left out, like the token.
        throw new AgentClientError('network', redact(`Could not reach ${describeUrl(url)}: ${messageOf(error).split(url).join(describeUrl(url))}`), { cause: error });
      }
      if (!response.ok) throw await httpError(response, redact, request.timeoutMs);
      return response;
    },

    async json(response) {
      const where = describeUrl(response.url) || 'The server';
      const body = await readText(response, maxEventBytes).catch((error: unknown) => {
        throw new AgentClientError('network', redact(`The answer of ${where} broke: ${messageOf(error)}`), { cause: error });
      });
      if (!body.complete) throw new AgentClientError('protocol', `${where} answered with more than ${maxEventBytes} bytes (limits.maxEventBytes)`, { code: 'PAYLOAD_TOO_LARGE' });
      let value: unknown;
      try {
        value = JSON.parse(body.text);
      } catch {
        value = undefined;
      }
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        throw new AgentClientError('protocol', `${where} answered ${response.status} without a JSON object`);
      }
      return value as Record<string, unknown>;
    },

    async *messages(response, messagesOptions = {}) {
      const where = describeUrl(response.url || base);
      const { idleTimeoutMs, ...parserOptions } = messagesOptions;
      const type = response.headers.get('content-type');
      if (type !== null && mediaType(type) !== 'text/event-stream') {
        // A login page, a proxy's error page or a JSON answer: reading it as events would find none.
        const body = await readText(response, ERROR_BODY_BYTES, idleTimeoutMs).catch(() => ({ text: '', complete: false }));
        const { message, code } = describeBody(body.text, response);
        throw new AgentClientError('protocol', redact(`${where} answered ${response.status} with ${mediaType(type) || 'no content type'}, not an event stream: ${message}`), code === undefined ? {} : { code });
      }
      const body = response.body;
      if (!body) throw new AgentClientError('protocol', `${where} answered ${response.status} without a body`);
      const reader = body.getReader();
      let queue: ServerMessage[] = [];
      const parser = createSseParser((message) => queue.push(message), { ...parserOptions, maxLineLength: maxEventBytes });
      const checked = (message: ServerMessage): ServerMessage => {
        // The parser counts characters; one character is up to 3 bytes of UTF-8.
        if (message.data.length * 3 > maxEventBytes && utf8Length(message.data) > maxEventBytes) throw tooLarge();
        return message;
      };
      try {
        for (;;) {
          const { done, value } = await readWithin(reader, idleTimeoutMs, where);
          if (done) break;
          parser.push(value);
          if (queue.length === 0) continue;
          // Handed over as a batch: shift() from a long array costs in proportion to its length.
          const batch = queue;
          queue = [];
          for (const message of batch) yield checked(message);
        }
        parser.end();
        // What end() dispatches never got its closing blank line.
        for (const message of queue) {
          message.unterminated = true;
          yield checked(message);
        }
      } catch (error) {
        if (error instanceof AgentClientError) throw error;
        if (error instanceof AgentError && error.code === 'PAYLOAD_TOO_LARGE') throw tooLarge();
        throw new AgentClientError('network', redact(`The event stream from ${where} broke: ${messageOf(error)}`), { cause: error });
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

/**
 * A URL as error messages show it: without its query, fragment and user info, which may hold
 * secrets (a signed link a redirect led to). Empty for an empty URL.
 */
export function describeUrl(url: string): string {
  if (url === '') return '';
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}`;
  } catch {
    return url.replace(/[?#].*$/s, '');
  }
}

/** `text/event-stream` of `Text/Event-Stream; charset=utf-8`. */
function mediaType(contentType: string | null): string {
  return (contentType ?? '').split(';', 1)[0]?.trim().toLowerCase() ?? '';
}

/** The fetch's answer, or a failure made by `onTimeout` when it takes longer than `timeoutMs`. */
function answerWithin(answer: Promise<Response>, timeoutMs: number | undefined, onTimeout: () => AgentClientError): Promise<Response> {
  if (timeoutMs === undefined || !(timeoutMs > 0) || !Number.isFinite(timeoutMs)) return answer;
  return new Promise<Response>((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      reject(onTimeout());
    }, timeoutMs);
    answer.then(
      (response) => {
        clearTimeout(timer);
        // An answer after the wait was given up on is not read by anyone: let its connection go.
        if (late) void response.body?.cancel().catch(() => undefined);
        else resolve(response);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/** The next chunk of a body; a wait longer than `idleTimeoutMs` for it is a `network` error with code `TIMEOUT`. */
function readWithin(reader: ReadableStreamDefaultReader<Uint8Array>, idleTimeoutMs: number | undefined, where: string): Promise<ReadableStreamReadResult<Uint8Array>> {
  if (idleTimeoutMs === undefined || !(idleTimeoutMs > 0) || !Number.isFinite(idleTimeoutMs)) return reader.read();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new AgentClientError('network', `The event stream from ${where} sent nothing for ${idleTimeoutMs} ms`, { code: 'TIMEOUT' }));
    }, idleTimeoutMs);
    reader.read().then(
      (result) => {
        clearTimeout(timer);
        resolve(result);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/**
 * At most `limit` bytes of a body as text, and whether that was all of it; the rest is not read.
 * A wait longer than `idleTimeoutMs` for the next chunk ends the reading with what came.
 */
async function readText(response: Response, limit: number, idleTimeoutMs?: number): Promise<{ text: string; complete: boolean }> {
  const body = response.body;
  if (!body) return { text: '', complete: true };
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let bytes = 0;
  try {
    for (;;) {
      const { done, value } = await readWithin(reader, idleTimeoutMs, '');
      if (done) return { text: text + decoder.decode(), complete: true };
      bytes += value.byteLength;
      if (bytes > limit) return { text: text + decoder.decode(value.subarray(0, value.byteLength - (bytes - limit))), complete: false };
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}

/**
 * Parses one event's JSON; anything else is a `protocol` error naming what was wrong. A single-key
 * object whose key is no event type is a newer server's event: `undefined`.
 */
function parseEvent(data: string): AgentEvent | undefined {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    throw new AgentClientError('protocol', `The server sent an event that is not JSON: ${data.slice(0, 120)}`);
  }
  if (isUnknownEvent(value)) return undefined;
  try {
    return fromWireEvent(value);
  } catch (error) {
    throw new AgentClientError('protocol', `The server sent an invalid event: ${messageOf(error)}`, { cause: error });
  }
}

/** Whether `value` is `{"someType": ...}` for a type not in the protocol this client knows. */
function isUnknownEvent(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  let type: string | undefined;
  for (const key in value) {
    if (type !== undefined) return false;
    type = key;
  }
  return type !== undefined && !Object.hasOwn(AGENT_EVENT_PAYLOADS, type);
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

async function httpError(response: Response, redact: (text: string) => string, idleTimeoutMs: number | undefined): Promise<AgentClientError> {
  const body = await readText(response, ERROR_BODY_BYTES, idleTimeoutMs).catch(() => ({ text: '', complete: false }));
  const { message, code: given } = describeBody(body.text, response);
  let code = given;
  // A code outside the closed set is dropped; the status still says which kind of refusal it is.
  if (code === undefined || !(ERROR_CODES as readonly string[]).includes(code)) code = CODE_BY_STATUS.get(response.status);
  const error = new AgentClientError('http', redact(`${response.status}: ${message}`), code === undefined ? { status: response.status } : { status: response.status, code });
  const retryAfter = retryAfterMs(response.headers);
  if (retryAfter !== undefined) retryAfters.set(error, Math.min(retryAfter, MAX_RETRY_AFTER_MS));
  return error;
}

/**
 * What an answer's body says went wrong: a JSON error's message and code (`{"error": {"code",
 * "message"}}` or `{"error": "..."}`), an HTML page's title, or else its text, shortened; the status
 * text when the body says nothing.
 */
function describeBody(text: string, response: Response): { message: string; code?: string } {
  const trimmed = text.trim();
  if (trimmed.startsWith('{')) {
    try {
      const parsed = JSON.parse(trimmed) as { error?: { message?: unknown; code?: unknown } | string };
      if (typeof parsed.error === 'string' && parsed.error.length > 0) return { message: parsed.error };
      if (parsed.error && typeof parsed.error === 'object' && typeof parsed.error.message === 'string') {
        return typeof parsed.error.code === 'string' ? { message: parsed.error.message, code: parsed.error.code } : { message: parsed.error.message };
      }
    } catch {
      // Not JSON, or cut short: taken as text.
    }
  }
  let message = trimmed;
  if (mediaType(response.headers.get('content-type')) === 'text/html' || trimmed.startsWith('<')) {
    // A page (a proxy's or a login form): its title says what it is, its markup says nothing.
    const title = /<title[^>]*>([^<]*)<\/title>/i.exec(trimmed)?.[1] ?? '';
    message = decodeEntities(title).replace(/\s+/g, ' ').trim();
    if (message.startsWith(`${response.status} `)) message = message.slice(String(response.status).length + 1);
  }
  message = message.replace(/\s+/g, ' ');
  if (message.length > ERROR_TEXT_CHARS) message = `${message.slice(0, ERROR_TEXT_CHARS)}...`;
  return { message: message || response.statusText || 'the server sent no details' };
}

function decodeEntities(text: string): string {
  return text.replace(/&(amp|lt|gt|quot|#39);/g, (_, name: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[name] ?? '');
}
