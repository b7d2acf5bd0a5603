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
 * when the answer is not shaped as a step's answer (a chunk whose data is not base64, whose type is
 * not a MIME type, or that names no blob), so nothing unusable is saved as a file.
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
  if (!isPlainObject(response)) throw malformed('the answer', 'is not an object');
  if (typeof response.errorMessage === 'string' && response.errorMessage.length > 0) throw new AgentError('UPSTREAM_ERROR', response.errorMessage);
  const outputs = response.executionOutputs;
  const output = isPlainObject(outputs) ? outputs[step.output] : undefined;
  const chunks: unknown = isPlainObject(output) ? output.chunks : undefined;
  if (chunks !== undefined && !Array.isArray(chunks)) throw malformed(`executionOutputs.${step.output}.chunks`, 'is not a list');
  const result: MediaStepResult = { contents: [] };
  for (const [index, chunk] of (chunks ?? []).entries()) {
    const field = `executionOutputs.${step.output}.chunks[${index}]`;
    if (!isPlainObject(chunk) || typeof chunk.mimetype !== 'string' || typeof chunk.data !== 'string') {
      throw malformed(field, 'is not a chunk with a string mimetype and data');
    }
    if (chunk.substreamName === 'requested-model' || chunk.substreamName === 'executed-model') {
      // Only reported, never needed: a name that cannot be read is left out rather than failing the step.
      const model = isBase64(chunk.data) ? base64ToText(chunk.data).slice(0, MAX_MODEL_NAME_LENGTH) : undefined;
      if (model !== undefined) result[chunk.substreamName === 'requested-model' ? 'requestedModel' : 'executedModel'] = model;
      continue;
    }
    result.contents.push({ role: 'user', parts: [outputPart(chunk.mimetype, chunk.data, field)] });
  }
  if (result.contents.length === 0) throw new AgentError('UPSTREAM_ERROR', 'Unable to find data in the output');
  return result;
}

function malformed(field: string, what: string): AgentError {
  return new AgentError('UPSTREAM_ERROR', `The media backend answered with something that is not a step result: ${field} ${what}`);
}

/** The longest model name kept from a step's answer. */
const MAX_MODEL_NAME_LENGTH = 200;
/**
 * A MIME type (`type/subtype`, parameters allowed). Anything else is refused: the type ends up in
 * `data:<type>;base64,` URLs the client opens, where a `,` in it would forge the content.
 */
const MIME_TYPE = /^[A-Za-z0-9][\w!#$&^.+-]*\/[A-Za-z0-9][\w!#$&^.+-]*(?:\s*;\s*[\w!#$&^.+-]+=(?:[\w!#$&^.+-]+|"[^"\\\r\n]*"))*$/;
const MAX_MIME_TYPE_LENGTH = 255;
/** Base64 in either alphabet, with padding and line breaks: what a backend may send, leniently. */
const BASE64 = /^[A-Za-z0-9+/_\-\s]*={0,2}\s*$/;

/**
 * Whether `data` can be base64 (standard or URL-safe, whitespace allowed): a lenient check that
 * keeps out what never could be (a `data:` URL, markup, text), not a decoder's full one.
 */
function isBase64(data: string): boolean {
  return BASE64.test(data);
}

function mimeTypeOf(mimetype: string, field: string): string {
  if (mimetype.length > MAX_MIME_TYPE_LENGTH || !MIME_TYPE.test(mimetype)) throw malformed(field, 'has a mimetype that is not a MIME type');
  return mimetype;
}

/** The part a data chunk stands for (as the reference reads a step's output), refusing data no reader of the file could use. */
function outputPart(mimetype: string, data: string, field: string): Part {
  if (mimetype.endsWith('/storedData')) {
    const mimeType = mimeTypeOf(mimetype.slice(0, -'/storedData'.length), field);
    return { storedData: { handle: `/board/blobs/${blobId(data, field)}`, mimeType } };
  }
  if (mimetype.startsWith('text/gcs-path/')) {
    const mimeType = mimeTypeOf(mimetype.slice('text/gcs-path/'.length), field);
    if (!isBase64(data)) throw malformed(field, 'has data that is not base64');
    return { storedData: { handle: `/board/blobs/${blobId(base64ToText(data), field)}`, mimeType } };
  }
  const mimeType = mimeTypeOf(mimetype, field);
  if (!isBase64(data)) throw malformed(field, 'has data that is not base64');
  if (mimeType === 'text/html') return { inlineData: { mimeType, data: base64ToText(data) } };
  return { inlineData: { mimeType, data } };
}

/** The blob id at the end of a blob path (its last `/` segment). */
function blobId(path: string, field: string): string {
  const id = path.split('/').pop() ?? '';
  if (id.length === 0) throw malformed(field, 'names no blob');
  return id;
}
