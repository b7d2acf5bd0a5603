import { AgentError } from '../errors/index.js';
import type { BackendClient, ExecuteStepResponse, UploadGeminiFileResponse } from '../ports/index.js';
import { createGeminiBackendClient, type RetryOptions } from './gemini-backend-client.js';
import { readBoundedBody } from './bounded-body.js';
import { readLimitedText } from './providers/provider-transport.js';
import { redactSecrets, secretsOfUrl } from './redact.js';

/** Options of {@link createUpstreamBackendClient}. */
export interface UpstreamBackendClientOptions {
  /** The Opal-style backend, e.g. `https://backend.example.com`. */
  baseUrl: string;
  fetch: typeof fetch;
  /** The user's token, forwarded as `Authorization: Bearer` and in upload bodies. */
  accessToken: string;
  /** The browser's `Origin`, forwarded when known. */
  origin?: string;
  /** Where model calls go (with the same bearer token). Default the Gemini API. */
  geminiBaseUrl?: string;
  retry?: RetryOptions;
  /**
   * The most bytes of an answer read (default 64 MiB, room for a base64 video); a longer one is
   * abandoned with an `UPSTREAM_ERROR` rather than held in memory whole.
   */
  maxResponseBytes?: number;
  /**
   * The longest silence (ms) waited for before a call gives up with `TIMEOUT`: until the answer
   * starts, and between two reads of it. Default 120 000, the reference clients' timeout.
   */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 120_000;

const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;
/** How much of an error body is read; the message quoted from it is cut to 500 characters (as the reference clients cut it). */
const MAX_ERROR_BODY_BYTES = 64 * 1024;
const MAX_ERROR_MESSAGE_LENGTH = 500;

/**
 * A `BackendClient` for an Opal-style backend: media steps and uploads go to the
 * backend, model calls go to Gemini as the user, all with the user's bearer token.
 *
 * @example
 * ```ts
 * const backend = createUpstreamBackendClient({ baseUrl: process.env.UPSTREAM_URL!, fetch, accessToken });
 * ```
 */
export function createUpstreamBackendClient(options: UpstreamBackendClientOptions): BackendClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  // What must never reach a message: the caller's token and credentials in the base URL.
  const secrets = [options.accessToken, ...secretsOfUrl(baseUrl)];
  const redact = (text: string): string => redactSecrets(text, secrets);
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    authorization: `Bearer ${options.accessToken}`,
    ...(options.origin ? { origin: options.origin } : {}),
  };
  const post = async (path: string, body: unknown, signal: AbortSignal | undefined): Promise<Record<string, unknown>> => {
    // A backend that stops answering would hold the call (and the run) forever.
    const controller = new AbortController();
    const cancel = () => controller.abort();
    if (signal?.aborted) cancel();
    signal?.addEventListener('abort', cancel, { once: true });
    let timedOut = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const wait = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        timedOut = true;
        controller.abort();
      }, timeoutMs);
    };
    const stopped = (): AgentError | undefined =>
      timedOut
        ? new AgentError('TIMEOUT', `${path} got no answer for ${timeoutMs} ms`)
        : signal?.aborted
          ? new AgentError('ABORTED', `${path} cancelled`)
          : undefined;
    wait();
    try {
      let response: Response;
      try {
        response = await options.fetch(`${baseUrl}${path}`, { method: 'POST', headers, body: JSON.stringify(body), signal: controller.signal });
      } catch (error) {
        const stop = stopped();
        if (stop) throw stop;
        // The cause is left out: network errors quote the URL, credentials included.
        const cause = (error as { cause?: { code?: unknown } }).cause;
        const reason = typeof cause?.code === 'string' ? cause.code : (error as Error).message;
        throw new AgentError('UPSTREAM_ERROR', `${path} failed: ${redact(String(reason))}`);
      }
      wait();
      if (!response.ok) {
        const text = await readLimitedText(response, MAX_ERROR_BODY_BYTES);
        let message: unknown;
        try {
          message = (JSON.parse(text) as { error?: { message?: unknown } } | null)?.error?.message;
        } catch {
          // Not JSON: the body itself is the message.
        }
        if (typeof message !== 'string' || message.length === 0) message = text.trim() || 'Unknown error';
        // Redacted before the cut, so a cut cannot leave part of a secret behind.
        const quoted = redact(message as string).slice(0, MAX_ERROR_MESSAGE_LENGTH);
        throw new AgentError('UPSTREAM_ERROR', `${path} request failed: ${quoted}`, { details: { status: response.status } });
      }
      let text: string;
      try {
        text = await readBody(path, response, maxResponseBytes, wait);
      } catch (error) {
        throw stopped() ?? error;
      }
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (error) {
        throw new AgentError('UPSTREAM_ERROR', `${path} answered with a body that is not JSON`, { cause: error });
      }
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        throw new AgentError('UPSTREAM_ERROR', `${path} answered with JSON that is not an object`);
      }
      return value as Record<string, unknown>;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', cancel);
    }
  };
  const gemini = createGeminiBackendClient({
    accessToken: options.accessToken,
    fetch: options.fetch,
    ...(options.geminiBaseUrl ? { baseUrl: options.geminiBaseUrl } : {}),
    ...(options.retry ? { retry: options.retry } : {}),
  });
  return {
    streamGenerateContent: (model, body, signal) => gemini.streamGenerateContent(model, body, signal),
    async executeStep(body, signal) {
      const response = (await post('/v1beta1/executeStep', body, signal)) as ExecuteStepResponse;
      if (typeof response.errorMessage === 'string' && response.errorMessage.length > 0) {
        throw new AgentError('UPSTREAM_ERROR', redact(response.errorMessage));
      }
      return response;
    },
    async uploadGeminiFile(request, signal) {
      const path = '/v1beta1/uploadGeminiFile';
      const response = await post(path, { ...request, accessToken: options.accessToken }, signal);
      // Without them the file would be sent to the model as a URI that names nothing.
      if (typeof response.fileUrl !== 'string' || response.fileUrl.length === 0) throw new AgentError('UPSTREAM_ERROR', `${path} answered without a fileUrl`);
      if (typeof response.mimeType !== 'string' || response.mimeType.length === 0) throw new AgentError('UPSTREAM_ERROR', `${path} answered without a mimeType`);
      const uploaded: UploadGeminiFileResponse = { fileUrl: response.fileUrl, mimeType: response.mimeType };
      return uploaded;
    },
    async uploadBlobFile(driveFileId, signal) {
      const response = await post('/v1beta1/uploadBlobFile', { driveFileId, accessToken: options.accessToken }, signal);
      if (typeof response.blobId !== 'string' || response.blobId.length === 0) throw new AgentError('UPSTREAM_ERROR', '/v1beta1/uploadBlobFile answered without a blobId');
      return `/board/blobs/${response.blobId}`;
    },
  };
}

/**
 * The body of `response` as text, refused once it passes `limit` bytes (the rest is not read).
 * `onRead` is called after each read.
 */
async function readBody(path: string, response: Response, limit: number, onRead: () => void): Promise<string> {
  const tooLarge = () => new AgentError('UPSTREAM_ERROR', `${path} answered with more than the ${limit} bytes an answer may have`);
  let bytes: Uint8Array;
  try {
    bytes = await readBoundedBody(response, limit, { tooLarge, onRead });
  } catch (error) {
    if (error instanceof AgentError) throw error;
    throw new AgentError('UPSTREAM_ERROR', `${path} broke off while answering`);
  }
  return new TextDecoder().decode(bytes);
}
