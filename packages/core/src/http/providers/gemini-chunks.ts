import type { JsonObject, Part } from '../../protocol/content.js';
import type { GenerateContentResponse, UsageMetadata } from '../../protocol/gemini.js';
import type { ProviderPartData } from './provider-data.js';

/**
 * The candidate field that reports the progress of a provider-executed tool (web search, code
 * execution, image generation): which tool, which call, what stage, and what it found so far.
 * It is metadata for the app, never content for the model; the turn accumulator keeps the last
 * value in the turn's candidate metadata.
 */
export const SERVER_TOOL_PROGRESS_FIELD = 'serverToolProgress';

/** One progress report of a provider-executed tool (see {@link SERVER_TOOL_PROGRESS_FIELD}). */
export interface ServerToolProgress {
  provider: ProviderPartData['provider'];
  /** The tool as the provider names it: `web_search`, `code_interpreter`, `web_fetch`, `bash_code_execution`, ... */
  tool: string;
  /** The provider's id of this tool call (`ws_...`, `srvtoolu_...`). */
  id: string;
  /** `in_progress`, `searching`, `interpreting`, `generating`, `completed`, `failed`, ... */
  status: string;
  /** What the tool did or found: the query and sources, the code and its logs, a preview image. */
  detail?: JsonObject;
}

/** Identity of the answer, repeated on every chunk like Gemini does. */
export interface ChunkIdentity {
  responseId?: string;
  modelVersion?: string;
}

function withIdentity(chunk: GenerateContentResponse, identity: ChunkIdentity): GenerateContentResponse {
  if (identity.responseId !== undefined) chunk.responseId = identity.responseId;
  if (identity.modelVersion !== undefined) chunk.modelVersion = identity.modelVersion;
  return chunk;
}

/** A chunk adding `parts` to the model's turn. */
export function partsChunk(parts: Part[], identity: ChunkIdentity): GenerateContentResponse {
  return withIdentity({ candidates: [{ index: 0, content: { role: 'model', parts } }] }, identity);
}

/** A chunk that reports a provider-executed tool's progress and, optionally, adds parts. */
export function progressChunk(progress: ServerToolProgress, parts: Part[], identity: ChunkIdentity): GenerateContentResponse {
  const candidate: Record<string, unknown> = { index: 0, [SERVER_TOOL_PROGRESS_FIELD]: progress };
  if (parts.length > 0) candidate.content = { role: 'model', parts };
  return withIdentity({ candidates: [candidate] }, identity);
}

/** The last chunk of a turn: why it ended, and what it cost. */
export function finishChunk(
  finishReason: string,
  usage: UsageMetadata | undefined,
  identity: ChunkIdentity,
  extra: Record<string, unknown> = {},
): GenerateContentResponse {
  const chunk: GenerateContentResponse = { candidates: [{ index: 0, finishReason, ...extra }] };
  if (usage) chunk.usageMetadata = usage;
  return withIdentity(chunk, identity);
}

/**
 * Gives the calls of one answer ids that are unique within it: the provider pairs each result
 * with its call by id, so a call without an id, or with one an earlier call of the answer already
 * has (a server that numbers every call `call_0`), gets a fresh id, and its response goes back
 * under that id.
 */
export function createCallIds(): (id: unknown) => string {
  const used = new Set<string>();
  return (id) => {
    const unique = typeof id === 'string' && id.length > 0 && !used.has(id) ? id : `call_${crypto.randomUUID()}`;
    used.add(unique);
    return unique;
  };
}
