import { AgentError, type ErrorCode } from '../errors/index.js';
import type { BackendClient } from '../ports/index.js';
import type { GenerateContentResponse } from '../protocol/gemini.js';
import { parseSseStream } from '../sse/index.js';
import { redactDetails, redactSecrets, redactUrl, secretsOfUrl } from './redact.js';

/** Retry policy for transient failures (429, 503) before the first chunk arrives. */
export interface RetryOptions {
  /** Attempts in total, the first included. Default 5. */
  maxAttempts?: number;
  /** First backoff; doubled each attempt, with jitter. Default 1000 ms. */
  baseDelayMs?: number;
  /** Longest single wait, also the cap on a server's `RetryInfo.retryDelay`. Default 60 000 ms. */
  maxDelayMs?: number;
}

/** Options of {@link createGeminiBackendClient}. */
export interface GeminiBackendClientOptions {
  /** Sent as `x-goog-api-key`. One of `apiKey` and `accessToken` is required. */
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
}

const DEFAULT_BASE_URL = 'https://generativelanguage.googleapis.com/v1beta';

/**
 * A `BackendClient` for the Gemini API, authenticated with an API key.
 *
 * @example
 * ```ts
 * const backend = createGeminiBackendClient({ apiKey: process.env.GEMINI_API_KEY!, fetch });
 * ```
 */
export function createGeminiBackendClient(options: GeminiBackendClientOptions): BackendClient {
  if (!options.apiKey && !options.accessToken) {
    throw new AgentError('UNAUTHENTICATED', 'createGeminiBackendClient needs options.apiKey or options.accessToken');
  }
  const baseUrl = (options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
  // What must never reach a message: the key, the token, credentials in the base URL, header values.
  const secrets = [options.apiKey, options.accessToken, ...secretsOfUrl(baseUrl), ...Object.values(options.headers ?? {})];
  const maxAttempts = options.retry?.maxAttempts ?? 5;
  const baseDelayMs = options.retry?.baseDelayMs ?? 1000;
  const maxDelayMs = options.retry?.maxDelayMs ?? 60_000;
  const needsUpstream = (name: string) => (): Promise<never> =>
    Promise.reject(
      new AgentError('NOT_IMPLEMENTED', `${name} needs an upstream backend; pass options.upstream to createGeminiBackendClient`),
    );
  return {
    async *streamGenerateContent(model, body, signal) {
      const url = `${baseUrl}/models/${encodeURIComponent(model)}:streamGenerateContent?alt=sse`;
      const requestBody = JSON.stringify(body);
      let response: Response | undefined;
      for (let attempt = 1; ; attempt += 1) {
        let error: AgentError;
        try {
          response = await send(options, url, requestBody, signal, secrets);
          if (response.ok) break;
          error = await toGeminiError(response, secrets);
        } catch (failure) {
          // Unreachable (connection refused or reset before an answer): as transient as a 503.
          if (!(failure instanceof AgentError) || failure.code !== 'MODEL_UNAVAILABLE') throw failure;
          error = failure;
        }
        const retryable = error.code === 'RATE_LIMITED' || error.code === 'MODEL_UNAVAILABLE';
        // The loop reads `attempts` and does not retry again what was retried here.
        if (!retryable || attempt >= maxAttempts) throw withAttempts(error, attempt);
        const hinted = retryDelayMs(error.details);
        const backoff = Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));
        await sleep(Math.min(maxDelayMs, hinted ?? backoff * (0.5 + Math.random() * 0.5)), signal);
      }
      if (!response.body) throw new AgentError('MODEL_UNAVAILABLE', 'Gemini answered without a body');
      try {
        for await (const event of parseSseStream(response.body)) {
          if (event.data.length === 0) continue;
          let chunk: GenerateContentResponse & { error?: GeminiErrorBody['error'] };
          try {
            chunk = JSON.parse(event.data) as typeof chunk;
          } catch {
            // Garbage in the stream (a proxy's error page, a cut line): worth another request.
            throw new AgentError('MODEL_UNAVAILABLE', `Gemini sent a chunk that is not JSON: ${redactSecrets(event.data.slice(0, 120), secrets)}`);
          }
          if (chunk.error) throw errorFromBody({ error: chunk.error }, chunk.error.code ?? 500, secrets);
          yield chunk;
        }
      } catch (error) {
        if (error instanceof AgentError) throw error;
        if (signal?.aborted) throw new AgentError('ABORTED', 'Model request cancelled', { cause: error });
        // The connection broke mid-answer ("terminated", a reset): transient.
        const reason = error instanceof Error ? error.message : String(error);
        throw new AgentError('MODEL_UNAVAILABLE', `The answer from Gemini broke off: ${redactSecrets(reason, secrets)}`, { cause: error });
      }
    },
    executeStep: options.upstream ? (body, signal) => options.upstream!.executeStep(body, signal) : needsUpstream('executeStep'),
    uploadGeminiFile: options.upstream
      ? (request, signal) => options.upstream!.uploadGeminiFile(request, signal)
      : needsUpstream('uploadGeminiFile'),
    uploadBlobFile: options.upstream ? (id, signal) => options.upstream!.uploadBlobFile(id, signal) : needsUpstream('uploadBlobFile'),
  };
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
        ...(options.apiKey ? { 'x-goog-api-key': options.apiKey } : { authorization: `Bearer ${options.accessToken}` }),
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

interface GeminiErrorBody {
  error: { code?: number; message?: string; status?: string; details?: unknown[] };
}

/** Maps a non-2xx Gemini answer (JSON even when the content type says SSE) to an `AgentError`. */
async function toGeminiError(response: Response, secrets: ReadonlyArray<string | undefined>): Promise<AgentError> {
  const text = await response.text();
  try {
    const parsed = JSON.parse(text) as GeminiErrorBody | GeminiErrorBody[];
    const body = Array.isArray(parsed) ? parsed[0] : parsed;
    if (body?.error) return errorFromBody(body, response.status, secrets);
  } catch {
    // Not JSON: fall through to the raw text.
  }
  const excerpt = redactSecrets(text.slice(0, 500), secrets) || response.statusText;
  return new AgentError(codeForStatus(response.status), `Gemini ${response.status}: ${excerpt}`, {
    details: { status: response.status },
  });
}

function withAttempts(error: AgentError, attempts: number): AgentError {
  return new AgentError(error.code, error.message, { cause: error.cause, details: { ...error.details, attempts } });
}

/** An error body from the provider; whatever of our request it echoes back is redacted. */
function errorFromBody(body: GeminiErrorBody, status: number, secrets: ReadonlyArray<string | undefined>): AgentError {
  const code = body.error.code ?? status;
  const message = typeof body.error.message === 'string' ? redactSecrets(body.error.message, secrets) : `Gemini error ${code}`;
  return new AgentError(codeForStatus(code), message, {
    details: {
      status: code,
      providerStatus: typeof body.error.status === 'string' ? redactSecrets(body.error.status, secrets) : body.error.status,
      providerDetails: redactDetails(body.error.details ?? [], secrets),
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

/** `RetryInfo.retryDelay` ("58s", "1.5s") in milliseconds, when the error carries one. */
function retryDelayMs(details: Record<string, unknown> | undefined): number | undefined {
  const list = details?.providerDetails;
  if (!Array.isArray(list)) return undefined;
  for (const item of list) {
    const entry = item as { '@type'?: string; retryDelay?: string };
    if (entry['@type']?.endsWith('google.rpc.RetryInfo') && typeof entry.retryDelay === 'string') {
      const seconds = Number.parseFloat(entry.retryDelay);
      if (Number.isFinite(seconds)) return seconds * 1000;
    }
  }
  return undefined;
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
