import { AgentError } from '../errors/index.js';
import type { BackendClient, ExecuteStepRequest } from '../ports/index.js';
import { simulatedExecuteStep } from './simulated-media.js';
import type { JsonObject, Part } from '../protocol/content.js';
import type { GenerateContentRequest, GenerateContentResponse, UsageMetadata } from '../protocol/gemini.js';

/** What a scripted turn sees: the request the loop sent and its position. */
export interface ScriptedRequest {
  model: string;
  body: GenerateContentRequest;
  index: number;
}

/** One model turn: its chunks, or a function of the request that returns them. */
export type ScriptedTurn =
  | GenerateContentResponse[]
  | ((request: ScriptedRequest) => GenerateContentResponse[] | Promise<GenerateContentResponse[]>);

/** Options of {@link createScriptedBackendClient}. */
export interface ScriptedBackendOptions {
  /** Wait this long before each chunk (lets tests cancel mid-stream). */
  chunkDelayMs?: number;
  /** Media steps. Default: canned media (a PNG picture, a WAV tone) from `simulatedExecuteStep`. */
  executeStep?: BackendClient['executeStep'];
  uploadGeminiFile?: BackendClient['uploadGeminiFile'];
  uploadBlobFile?: BackendClient['uploadBlobFile'];
}

/** A scripted `BackendClient` that records what it was asked. */
export interface ScriptedBackendClient extends BackendClient {
  /**
   * Every model request, as sent. The body is a shallow copy taken at the time of the call: its
   * `contents` array is its own, the contents in it are the history's own objects, which the
   * loop never changes once they are in (it only appends).
   */
  readonly requests: ScriptedRequest[];
  /** How many model requests were cancelled through their signal. */
  readonly abortedCount: number;
  /** Every `executeStep` request, as sent. */
  readonly steps: ExecuteStepRequest[];
}

/**
 * A model that plays a script: a list of turns (each a list of chunks or a function of the
 * request), or one function for every turn. Running out of script is a clear error.
 *
 * @example
 * ```ts
 * const backend = createScriptedBackendClient([
 *   [thoughtChunk('Let me ask'), functionCallChunk('chat_request_user_input', { user_message: 'Name?' })],
 *   [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Hi Ada' })],
 * ]);
 * ```
 */
export function createScriptedBackendClient(
  script: ScriptedTurn[] | ((request: ScriptedRequest) => GenerateContentResponse[] | Promise<GenerateContentResponse[]>),
  options: ScriptedBackendOptions = {},
): ScriptedBackendClient {
  const requests: ScriptedRequest[] = [];
  const steps: ExecuteStepRequest[] = [];
  let abortedCount = 0;
  const unsupported = (name: string) => () =>
    Promise.reject(new AgentError('NOT_IMPLEMENTED', `The scripted backend was given no ${name}; pass options.${name}`));
  return {
    requests,
    steps,
    get abortedCount() {
      return abortedCount;
    },
    async *streamGenerateContent(model, body, signal) {
      // No deep copy: recording a long run must not cost time in proportion to its history.
      const recorded: GenerateContentRequest = body.contents ? { ...body, contents: body.contents.slice() } : { ...body };
      const request: ScriptedRequest = { model, body: recorded, index: requests.length };
      requests.push(request);
      const turn = typeof script === 'function' ? script : script[request.index];
      if (turn === undefined) {
        throw new AgentError('INTERNAL', `The scripted model has no turn ${request.index + 1} (script has ${(script as ScriptedTurn[]).length})`);
      }
      const chunks = typeof turn === 'function' ? await turn(request) : turn;
      for (const chunk of chunks) {
        if (options.chunkDelayMs) await delay(options.chunkDelayMs, signal);
        if (signal?.aborted) {
          abortedCount += 1;
          throw new AgentError('ABORTED', 'Model request cancelled');
        }
        yield structuredClone(chunk);
      }
    },
    async executeStep(body, signal) {
      steps.push(structuredClone(body));
      return options.executeStep ? options.executeStep(body, signal) : simulatedExecuteStep(body);
    },
    uploadGeminiFile: options.uploadGeminiFile ?? unsupported('uploadGeminiFile'),
    uploadBlobFile: options.uploadBlobFile ?? unsupported('uploadBlobFile'),
  };
}

function delay(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
  });
}

function chunkOf(parts: Part[], extra: Partial<GenerateContentResponse> = {}): GenerateContentResponse {
  return { candidates: [{ content: { role: 'model', parts }, index: 0 }], ...extra } as GenerateContentResponse;
}

/** A chunk of visible text. */
export function textChunk(text: string, extra: Partial<GenerateContentResponse> = {}): GenerateContentResponse {
  return chunkOf([{ text }], extra);
}

/** A chunk of thought text. */
export function thoughtChunk(text: string): GenerateContentResponse {
  return chunkOf([{ text, thought: true }]);
}

/** A chunk with one function call, optionally with a provider id and a signature. */
export function functionCallChunk(
  name: string,
  args: JsonObject = {},
  options: { id?: string; thoughtSignature?: string } = {},
): GenerateContentResponse {
  const part: Part = { functionCall: options.id === undefined ? { name, args } : { name, args, id: options.id } };
  if (options.thoughtSignature !== undefined) part.thoughtSignature = options.thoughtSignature;
  return chunkOf([part]);
}

/** A closing chunk: finish reason `STOP` and usage. */
export function usageChunk(usageMetadata: UsageMetadata = { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 }): GenerateContentResponse {
  return { candidates: [{ content: { role: 'model', parts: [] }, finishReason: 'STOP', index: 0 }], usageMetadata } as GenerateContentResponse;
}

/** A chunk with code the provider is about to run (Gemini code execution). */
export function executableCodeChunk(code: string, language = 'PYTHON'): GenerateContentResponse {
  return chunkOf([{ executableCode: { language, code } }]);
}

/** A chunk with the result of the provider's code run. */
export function codeExecutionResultChunk(output: string, outcome = 'OUTCOME_OK'): GenerateContentResponse {
  return chunkOf([{ codeExecutionResult: { outcome, output } }]);
}

/**
 * A whole code-execution turn as Gemini streams it (the shape of the recorded fixtures): the code,
 * its result, then the answer text with `STOP`.
 */
export function codeExecutionTurn(code: string, output: string, answer: string): GenerateContentResponse[] {
  return [
    executableCodeChunk(code),
    codeExecutionResultChunk(output),
    { candidates: [{ content: { role: 'model', parts: [{ text: answer }] }, finishReason: 'STOP', index: 0 }] } as GenerateContentResponse,
  ];
}
