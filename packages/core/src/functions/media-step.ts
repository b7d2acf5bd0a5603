import { AgentError } from '../errors/index.js';
import type { BackendClient, ExecuteStepRequest } from '../ports/index.js';
import type { LLMContent, Part } from '../protocol/content.js';
import { blobIdOf } from '../model/conform-body.js';
import { base64ToText, textToBase64 } from '../protocol/base64.js';
import { isPlainObject } from '../protocol/values.js';

/** One input chunk of an `executeStep` request. */
export interface StepChunk {
  mimetype: string;
  data: string;
  substreamName?: string;
}

/** A media step, before it becomes the `executeStep` wire request. */
export interface MediaStep {
  stepName: string;
  modelApi: string;
  /** The inputs the step declares (a subset of `inputs`' keys). */
  inputParameters: string[];
  inputs: Record<string, StepChunk[]>;
  output: string;
  systemPrompt?: string;
  options?: Record<string, unknown>;
  /** Bills the step to the user's Google One quota (`googleOne` flag). */
  useG1Quota?: boolean;
}

/** What a step produced: one content per data chunk, and the models that served it. */
export interface MediaStepResult {
  contents: LLMContent[];
  requestedModel?: string;
  executedModel?: string;
}

/** A text input chunk. */
export function textStepChunk(text: string): StepChunk {
  return { mimetype: 'text/plain', data: textToBase64(text) };
}

/**
 * Turns a file's part into an `executeStep` input chunk: inline data as is, blobs (absolute or
 * relative handles) as GCS paths, Drive files copied to blobs first. Throws a message naming the
 * part when it cannot be sent.
 */
export async function partToChunk(part: Part, backend: BackendClient, signal?: AbortSignal): Promise<StepChunk> {
  if (part.inlineData) return { mimetype: part.inlineData.mimeType, data: part.inlineData.data };
  const stored = part.storedData;
  if (stored) {
    let blobId = blobIdOf(stored.handle);
    if (!blobId && stored.handle.startsWith('drive:')) {
      const handle = await backend.uploadBlobFile(stored.handle.replace(/^drive:\/*/, ''), signal);
      blobId = blobIdOf(handle) ?? handle.split('/').pop();
    }
    if (!blobId) throw new AgentError('BAD_REQUEST', `Unknown storedData handle for executeStep: "${stored.handle}"`);
    return { mimetype: 'text/gcs-path', data: textToBase64(blobId) };
  }
  if (part.fileData) throw new AgentError('BAD_REQUEST', 'fileData parts are not supported in executeStep inputs');
  throw new AgentError('BAD_REQUEST', `Unknown part type: [${Object.keys(part).join(', ')}]`);
}

/**
 * Runs a media step through `BackendClient.executeStep` and turns its output chunks into
 * contents: stored blobs become `storedData` with `/board/blobs/<id>` handles,
 * HTML is decoded, everything else stays inline. Throws with the backend's message on failure,
 * `Unable to find data in the output` when there is nothing, and `UPSTREAM_ERROR` naming the field
 * when the answer is not shaped as a step's answer.
 */
export async function executeMediaStep(backend: BackendClient, step: MediaStep, signal?: AbortSignal): Promise<MediaStepResult> {
  const planStep: ExecuteStepRequest['planStep'] = {
    stepName: step.stepName,
    modelApi: step.modelApi,
    inputParameters: step.inputParameters,
    output: step.output,
  };
  if (step.systemPrompt !== undefined) planStep.systemPrompt = step.systemPrompt;
  if (step.options !== undefined) planStep.options = step.options;
  const request: ExecuteStepRequest = { planStep, execution_inputs: {} };
  for (const [name, chunks] of Object.entries(step.inputs)) request.execution_inputs[name] = { chunks };
  if (step.useG1Quota) request.enableG1Quota = true;

  const response: unknown = await backend.executeStep(request, signal);
  if (!isPlainObject(response)) throw malformed('the answer', 'not an object');
  if (typeof response.errorMessage === 'string' && response.errorMessage.length > 0) throw new AgentError('UPSTREAM_ERROR', response.errorMessage);
  const outputs = response.executionOutputs;
  const output = isPlainObject(outputs) ? outputs[step.output] : undefined;
  const chunks: unknown = isPlainObject(output) ? output.chunks : undefined;
  if (chunks !== undefined && !Array.isArray(chunks)) throw malformed(`executionOutputs.${step.output}.chunks`, 'not a list');
  const result: MediaStepResult = { contents: [] };
  for (const [index, chunk] of (chunks ?? []).entries()) {
    if (!isPlainObject(chunk) || typeof chunk.mimetype !== 'string' || typeof chunk.data !== 'string') {
      throw malformed(`executionOutputs.${step.output}.chunks[${index}]`, 'not a chunk with a string mimetype and data');
    }
    if (chunk.substreamName === 'requested-model') {
      result.requestedModel = base64ToText(chunk.data);
      continue;
    }
    if (chunk.substreamName === 'executed-model') {
      result.executedModel = base64ToText(chunk.data);
      continue;
    }
    result.contents.push({ role: 'user', parts: [outputPart(chunk as unknown as StepChunk)] });
  }
  if (result.contents.length === 0) throw new AgentError('UPSTREAM_ERROR', 'Unable to find data in the output');
  return result;
}

function malformed(field: string, what: string): AgentError {
  return new AgentError('UPSTREAM_ERROR', `The media backend answered with something that is not a step result: ${field} is ${what}`);
}

function outputPart(chunk: StepChunk): Part {
  const { mimetype, data } = chunk;
  if (mimetype.endsWith('/storedData')) {
    return { storedData: { handle: `/board/blobs/${data.split('/').pop() ?? data}`, mimeType: mimetype.slice(0, -'/storedData'.length) } };
  }
  if (mimetype.startsWith('text/gcs-path/')) {
    const id = base64ToText(data).split('/').pop() ?? '';
    return { storedData: { handle: `/board/blobs/${id}`, mimeType: mimetype.slice('text/gcs-path/'.length) } };
  }
  if (mimetype === 'text/html') return { inlineData: { mimeType: 'text/html', data: base64ToText(data) } };
  return { inlineData: { mimeType: mimetype, data } };
}
