import { AgentError, type ErrorCode } from '../../errors/index.js';
import type { BackendClient } from '../../ports/index.js';
import { createSseParser, type SseEvent } from '../../sse/index.js';
import type { RetryOptions } from '../gemini-backend-client.js';
import { secretsOfUrl } from '../redact.js';
import { retryAfterMs } from '../retry-after.js';
import { pastRetryBudget, withAttempts } from '../retry-budget.js';

/** Limits on what a provider may stream back; every answer is treated as hostile. */
export interface ProviderStreamLimits {
  /**
   * Longest single line of the event stream, counted in characters (never more than its bytes).
   * Default 16 Mi (a generated image arrives as one line).
   */
  maxLineBytes?: number;
  /** Most bytes one answer may have. Default 64 MiB. */
  maxResponseBytes?: number;
  /** Longest silence between two reads before the answer counts as lost. Default 10 minutes. */
  idleTimeoutMs?: number;
}

/** Options every provider client shares. */
export interface ProviderClientOptions {
  /** The provider's API key. It is sent only in request headers and never appears in an error. */
  apiKey?: string;
  fetch: typeof fetch;
  /** The API root, e.g. `https://api.openai.com/v1`; point it at a gateway or a local server. */
  baseUrl?: string;
  /** When set, every request uses this model whatever model the run names. */
  model?: string;
  /** Retries of rate limits and overloads before the first byte of an answer. */
  retry?: RetryOptions;
  /** Extra headers sent with every request. */
  headers?: Record<string, string>;
  limits?: ProviderStreamLimits;
  /** Handles `executeStep` and uploads, which a model provider does not offer. */
  upstream?: BackendClient;
}

/**
 * What must never appear in an error: the API key, the values of the extra headers (a key sent as
 * Azure's `api-key` or a gateway's header) and the credentials in the base URL.
 */
export function secretsOf(options: Pick<ProviderClientOptions, 'apiKey' | 'headers'>, baseUrl: string): string[] {
  const values = [options.apiKey, ...Object.values(options.headers ?? {}), ...secretsOfUrl(baseUrl)];
  return values.filter((value): value is string => typeof value === 'string' && value.length > 0);
}

const DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024;
const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;
const DEFAULT_IDLE_TIMEOUT_MS = 10 * 60 * 1000;
/** How much of an error body is read; the rest is never needed to explain the error. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;
const MAX_MESSAGE_CHARS = 500;

/** One request to a provider, ready to send. */
export interface ProviderRequest {
  /** The provider's name as users know it (`OpenAI`, `Anthropic`), used in messages. */
  provider: string;
  fetch: typeof fetch;
  url: string;
  headers: Record<string, string>;
  body: string;
  signal: AbortSignal | undefined;
  retry: RetryOptions | undefined;
  /** Values that must never appear in an error (the API key). */
  secrets: readonly string[];
}

/** Fields of a provider's error payload, whatever its shape. */
export interface ProviderErrorFields {
  type?: string | undefined;
  code?: string | undefined;
  message?: string | undefined;
  requestId?: string | undefined;
}

/**
 * Sends `request`, retrying rate limits and overloads with jittered backoff that honours
 * `retry-after`, and resolves to the streaming response. Rejects with a coded `AgentError`.
 */
export async function openProviderStream(request: ProviderRequest): Promise<Response> {
  const maxAttempts = request.retry?.maxAttempts ?? 5;
  const baseDelayMs = request.retry?.baseDelayMs ?? 1000;
  const maxDelayMs = request.retry?.maxDelayMs ?? 60_000;
  const maxTotalDelayMs = request.retry?.maxTotalDelayMs ?? 40_000;
  let waitedMs = 0;
  for (let attempt = 1; ; attempt += 1) {
    const response = await send(request);
    if (response.ok && !isJsonAnswer(response)) return response;
    // A 200 with a JSON body is a server that ignored `stream: true` or answered with an error.
    const error = await errorFromResponse(request, response);
    const retryable = error.details?.retryable === true;
    // With `attempts` the loop knows these were made: it pauses the run rather than asking again.
    if (!retryable || attempt >= maxAttempts) throw withAttempts(error, attempt);
    const hinted = typeof error.details?.retryAfterMs === 'number' ? error.details.retryAfterMs : undefined;
    const backoff = Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));
    const delay = Math.min(maxDelayMs, hinted ?? backoff * (0.5 + Math.random() * 0.5));
    if (waitedMs + delay > maxTotalDelayMs) throw pastRetryBudget(error, attempt, delay, maxTotalDelayMs);
    waitedMs += delay;
    await sleep(delay, request.signal);
  }
}

async function send(request: ProviderRequest): Promise<Response> {
  try {
    const init: RequestInit = { method: 'POST', headers: request.headers, body: request.body };
    if (request.signal) init.signal = request.signal;
    return await request.fetch(request.url, init);
  } catch (error) {
    if (request.signal?.aborted) throw new AgentError('ABORTED', 'Model request cancelled', { cause: error });
    const reason = redact(error instanceof Error ? error.message : String(error), request.secrets);
    throw new AgentError('MODEL_UNAVAILABLE', `Could not reach ${request.provider} at ${safeOrigin(request.url)}: ${reason}`, {
      details: { provider: request.provider, retryable: true },
    });
  }
}

function isJsonAnswer(response: Response): boolean {
  const type = response.headers.get('content-type') ?? '';
  return type.includes('application/json') && !type.includes('event-stream');
}

/** Maps a non-streaming answer (an error status, or JSON where a stream was expected) to an `AgentError`. */
async function errorFromResponse(request: ProviderRequest, response: Response): Promise<AgentError> {
  const text = await readLimitedText(response, MAX_ERROR_BODY_BYTES);
  let fields: ProviderErrorFields = {};
  try {
    fields = errorFieldsOf(JSON.parse(text));
  } catch {
    fields = { message: text.trim() || response.statusText };
  }
  if (response.ok) {
    fields.message = fields.message
      ? fields.message
      : `answered with JSON instead of an event stream (${text.slice(0, 120).trim() || 'empty body'})`;
  }
  const requestId = fields.requestId ?? response.headers.get('request-id') ?? response.headers.get('x-request-id') ?? undefined;
  return providerError(request.provider, response.ok ? undefined : response.status, { ...fields, requestId }, request.secrets, retryAfterMs(response.headers));
}

/** The error fields of an OpenAI, Anthropic, Chat Completions, vLLM or Ollama error payload. */
export function errorFieldsOf(payload: unknown): ProviderErrorFields {
  if (typeof payload !== 'object' || payload === null) return { message: typeof payload === 'string' ? payload : undefined };
  const record = payload as Record<string, unknown>;
  const requestId = stringOf(record.request_id);
  const inner = record.error;
  if (typeof inner === 'string') return { message: inner, requestId };
  if (typeof inner === 'object' && inner !== null) {
    const error = inner as Record<string, unknown>;
    return {
      type: stringOf(error.type),
      code: stringOf(error.code) ?? (typeof error.code === 'number' ? String(error.code) : undefined),
      message: stringOf(error.message),
      requestId,
    };
  }
  // A top-level error (vLLM's `{"object":"error","message",...}`, the SDK's flat error event).
  return { type: stringOf(record.type), code: stringOf(record.code), message: stringOf(record.message) ?? stringOf(record.detail), requestId };
}

const CONTEXT_LENGTH = /context[_ ]length|context window|maximum context|prompt is too long|exceeds? (?:the )?(?:available )?context|exceed_context_size/i;

/**
 * A coded `AgentError` for a provider failure. `status` is the HTTP status, or `undefined` for an
 * error inside a stream. Rate limits and overloads are transient (`RATE_LIMITED`,
 * `MODEL_UNAVAILABLE`) so a run pauses resumably; an overflowing context says so.
 */
export function providerError(
  provider: string,
  status: number | undefined,
  fields: ProviderErrorFields,
  secrets: readonly string[],
  retryAfter?: number,
): AgentError {
  const kind = fields.code ?? fields.type;
  const message = redact((fields.message ?? 'no message').slice(0, MAX_MESSAGE_CHARS * 2), secrets).slice(0, MAX_MESSAGE_CHARS);
  const contextLength = (status === undefined || status === 400 || status === 413) && (CONTEXT_LENGTH.test(kind ?? '') || CONTEXT_LENGTH.test(message));
  let code = codeOf(status, fields);
  let retryable = code === 'MODEL_UNAVAILABLE' || (code === 'RATE_LIMITED' && fields.code !== 'insufficient_quota' && fields.type !== 'insufficient_quota');
  if (contextLength) {
    code = 'MODEL_ERROR';
    retryable = false;
  }
  const where = status === undefined ? `${provider} stream error` : `${provider} ${status}`;
  const text = contextLength
    ? `${provider}: the conversation is longer than the model's context window (${message})`
    : `${where}${kind ? ` ${kind}` : ''}: ${message}`;
  const details: Record<string, unknown> = { provider, retryable };
  if (status !== undefined) details.status = status;
  if (fields.type !== undefined) details.providerType = fields.type;
  if (fields.code !== undefined) details.providerCode = fields.code;
  if (fields.requestId !== undefined) details.requestId = fields.requestId;
  if (retryAfter !== undefined) details.retryAfterMs = retryAfter;
  if (contextLength) details.reason = 'context_length_exceeded';
  return new AgentError(code, text, { details });
}

const CODE_BY_KIND: Record<string, ErrorCode> = {
  rate_limit_error: 'RATE_LIMITED',
  rate_limit_exceeded: 'RATE_LIMITED',
  insufficient_quota: 'RATE_LIMITED',
  overloaded_error: 'MODEL_UNAVAILABLE',
  api_error: 'MODEL_UNAVAILABLE',
  server_error: 'MODEL_UNAVAILABLE',
  service_unavailable: 'MODEL_UNAVAILABLE',
  timeout_error: 'MODEL_UNAVAILABLE',
  authentication_error: 'UNAUTHENTICATED',
  invalid_api_key: 'UNAUTHENTICATED',
  permission_error: 'UNAUTHENTICATED',
  not_found_error: 'NOT_FOUND',
  model_not_found: 'NOT_FOUND',
  request_too_large: 'PAYLOAD_TOO_LARGE',
};

function codeOf(httpStatus: number | undefined, fields: ProviderErrorFields): ErrorCode {
  const byKind = (fields.code !== undefined ? CODE_BY_KIND[fields.code] : undefined) ?? (fields.type !== undefined ? CODE_BY_KIND[fields.type] : undefined);
  if (byKind) return byKind;
  // An error inside a stream often names the HTTP status it stands for (`"code": 502`, OpenRouter, vLLM).
  const status = httpStatus ?? (fields.code !== undefined && /^[1-5]\d\d$/.test(fields.code) ? Number(fields.code) : undefined);
  if (status === undefined) return 'MODEL_ERROR';
  if (status === 429) return 'RATE_LIMITED';
  if (status === 500 || status === 502 || status === 503 || status === 504 || status === 529) return 'MODEL_UNAVAILABLE';
  if (status === 401 || status === 403) return 'UNAUTHENTICATED';
  if (status === 404) return 'NOT_FOUND';
  if (status === 413) return 'PAYLOAD_TOO_LARGE';
  return 'MODEL_ERROR';
}

const SECRET_PATTERNS: readonly RegExp[] = [
  /\bsk-[A-Za-z0-9_*.-]{6,}/g,
  /\bBearer\s+[A-Za-z0-9._~+/=-]+/gi,
  /(\/\/)[^/@\s:]+:[^/@\s]+@/g,
];

/** `text` with every secret, key-like token and URL credential replaced by `[redacted]`. */
export function redact(text: string, secrets: readonly string[]): string {
  let result = text;
  for (const secret of secrets) if (secret.length >= 4) result = result.split(secret).join('[redacted]');
  for (const pattern of SECRET_PATTERNS) result = result.replace(pattern, (match, slashes) => (typeof slashes === 'string' && match.startsWith('//') ? `${slashes}[redacted]@` : '[redacted]'));
  return result;
}

/** The scheme and host of `url`, without credentials or path, for messages. */
export function safeOrigin(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}`;
  } catch {
    return 'the configured URL';
  }
}

export async function readLimitedText(response: Response, limit: number): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      text += decoder.decode(value, { stream: true });
      if (size >= limit) break;
    }
  } catch {
    // A body that breaks off still explains itself with what arrived.
  } finally {
    void reader.cancel().catch(() => undefined);
  }
  return text + decoder.decode();
}

/** Where the reading of one stream stands, for error messages and limits. */
export interface StreamReadOptions {
  provider: string;
  limits: ProviderStreamLimits | undefined;
  signal: AbortSignal | undefined;
  /** Called with each line outside the event framing (see `SseParserOptions.onIgnoredLine`). */
  onIgnoredLine?: (line: string) => void;
  /**
   * Chooses, from the first byte of the body that is not whitespace, how the body becomes an
   * event stream: a {@link BodyReframer} for an answer in another format (a JSON array where
   * events were asked for), `undefined` to read the body as the event stream it is. Asked once;
   * never for a body of whitespace only. Without it the body is read as an event stream.
   */
  reframeFrom?: (firstByte: number) => BodyReframer | undefined;
}

/**
 * Turns the bytes of an answer in another format into event-stream bytes as they arrive: called
 * with each piece of the body in order, then once with `undefined` at its end (to flush what it
 * holds). It may return no bytes for a piece.
 */
export type BodyReframer = (bytes: Uint8Array | undefined) => Uint8Array;

/**
 * Reads an event stream with limits: no line longer than `maxLineBytes`, no answer longer than
 * `maxResponseBytes`, no silence longer than `idleTimeoutMs`. A broken or silent connection is
 * `MODEL_UNAVAILABLE` (transient); an oversized answer is `MODEL_ERROR`; an abort is `ABORTED`.
 * Leaving the loop early cancels the body.
 */
export async function* readSseEvents(response: Response, options: StreamReadOptions): AsyncGenerator<SseEvent> {
  const body = response.body;
  if (!body) throw new AgentError('MODEL_ERROR', `${options.provider} answered without a body`, { details: { provider: options.provider } });
  const maxLine = options.limits?.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  const maxTotal = options.limits?.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const idle = options.limits?.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  const reader = body.getReader();
  let queue: SseEvent[] = [];
  // The parser bounds each line (and an event's data) by its characters, which never outnumber its
  // bytes, so no text past the limit is ever held.
  const parser = createSseParser((event) => queue.push(event), {
    maxLineLength: maxLine,
    ...(options.onIgnoredLine ? { onIgnoredLine: options.onIgnoredLine } : {}),
  });
  const { reframeFrom } = options;
  let reframe: BodyReframer | undefined;
  // Whitespace read before the first other byte, held until the format is known (leading spaces
  // would otherwise start the event stream's first line).
  let held: Uint8Array[] | undefined = reframeFrom ? [] : undefined;
  const push = (bytes?: Uint8Array): void => {
    try {
      if (held !== undefined) {
        const first = bytes ? firstNonWhitespace(bytes) : -1;
        if (bytes && first === -1) {
          held.push(bytes);
          return;
        }
        reframe = first === -1 ? undefined : reframeFrom?.(first);
        const pending = held;
        held = undefined;
        if (!reframe) for (const piece of pending) parser.push(piece);
      }
      if (reframe) {
        const converted = reframe(bytes);
        if (converted.byteLength > 0) parser.push(converted);
        if (bytes) return;
      }
      if (bytes) parser.push(bytes);
      else parser.end();
    } catch (error) {
      if (!(error instanceof AgentError) || error.code !== 'PAYLOAD_TOO_LARGE') throw error;
      throw new AgentError('MODEL_ERROR', `${options.provider} sent a line longer than ${maxLine} characters`, {
        details: { provider: options.provider, limit: 'maxLineBytes' },
      });
    }
  };
  let total = 0;
  let lastActivity = Date.now();
  let timedOut = false;
  let ended = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const check = (): void => {
    const quiet = Date.now() - lastActivity;
    if (quiet >= idle) {
      timedOut = true;
      void reader.cancel().catch(() => undefined);
    } else {
      timer = setTimeout(check, idle - quiet);
    }
  };
  if (Number.isFinite(idle) && idle > 0) timer = setTimeout(check, idle);
  try {
    for (;;) {
      let result: ReadableStreamReadResult<Uint8Array>;
      try {
        result = await reader.read();
      } catch (error) {
        if (options.signal?.aborted) throw new AgentError('ABORTED', 'Model request cancelled', { cause: error });
        throw new AgentError('MODEL_UNAVAILABLE', `The connection to ${options.provider} broke off mid-answer`, {
          details: { provider: options.provider, retryable: true },
        });
      }
      if (timedOut) {
        throw new AgentError('MODEL_UNAVAILABLE', `${options.provider} sent nothing for ${Math.round(idle / 1000)} s; the answer was abandoned`, {
          details: { provider: options.provider, retryable: true },
        });
      }
      if (result.done) break;
      lastActivity = Date.now();
      const bytes = result.value;
      total += bytes.byteLength;
      if (total > maxTotal) {
        throw new AgentError('MODEL_ERROR', `${options.provider} sent an answer larger than ${maxTotal} bytes`, {
          details: { provider: options.provider, limit: 'maxResponseBytes' },
        });
      }
      push(bytes);
      if (queue.length > 0) {
        const ready = queue;
        queue = [];
        yield* ready;
      }
    }
    push();
    ended = true;
    yield* queue;
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    // A body read to its end has nothing to cancel; one left early is let go.
    if (ended) reader.releaseLock();
    else void reader.cancel().catch(() => undefined);
  }
}

/** The first byte of `bytes` that is not a space, tab, CR or LF; -1 when there is none. */
function firstNonWhitespace(bytes: Uint8Array): number {
  for (let index = 0; index < bytes.length; index += 1) {
    const byte = bytes[index] as number;
    if (byte !== 0x20 && byte !== 0x09 && byte !== 0x0d && byte !== 0x0a) return byte;
  }
  return -1;
}

/** Parses one event's JSON; garbage is a `MODEL_ERROR` that quotes a little of it. */
export function parseEventJson(provider: string, data: string, secrets: readonly string[]): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    throw new AgentError('MODEL_ERROR', `${provider} sent an event that is not JSON: ${redact(data.slice(0, 4096), secrets).slice(0, 120)}`, {
      details: { provider },
    });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new AgentError('MODEL_ERROR', `${provider} sent an event that is not a JSON object: ${redact(data.slice(0, 4096), secrets).slice(0, 120)}`, {
      details: { provider },
    });
  }
  return value as Record<string, unknown>;
}

/** A stream that stopped before its provider's end marker: transient, so the run can be resumed. */
export function truncatedStream(provider: string, missing: string): AgentError {
  return new AgentError('MODEL_UNAVAILABLE', `${provider} stopped answering before ${missing}`, { details: { provider, retryable: true } });
}

/** `executeStep` and the uploads, handed to `upstream` or refused with a clear message. */
export function mediaMethods(upstream: BackendClient | undefined, factory: string): Pick<BackendClient, 'executeStep' | 'uploadGeminiFile' | 'uploadBlobFile'> {
  const needsUpstream = (name: string) => (): Promise<never> =>
    Promise.reject(new AgentError('NOT_IMPLEMENTED', `${name} needs an upstream backend; pass options.upstream to ${factory}`));
  if (!upstream) {
    return { executeStep: needsUpstream('executeStep'), uploadGeminiFile: needsUpstream('uploadGeminiFile'), uploadBlobFile: needsUpstream('uploadBlobFile') };
  }
  return {
    executeStep: (body, signal) => upstream.executeStep(body, signal),
    uploadGeminiFile: (request, signal) => upstream.uploadGeminiFile(request, signal),
    uploadBlobFile: (id, signal) => upstream.uploadBlobFile(id, signal),
  };
}

function stringOf(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new AgentError('ABORTED', 'Model request cancelled'));
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new AgentError('ABORTED', 'Model request cancelled while waiting to retry'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
