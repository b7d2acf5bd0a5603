import { AgentError, type ErrorCode } from '../errors/index.js';
import type { BackendClient } from '../ports/index.js';
import type { GenerateContentRequest, GenerateContentResponse } from '../protocol/gemini.js';
import { fieldsJson, isFixed } from '../protocol/fixed-json.js';
import { PrefixCacheTable, type CachedPrefix, type PrefixCache } from './prefix-cache.js';
import { redactDetails, redactSecrets, redactUrl, secretsOfUrl } from './redact.js';
import { createRequestSerializer } from '../model/request-json.js';
import type { SseEvent } from '../sse/index.js';
import { readLimitedText, readSseEvents, type BodyReframer, type ProviderStreamLimits } from './providers/provider-transport.js';
import { pastRetryBudget, withAttempts } from './retry-budget.js';
import { retryAfterMs } from './retry-after.js';

/**
 * Retry policy for transient failures (429, 503) before the first chunk arrives: as an HTTP
 * status, or as the first event of a 200 stream.
 */
export interface RetryOptions {
  /** Attempts in total, the first included. Default 5. */
  maxAttempts?: number;
  /** First backoff; doubled each attempt, with jitter. Default 1000 ms. */
  baseDelayMs?: number;
  /** Longest single wait, also the cap on a server's `RetryInfo.retryDelay`. Default 60 000 ms. */
  maxDelayMs?: number;
  /**
   * Most time spent waiting between attempts of one request, in total. A wait (asked for by the
   * server or by the backoff) that would go past it is not waited: the error is thrown at once,
   * marked `retryable: false` so the loop pauses the run instead of asking again. Keep it below
   * the loop's `idleTimeoutMs`, which counts these waits as model silence. Default 40 000 ms.
   */
  maxTotalDelayMs?: number;
}

/** Options of {@link createGeminiBackendClient}. */
export interface GeminiBackendClientOptions {
  /**
   * Sent as `x-goog-api-key`. One of `apiKey` and `accessToken` is required, unless `baseUrl`
   * points at a gateway that adds the credentials itself: then requests carry neither.
   */
  apiKey?: string;
  /** An OAuth token, sent as `Authorization: Bearer` (used when requests run as the user). */
  accessToken?: string;
  fetch: typeof fetch;
  /** Default `https://generativelanguage.googleapis.com/v1beta`; point it at a gateway or a local server. */
  baseUrl?: string;
  retry?: RetryOptions;
  /** Extra headers sent with every request. */
  headers?: Record<string, string>;
  /** Handles `executeStep` and uploads, which the Gemini API itself does not offer. */
  upstream?: BackendClient;
  /**
   * Caches each request's prefix (system instruction, tools and tool config) at Gemini as a
   * `cachedContents` resource and sends only its name, instead of the whole prefix on every
   * request. Pass one table from `createPrefixCache()` to share cached prefixes between clients,
   * or `false` to send every request whole. Default: a table of this client's own when `baseUrl`
   * is the Gemini API (prefixes under 16 KiB stay uncached), none for any other endpoint.
   */
  prefixCache?: PrefixCache | false;
  /**
   * Limits on an answer, as for the other providers: longest line (default 16 MiB; an image
   * arrives as one line), most bytes in all (default 64 MiB), longest silence between two reads
   * (default 10 minutes). Past one, the answer is abandoned with an error.
   */
  limits?: ProviderStreamLimits;
}

const DEFAULT_BASE_URL = 'https://generativelanguage.googleapis.com/v1beta';
/** How much of an error body is read, and of stray text kept from a stream. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/**
 * A `BackendClient` for the Gemini API, authenticated with an API key.
 *
 * @example
 * ```ts
 * const backend = createGeminiBackendClient({ apiKey: process.env.GEMINI_API_KEY!, fetch });
 * ```
 */
export function createGeminiBackendClient(options: GeminiBackendClientOptions): BackendClient {
  const baseUrl = (options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
  // Google's own endpoint answers nothing without a credential; a gateway may add its own.
  if (!options.apiKey && !options.accessToken && baseUrl === DEFAULT_BASE_URL) {
    throw new AgentError('UNAUTHENTICATED', 'createGeminiBackendClient needs options.apiKey or options.accessToken (or a baseUrl of a gateway that adds them)');
  }
  // What must never reach a message: the key, the token, credentials in the base URL, header values.
  const secrets = [options.apiKey, options.accessToken, ...secretsOfUrl(baseUrl), ...Object.values(options.headers ?? {})];
  const maxAttempts = options.retry?.maxAttempts ?? 5;
  const baseDelayMs = options.retry?.baseDelayMs ?? 1000;
  const maxDelayMs = options.retry?.maxDelayMs ?? 60_000;
  const maxTotalDelayMs = options.retry?.maxTotalDelayMs ?? 40_000;
  const serialize = createRequestSerializer();
  const prefixCache = prefixCacheOf(options.prefixCache, baseUrl);
  // Cached prefixes belong to a project: a table shared by clients keeps each credential's apart.
  const identity = `${baseUrl}\n${options.apiKey ?? ''}\n${options.accessToken ?? ''}`;
  const prefixClient: PrefixClient = { baseUrl, identity };
  const jsonRequest = (method: string, url: string, body: unknown, signal?: AbortSignal): Promise<unknown> =>
    sendJson(options, method, url, body, signal, secrets);
  const needsUpstream = (name: string) => (): Promise<never> =>
    Promise.reject(
      new AgentError('NOT_IMPLEMENTED', `${name} needs an upstream backend; pass options.upstream to createGeminiBackendClient`),
    );
  return {
    async *streamGenerateContent(model, body, signal) {
      // `models/gemini-2.5-flash` (the resource name ListModels gives) is the model `gemini-2.5-flash`.
      const modelId = model.startsWith('models/') ? model.slice('models/'.length) : model;
      const url = `${baseUrl}/models/${encodeURIComponent(modelId)}:streamGenerateContent?alt=sse`;
      // Waited between attempts so far, over both requests when a cached prefix is refused.
      let waitedMs = 0;
      // An answer is opened when its first chunk is in: an error Gemini sends as the first event of
      // a 200 stream (a 429 or 503 it decided on after answering) is retried like the same HTTP
      // status, in the same budget. Once a chunk was yielded, asking again would repeat its parts.
      const open = async (requestBody: string): Promise<OpenedAnswer> => {
        for (let attempt = 1; ; attempt += 1) {
          const sent = await reach(options, url, requestBody, signal, secrets);
          const outcome = sent instanceof AgentError ? sent : sent.ok ? await openAnswer(sent, options.limits, signal, secrets) : await toGeminiError(sent, secrets);
          if (!(outcome instanceof AgentError)) return outcome;
          const error = outcome;
          // A daily quota does not come back within any wait worth making.
          const dailyQuota = dailyQuotaError(error, secrets);
          if (dailyQuota) throw withAttempts(dailyQuota, attempt);
          const retryable = error.code === 'RATE_LIMITED' || error.code === 'MODEL_UNAVAILABLE';
          // The loop reads `attempts` and does not retry again what was retried here.
          if (!retryable || attempt >= maxAttempts) throw withAttempts(error, attempt);
          const hinted = retryDelayMs(error.details);
          const backoff = Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));
          const delay = Math.min(maxDelayMs, hinted ?? backoff * (0.5 + Math.random() * 0.5));
          // Asking again sooner would only spend the quota.
          if (waitedMs + delay > maxTotalDelayMs) throw pastRetryBudget(error, attempt, delay, maxTotalDelayMs);
          waitedMs += delay;
          await sleep(delay, signal);
        }
      };
      const cached = prefixCache ? await cachedPrefixOf(prefixCache, prefixClient, model, body, jsonRequest, signal) : undefined;
      let opened: OpenedAnswer;
      if (cached) {
        try {
          opened = await open(serialize(withCachedPrefix(body, cached.name)));
        } catch (error) {
          // A cached prefix the provider no longer knows (or refuses): this request and the next
          // ones go whole. Rate limits and outages are not the cache's fault.
          if (!isCacheFailure(error)) throw error;
          prefixCache?.invalidate(cached.key, cached.name);
          opened = await open(serialize(body));
        }
      } else {
        opened = await open(serialize(body));
      }
      const { events, answer } = opened;
      // Read here rather than through another generator: each chunk passes one generator less.
      try {
        yield opened.first;
        for await (const event of events) {
          if (event.data.length > 0) yield answer.chunk(event.data);
        }
      } finally {
        // A consumer that leaves at the first chunk lets the answer go too.
        await events.return(undefined);
      }
      answer.end();
    },
    executeStep: options.upstream ? (body, signal) => options.upstream!.executeStep(body, signal) : needsUpstream('executeStep'),
    uploadGeminiFile: options.upstream
      ? (request, signal) => options.upstream!.uploadGeminiFile(request, signal)
      : needsUpstream('uploadGeminiFile'),
    uploadBlobFile: options.upstream ? (id, signal) => options.upstream!.uploadBlobFile(id, signal) : needsUpstream('uploadBlobFile'),
  };
}

/** An answer whose first chunk is in: that chunk, the events after it, and what they say. */
interface OpenedAnswer {
  first: GenerateContentResponse;
  events: AsyncGenerator<SseEvent>;
  answer: AnswerCheck;
}

/**
 * Reads a 200 answer up to its first chunk. An API error in place of that chunk (on the first
 * `data:` event, or sent bare as the whole body) is returned and the answer let go, for the
 * caller to retry or throw as it would the same HTTP status; any other failure is thrown. A
 * server that ignored `alt=sse` answers one JSON array of the same chunks: it is read as the
 * events it stands for, under the same limits, whether it is labelled JSON or (as some proxies
 * do) an event stream, where it is told apart by its first byte, `[`.
 */
async function openAnswer(
  response: Response,
  limits: ProviderStreamLimits | undefined,
  signal: AbortSignal | undefined,
  secrets: ReadonlyArray<string | undefined>,
): Promise<OpenedAnswer | AgentError> {
  if (!response.body) throw new AgentError('MODEL_UNAVAILABLE', 'Gemini answered without a body');
  const answer = answerCheck(secrets);
  const reframeFrom = isJsonAnswer(response) ? jsonArrayReframer : jsonArrayReframerFor;
  const events = readSseEvents(response, { provider: 'Gemini', limits, signal, onIgnoredLine: answer.onIgnoredLine, reframeFrom });
  try {
    for (;;) {
      const next = await events.next();
      if (next.done) {
        const error = answer.bareError();
        if (error) return error;
        // An answer without a chunk: `end` says it broke off.
        answer.end();
        throw new AgentError('MODEL_UNAVAILABLE', 'Gemini sent an answer without any chunk');
      }
      if (next.value.data.length === 0) continue;
      const first = answer.first(next.value.data);
      if (first instanceof AgentError) await events.return(undefined);
      return first instanceof AgentError ? first : { first, events, answer };
    }
  } catch (error) {
    await events.return(undefined);
    throw error;
  }
}

interface AnswerCheck {
  onIgnoredLine(line: string): void;
  /** The first event's chunk, or the API error sent in its place. */
  first(data: string): GenerateContentResponse | AgentError;
  /** A later event's chunk; an API error on it is thrown. */
  chunk(data: string): GenerateContentResponse;
  /** The API error sent bare outside the event framing, if any. */
  bareError(): AgentError | undefined;
  /** Throws what the end of the answer says: a bare API error, or that it broke off. */
  end(): void;
}

/**
 * What an answer's events say as they are read: each `data:` event's chunk, with an error object
 * on one raised as the API error it is; at the end, the API error Gemini sent bare outside the
 * event framing (as both official SDKs expect), or a transient `MODEL_UNAVAILABLE` when no
 * candidate carried a `finishReason` (a connection cut between events) and no blocked prompt was
 * reported. An API error after a chunk is classified as its HTTP status would be: a daily quota
 * is marked not worth retrying, and says so.
 */
function answerCheck(secrets: ReadonlyArray<string | undefined>): AnswerCheck {
  // Text outside the event framing; none in a sound answer, so a sound chunk pays nothing for it.
  let stray: string[] | undefined;
  let strayLength = 0;
  let finished = false;
  return {
    onIgnoredLine(line) {
      if (strayLength > MAX_ERROR_BODY_BYTES) return;
      (stray ??= []).push(line);
      strayLength += line.length + 1;
    },
    first(data) {
      const chunk = parseChunk(data, secrets);
      const error = apiErrorOf(chunk, secrets);
      if (error) return error;
      finished = endsAnswer(chunk);
      return chunk;
    },
    chunk(data) {
      const chunk = parseChunk(data, secrets);
      const error = apiErrorOf(chunk, secrets);
      if (error) throw dailyQuotaError(error, secrets) ?? error;
      if (!finished) finished = endsAnswer(chunk);
      return chunk;
    },
    bareError() {
      return bareErrorOf(stray, secrets);
    },
    end() {
      const error = bareErrorOf(stray, secrets);
      if (error) throw dailyQuotaError(error, secrets) ?? error;
      if (!finished) {
        throw new AgentError('MODEL_UNAVAILABLE', 'The answer from Gemini broke off before it finished (the stream ended without a finishReason)', {
          details: { provider: 'Gemini', retryable: true },
        });
      }
    },
  };
}

/**
 * One event's JSON. Any JSON value is passed on: the turn reader refuses what is not an object,
 * naming it.
 */
function parseChunk(data: string, secrets: ReadonlyArray<string | undefined>): GenerateContentResponse {
  try {
    return JSON.parse(data) as GenerateContentResponse;
  } catch {
    // Garbage in the stream (a proxy's error page, a cut line): worth another request.
    throw new AgentError('MODEL_UNAVAILABLE', `Gemini sent a chunk that is not JSON: ${redactSecrets(data.slice(0, 4096), secrets).slice(0, 120)}`);
  }
}

/** The API error an event's JSON is (an error object, alone or as an array's first element), if any. */
function apiErrorOf(chunk: GenerateContentResponse, secrets: ReadonlyArray<string | undefined>): AgentError | undefined {
  if (typeof chunk !== 'object' || chunk === null) return undefined;
  const error: unknown = Array.isArray(chunk) ? (chunk[0] as { error?: unknown } | undefined)?.error : (chunk as { error?: unknown }).error;
  if (typeof error === 'string') return errorFromBody({ error: { message: error } }, 500, secrets);
  if (typeof error === 'object' && error !== null) return errorFromBody({ error } as GeminiErrorBody, 500, secrets);
  return undefined;
}

/**
 * Whether a chunk ends the answer: the answer's candidate (index 0) with a `finishReason`, or a
 * blocked prompt (a chunk without candidates, passed on for the loop to report).
 */
function endsAnswer(chunk: GenerateContentResponse): boolean {
  if (typeof chunk !== 'object' || chunk === null) return false;
  const candidates = chunk.candidates;
  if (Array.isArray(candidates)) {
    for (const candidate of candidates) {
      if (candidate?.finishReason !== undefined && (candidate.index === undefined || candidate.index === 0)) return true;
    }
  }
  return chunk.promptFeedback?.blockReason !== undefined;
}

/** Whether an answer is labelled JSON rather than an event stream (a server that ignored `alt=sse`). */
function isJsonAnswer(response: Response): boolean {
  const type = response.headers.get('content-type') ?? '';
  return type.includes('json') && !type.includes('event-stream');
}

/**
 * How an answer labelled as an event stream is read, from its first byte: an event stream starts
 * with a field (`data:`) or a comment (`:`), never `[`; a body that does is the JSON array of a
 * server that ignored `alt=sse`, passed on by a proxy that labelled it an event stream.
 */
function jsonArrayReframerFor(firstByte: number): BodyReframer | undefined {
  return firstByte === 0x5b /* [ */ ? jsonArrayReframer() : undefined;
}

/**
 * The event stream a `streamGenerateContent` answer without `alt=sse` stands for: that answer is
 * one JSON array written piece by piece (`[`, a pretty-printed chunk, `,`, the next, ..., `]`),
 * and each of its objects (or a lone top-level object, such as a bare error) becomes one `data:`
 * event as its bytes arrive, so the reader's limits and timeouts apply as to any event stream.
 * A line break outside a JSON string is only whitespace, so it is written as a space.
 */
function jsonArrayReframer(): BodyReframer {
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let depth = 0;
  let inArray = false;
  /** The depth the current object started at; -1 between objects. */
  let objectDepth = -1;
  let inString = false;
  let escaped = false;
  const convert = (text: string): string => {
    let out = '';
    let start = objectDepth === -1 ? -1 : 0;
    for (let index = 0; index < text.length; index += 1) {
      const code = text.charCodeAt(index);
      if (inString) {
        if (escaped) escaped = false;
        else if (code === 92 /* backslash */) escaped = true;
        else if (code === 34 /* " */) inString = false;
        continue;
      }
      if (code === 34) {
        inString = true;
      } else if (code === 123 /* { */ || code === 91 /* [ */) {
        if (objectDepth === -1 && code === 123 && (depth === 0 || (depth === 1 && inArray))) {
          objectDepth = depth;
          start = index;
          out += 'data: ';
        }
        if (depth === 0 && code === 91) inArray = true;
        depth += 1;
      } else if (code === 125 /* } */ || code === 93 /* ] */) {
        depth -= 1;
        if (depth === objectDepth) {
          out += `${text.slice(start, index + 1).replace(/[\r\n]/g, ' ')}\n\n`;
          objectDepth = -1;
          start = -1;
        }
      }
    }
    if (start !== -1) out += text.slice(start).replace(/[\r\n]/g, ' ');
    return out;
  };
  return (bytes) => encoder.encode(convert(bytes ? decoder.decode(bytes, { stream: true }) : decoder.decode()));
}

/** The API error in text sent outside the event framing (`{"error": {...}}`, or it in an array). */
function bareErrorOf(stray: string[] | undefined, secrets: ReadonlyArray<string | undefined>): AgentError | undefined {
  if (stray === undefined) return undefined;
  let parsed: GeminiErrorBody | GeminiErrorBody[];
  try {
    parsed = JSON.parse(stray.join('\n')) as typeof parsed;
  } catch {
    return undefined;
  }
  const body = Array.isArray(parsed) ? parsed[0] : parsed;
  if (!body?.error || typeof body.error !== 'object') return undefined;
  return errorFromBody(body, body.error.code ?? 500, secrets);
}

/**
 * Whether a request naming a cached prefix failed because of it: the prefix is gone or not this
 * credential's (404, 403), or Gemini refused it (a 400 that names the cached content). Such a
 * request is sent again whole.
 */
function isCacheFailure(error: unknown): boolean {
  if (!(error instanceof AgentError)) return false;
  if (error.code === 'NOT_FOUND' || error.code === 'UNAUTHENTICATED') return true;
  return error.code === 'MODEL_ERROR' && /cache/i.test(error.message);
}
/** How long creating or extending a cached prefix may take before the request goes whole. */
const CACHE_CALL_TIMEOUT_MS = 10_000;

function prefixCacheOf(option: PrefixCache | false | undefined, baseUrl: string): PrefixCacheTable | undefined {
  if (option === false) return undefined;
  if (option instanceof PrefixCacheTable) return option;
  if (option !== undefined) throw new AgentError('BAD_REQUEST', 'prefixCache: expected a table from createPrefixCache() or false');
  // Only the Gemini API itself is known to offer `cachedContents`; gateways and local servers may not.
  return baseUrl === DEFAULT_BASE_URL ? new PrefixCacheTable() : undefined;
}

type JsonRequest = (method: string, url: string, body: unknown, signal?: AbortSignal) => Promise<unknown>;

/** What a client keeps of the prefix it looked up last, when its parts are fixed values. */
interface LastPrefix {
  model: string;
  systemInstruction: unknown;
  tools: unknown;
  toolConfig: unknown;
  /** `undefined`: too small to cache. */
  key: string | undefined;
}

interface PrefixClient {
  baseUrl: string;
  identity: string;
  last?: LastPrefix;
}

/**
 * The table key of a request's prefix: the client, the model and the prefix's exact JSON, or
 * `undefined` when the prefix is too small to cache. A run sends the same fixed (frozen)
 * instruction and tools with every request, so the key of the last prefix is used again as it is
 * (the same string, whose hash the table computed once) instead of being built anew.
 */
function prefixKeyOf(client: PrefixClient, model: string, prefix: Record<string, unknown>, minPrefixBytes: number): string | undefined {
  const { systemInstruction, tools, toolConfig } = prefix;
  const { last } = client;
  if (last !== undefined && last.model === model && last.systemInstruction === systemInstruction && last.tools === tools && last.toolConfig === toolConfig) {
    return last.key;
  }
  const prefixJson = fieldsJson(prefix);
  const key = prefixJson.length < minPrefixBytes ? undefined : `${client.identity}\n${model}\n${prefixJson}`;
  const fixed = [systemInstruction, tools, toolConfig].every((part) => part === undefined || isFixed(part));
  client.last = fixed ? { model, systemInstruction, tools, toolConfig, key } : undefined;
  return key;
}

/**
 * The cached prefix a request can use instead of its own system instruction, tools and tool
 * config, created at Gemini when there is none yet; `undefined` when the request goes whole. The
 * key is the exact JSON of the request's own prefix, so a cached prefix is only ever used by
 * requests that declare the very same instruction and tools.
 */
async function cachedPrefixOf(
  table: PrefixCacheTable,
  client: PrefixClient,
  model: string,
  body: GenerateContentRequest,
  jsonRequest: JsonRequest,
  signal: AbortSignal | undefined,
): Promise<{ key: string; name: string } | undefined> {
  if (body.cachedContent !== undefined || (body.tools === undefined && body.systemInstruction === undefined)) return undefined;
  const prefix: Record<string, unknown> = {};
  if (body.systemInstruction !== undefined) prefix.systemInstruction = body.systemInstruction;
  if (body.tools !== undefined) prefix.tools = body.tools;
  if (body.toolConfig !== undefined) prefix.toolConfig = body.toolConfig;
  const modelName = model.startsWith('models/') ? model : `models/${model}`;
  const key = prefixKeyOf(client, modelName, prefix, table.minPrefixBytes);
  if (key === undefined) return undefined;
  const ttl = `${Math.round(table.ttlMs / 1000)}s`;
  const { baseUrl } = client;
  const create = async (): Promise<CachedPrefix> =>
    cachedPrefixFrom(await jsonRequest('POST', `${baseUrl}/cachedContents`, { model: modelName, ...prefix, contents: [], ttl }, AbortSignal.timeout(CACHE_CALL_TIMEOUT_MS)));
  const extend = async (name: string): Promise<CachedPrefix> =>
    cachedPrefixFrom(await jsonRequest('PATCH', `${baseUrl}/${name}?updateMask=ttl`, { ttl }, AbortSignal.timeout(CACHE_CALL_TIMEOUT_MS)));
  const resolved = table.resolve(key, create, extend);
  const name = typeof resolved === 'string' || resolved === undefined ? resolved : await untilAborted(resolved, signal);
  return name === undefined ? undefined : { key, name };
}

/** The name and expiry of a `cachedContents` resource as Gemini describes it. */
function cachedPrefixFrom(value: unknown): CachedPrefix {
  const resource = (value ?? {}) as { name?: unknown; expireTime?: unknown };
  if (typeof resource.name !== 'string' || !/^cachedContents\/[A-Za-z0-9_-]{1,200}$/.test(resource.name)) {
    throw new AgentError('MODEL_ERROR', 'Gemini answered a cachedContents call without a valid name');
  }
  const expiresAt = typeof resource.expireTime === 'string' ? Date.parse(resource.expireTime) : Number.NaN;
  return Number.isFinite(expiresAt) ? { name: resource.name, expiresAt } : { name: resource.name };
}

/** `body` with its prefix replaced by the name of the cached one (Gemini refuses both together). */
function withCachedPrefix(body: GenerateContentRequest, name: string): GenerateContentRequest {
  const { systemInstruction: _instruction, tools: _tools, toolConfig: _toolConfig, ...rest } = body;
  return { ...rest, cachedContent: name };
}

function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(new AgentError('ABORTED', 'Model request cancelled'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new AgentError('ABORTED', 'Model request cancelled'));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** One JSON call to the Gemini API besides streaming (the `cachedContents` resource). */
async function sendJson(
  options: GeminiBackendClientOptions,
  method: string,
  url: string,
  body: unknown,
  signal: AbortSignal | undefined,
  secrets: ReadonlyArray<string | undefined>,
): Promise<unknown> {
  let response: Response;
  try {
    response = await options.fetch(url, {
      method,
      headers: {
        'content-type': 'application/json',
        ...credentialHeaders(options),
        ...options.headers,
      },
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });
  } catch (error) {
    throw new AgentError('MODEL_UNAVAILABLE', `Could not reach Gemini at ${redactUrl(url.split('?')[0] ?? url)}: ${redactSecrets(networkReason(error), secrets)}`);
  }
  if (!response.ok) throw await toGeminiError(response, secrets);
  try {
    return await response.json();
  } catch {
    throw new AgentError('MODEL_ERROR', `Gemini answered ${method} ${redactUrl(url.split('?')[0] ?? url)} with a body that is not JSON`);
  }
}

/** The key or the token as Google takes them; nothing for a gateway that adds its own. */
function credentialHeaders(options: GeminiBackendClientOptions): Record<string, string> {
  if (options.apiKey) return { 'x-goog-api-key': options.apiKey };
  return options.accessToken ? { authorization: `Bearer ${options.accessToken}` } : {};
}

async function send(
  options: GeminiBackendClientOptions,
  url: string,
  body: string,
  signal: AbortSignal | undefined,
  secrets: ReadonlyArray<string | undefined>,
): Promise<Response> {
  try {
    return await options.fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...credentialHeaders(options),
        ...options.headers,
      },
      body,
      ...(signal ? { signal } : {}),
    });
  } catch (error) {
    if (signal?.aborted) throw new AgentError('ABORTED', 'Model request cancelled');
    // The cause is left out: network errors quote the URL, credentials included.
    const reason = redactSecrets(networkReason(error), secrets);
    throw new AgentError('MODEL_UNAVAILABLE', `Could not reach Gemini at ${redactUrl(url.split('?')[0] ?? url)}: ${reason}`);
  }
}

/**
 * Sends one streaming request: the response, or the `MODEL_UNAVAILABLE` of a Gemini that could not
 * be reached (connection refused or reset before an answer), which is as transient as a 503.
 */
async function reach(
  options: GeminiBackendClientOptions,
  url: string,
  body: string,
  signal: AbortSignal | undefined,
  secrets: ReadonlyArray<string | undefined>,
): Promise<Response | AgentError> {
  try {
    return await send(options, url, body, signal, secrets);
  } catch (failure) {
    if (!(failure instanceof AgentError) || failure.code !== 'MODEL_UNAVAILABLE') throw failure;
    return failure;
  }
}

interface GeminiErrorBody {
  error: { code?: number; message?: string; status?: string; details?: unknown[] };
}

/**
 * Maps a non-2xx Gemini answer (JSON even when the content type says SSE) to an `AgentError`.
 * Only the first 64 KiB of the body are read: the rest never explains more. A `Retry-After`
 * header (a gateway's, where Gemini itself would send `RetryInfo`) lands in `retryAfterMs`.
 */
async function toGeminiError(response: Response, secrets: ReadonlyArray<string | undefined>): Promise<AgentError> {
  const text = await readLimitedText(response, MAX_ERROR_BODY_BYTES);
  const retryAfter = retryAfterMs(response.headers);
  const extra = retryAfter === undefined ? undefined : { retryAfterMs: retryAfter };
  try {
    const parsed = JSON.parse(text) as GeminiErrorBody | GeminiErrorBody[];
    const body = Array.isArray(parsed) ? parsed[0] : parsed;
    if (body?.error) return errorFromBody(body, response.status, secrets, extra);
  } catch {
    // Not JSON (or cut at the limit): fall through to the raw text.
  }
  // Redacted whole, then cut, so no secret is cut in two and half of it kept.
  const excerpt = redactSecrets(text, secrets).slice(0, 500) || redactSecrets(response.statusText, secrets);
  return new AgentError(codeForStatus(response.status), `Gemini ${response.status}: ${excerpt}`, {
    details: { status: response.status, ...extra },
  });
}

/** An error body from the provider; whatever of our request it echoes back is redacted. */
function errorFromBody(
  body: GeminiErrorBody,
  status: number,
  secrets: ReadonlyArray<string | undefined>,
  extra?: Record<string, unknown>,
): AgentError {
  const code = typeof body.error.code === 'number' ? body.error.code : status;
  const message = typeof body.error.message === 'string' ? redactSecrets(body.error.message, secrets) : `Gemini error ${code}`;
  return new AgentError(codeForStatus(code), message, {
    details: {
      status: code,
      providerStatus: typeof body.error.status === 'string' ? redactSecrets(body.error.status, secrets) : body.error.status,
      providerDetails: redactDetails(Array.isArray(body.error.details) ? body.error.details : [], secrets),
      ...extra,
    },
  });
}

/** The short reason of a failed fetch: undici hides it in `cause.code`. */
function networkReason(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause;
  if (typeof cause?.code === 'string') return cause.code;
  if (typeof cause?.message === 'string') return cause.message;
  return error instanceof Error ? error.message : String(error);
}

function codeForStatus(status: number): ErrorCode {
  if (status === 429) return 'RATE_LIMITED';
  if (status === 503) return 'MODEL_UNAVAILABLE';
  if (status === 404) return 'NOT_FOUND';
  if (status === 401 || status === 403) return 'UNAUTHENTICATED';
  return 'MODEL_ERROR';
}

/**
 * The wait the server asked for, in milliseconds: `RetryInfo.retryDelay` ("58s", "1.5s"), else
 * a `Retry-After` header.
 */
function retryDelayMs(details: Record<string, unknown> | undefined): number | undefined {
  const list = details?.providerDetails;
  if (Array.isArray(list)) {
    for (const item of list) {
      const entry = (item ?? {}) as { '@type'?: unknown; retryDelay?: unknown };
      if (typeof entry['@type'] === 'string' && entry['@type'].endsWith('google.rpc.RetryInfo') && typeof entry.retryDelay === 'string') {
        const seconds = Number.parseFloat(entry.retryDelay);
        if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
      }
    }
  }
  const header = details?.retryAfterMs;
  return typeof header === 'number' ? header : undefined;
}

/**
 * `error` as a 429 of a daily quota is reported, whether it came as the HTTP status or inside the
 * stream: marked `retryable: false` (the loop pauses rather than asking again), saying why;
 * `undefined` for any other error.
 */
function dailyQuotaError(error: AgentError, secrets: ReadonlyArray<string | undefined>): AgentError | undefined {
  const quota = error.code === 'RATE_LIMITED' ? dailyQuotaOf(error.details) : undefined;
  if (quota === undefined) return undefined;
  return new AgentError('RATE_LIMITED', `The daily Gemini quota is used up (${redactSecrets(quota, secrets)}); retrying before it resets will not help: ${error.message}`, {
    cause: error.cause,
    details: { ...error.details, retryable: false },
  });
}

/** The `quotaId` of a daily quota a 429 names in its `QuotaFailure`, if any. */
function dailyQuotaOf(details: Record<string, unknown> | undefined): string | undefined {
  const list = details?.providerDetails;
  if (!Array.isArray(list)) return undefined;
  for (const item of list) {
    const entry = (item ?? {}) as { '@type'?: unknown; violations?: unknown };
    if (typeof entry['@type'] !== 'string' || !entry['@type'].endsWith('google.rpc.QuotaFailure') || !Array.isArray(entry.violations)) continue;
    for (const violation of entry.violations) {
      const quotaId = (violation as { quotaId?: unknown } | null)?.quotaId;
      if (typeof quotaId === 'string' && quotaId.includes('PerDay')) return quotaId;
    }
  }
  return undefined;
}

/** Waits `ms` milliseconds; rejects with `ABORTED` when `signal` aborts first. */
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
