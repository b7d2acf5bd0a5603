import type { GenerateContentRequest, GenerateContentResponse } from '../protocol/gemini.js';

/** Body of an Opal `executeStep` call; the snake/camel mix is the wire's. */
export interface ExecuteStepRequest {
  planStep: {
    stepName: string;
    modelApi: string;
    inputParameters: string[];
    systemPrompt?: string;
    options?: Record<string, unknown>;
    output: string;
    [key: string]: unknown;
  };
  execution_inputs: Record<string, { chunks: Array<{ mimetype: string; data: string; substreamName?: string }> }>;
  enableG1Quota?: boolean;
  [key: string]: unknown;
}

/** Raw `executeStep` response: `executionOutputs[output].chunks`, or an `errorMessage`. */
export interface ExecuteStepResponse {
  executionOutputs?: Record<string, { chunks?: Array<{ mimetype: string; data: string; substreamName?: string }> }>;
  errorMessage?: string;
  [key: string]: unknown;
}

/** What `uploadGeminiFile` accepts: a Drive file or an Opal blob. */
export type UploadGeminiFileRequest = { driveFileId: string; driveResourceKey?: string } | { blobId: string };

/** Where an uploaded file now lives for Gemini. `fileUrl` may be relative to the Gemini API base. */
export interface UploadGeminiFileResponse {
  fileUrl: string;
  mimeType: string;
}

/**
 * Every call that leaves the process for a model or media backend.
 *
 * Auth is baked into the instance (an API key, a user's bearer token), never passed per call, so
 * one client is built per request for that request's user.
 *
 * @example
 * ```ts
 * const backend: BackendClient = createGeminiBackendClient({ apiKey, fetch });
 * for await (const chunk of backend.streamGenerateContent('gemini-3-flash-preview', body, signal)) {
 *   console.log(chunk.candidates?.[0]?.content?.parts);
 * }
 * ```
 */
export interface BackendClient {
  /**
   * Streams `models/{model}:streamGenerateContent`. Yields each response chunk as the provider sent
   * it. Rejects with an `AgentError` (code `MODEL_ERROR`, `MODEL_UNAVAILABLE`, `RATE_LIMITED`, ...)
   * when the provider refuses; stops promptly when `signal` aborts.
   */
  streamGenerateContent(
    model: string,
    body: GenerateContentRequest,
    signal?: AbortSignal,
  ): AsyncIterable<GenerateContentResponse>;
  /** Runs one media step on the backend (`/v1beta1/executeStep`). */
  executeStep(body: ExecuteStepRequest, signal?: AbortSignal): Promise<ExecuteStepResponse>;
  /** Makes a Drive file or blob readable by Gemini (`/v1beta1/uploadGeminiFile`). */
  uploadGeminiFile(request: UploadGeminiFileRequest, signal?: AbortSignal): Promise<UploadGeminiFileResponse>;
  /** Copies a Drive file into blob storage; resolves to its handle `/board/blobs/<id>`. */
  uploadBlobFile(driveFileId: string, signal?: AbortSignal): Promise<string>;
}
