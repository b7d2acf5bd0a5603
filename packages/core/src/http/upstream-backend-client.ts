import { AgentError } from '../errors/index.js';
import type { BackendClient, ExecuteStepResponse, UploadGeminiFileResponse } from '../ports/index.js';
import { createGeminiBackendClient, type RetryOptions } from './gemini-backend-client.js';
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
}

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
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    authorization: `Bearer ${options.accessToken}`,
    ...(options.origin ? { origin: options.origin } : {}),
  };
  const post = async (path: string, body: unknown, signal: AbortSignal | undefined): Promise<Record<string, unknown>> => {
    let response: Response;
    try {
      response = await options.fetch(`${baseUrl}${path}`, { method: 'POST', headers, body: JSON.stringify(body), ...(signal ? { signal } : {}) });
    } catch (error) {
      if (signal?.aborted) throw new AgentError('ABORTED', `${path} cancelled`);
      // The cause is left out: network errors quote the URL, credentials included.
      const cause = (error as { cause?: { code?: unknown } }).cause;
      const reason = typeof cause?.code === 'string' ? cause.code : (error as Error).message;
      throw new AgentError('UPSTREAM_ERROR', `${path} failed: ${redact(String(reason))}`);
    }
    const text = await response.text();
    if (!response.ok) {
      let message = 'Unknown error';
      try {
        message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? text.slice(0, 500);
      } catch {
        message = text.slice(0, 500) || message;
      }
      throw new AgentError('UPSTREAM_ERROR', `${path} request failed: ${redact(String(message))}`, { details: { status: response.status } });
    }
    try {
      return JSON.parse(text) as Record<string, unknown>;
    } catch (error) {
      throw new AgentError('UPSTREAM_ERROR', `${path} answered with a body that is not JSON`, { cause: error });
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
      return (await post('/v1beta1/uploadGeminiFile', { ...request, accessToken: options.accessToken }, signal)) as unknown as UploadGeminiFileResponse;
    },
    async uploadBlobFile(driveFileId, signal) {
      const response = await post('/v1beta1/uploadBlobFile', { driveFileId, accessToken: options.accessToken }, signal);
      if (typeof response.blobId !== 'string') throw new AgentError('UPSTREAM_ERROR', '/v1beta1/uploadBlobFile answered without a blobId');
      return `/board/blobs/${response.blobId}`;
    },
  };
}
