import { AgentError } from '../../errors/index.js';
import type { BackendClient } from '../../ports/index.js';
import type { JsonObject, LLMContent, Part } from '../../protocol/content.js';
import { fieldsJson } from '../../protocol/fixed-json.js';
import type { FunctionDeclaration, GenerateContentRequest, GenerateContentResponse, UsageMetadata } from '../../protocol/gemini.js';
import type { SseEvent } from '../../sse/index.js';
import { createCallIds, finishChunk, partsChunk, progressChunk, type ChunkIdentity, type ServerToolProgress } from './gemini-chunks.js';
import {
  builtinToolsOf,
  createHistoryJson,
  dataUrlOf,
  functionCallingOf,
  generationSettingsOf,
  isObject,
  mediaOf,
  parametersSchemaOf,
  parseArguments,
  providerTools,
  responseTextOf,
  systemTextOf,
  wireCallId,
} from './gemini-request-reader.js';
import { PROVIDER_DATA_FIELD, providerDataOf } from './provider-data.js';
import {
  errorFieldsOf,
  mediaMethods,
  openProviderStream,
  parseEventJson,
  providerError,
  readSseEvents,
  secretsOf,
  truncatedStream,
  type ProviderClientOptions,
} from './provider-transport.js';

/** Options of {@link createOpenAiResponsesBackendClient}. */
export interface OpenAiResponsesBackendClientOptions extends ProviderClientOptions {
  /**
   * `false` (default): stateless. Every request carries the whole history, reasoning comes back
   * encrypted (`reasoning.encrypted_content`) and goes back with the next request. `true` lets
   * OpenAI keep the items as well.
   */
  store?: boolean;
  /** Whether the model reasons (o-series, gpt-5, codex); guessed from the model name when unset. */
  reasoning?: boolean;
  /** Reasoning effort sent as `reasoning.effort`; else taken from `thinkingConfig.thinkingLevel`. */
  reasoningEffort?: string;
  /** Reasoning summaries (shown as thoughts). Default `auto` when the run asks for thoughts; `none` turns them off. */
  reasoningSummary?: 'auto' | 'concise' | 'detailed' | 'none';
  /** Hosted tools added to every request, e.g. `{ type: 'web_search' }`, `{ type: 'image_generation' }`. */
  hostedTools?: JsonObject[];
  /** Extra `include` values (e.g. `file_search_call.results`). */
  include?: string[];
}

const PROVIDER = 'OpenAI';
const DEFAULT_BASE_URL = 'https://api.openai.com/v1';
const REASONING_MODEL = /^(?:o\d|gpt-5|codex|computer-use)/i;

/**
 * A `BackendClient` for the OpenAI Responses API (`POST /v1/responses`, streamed). It translates
 * the loop's Gemini-shaped request into Responses input items and the event stream back into
 * Gemini chunks. Reasoning items (with their encrypted content), function call items and hosted
 * tool items ride on their parts under `providerData` and go back unchanged on the next request;
 * call ids (`call_...`) are kept and matched; hosted tools report progress in
 * `serverToolProgress` and generated images become `inlineData` parts.
 *
 * @example
 * ```ts
 * const backend = createOpenAiResponsesBackendClient({ apiKey: env.OPENAI_API_KEY, fetch, model: 'gpt-5-mini' });
 * for await (const event of run({ segments: [{ type: 'text', text: 'Hi' }] }, { backend, store }, { mode: 'chat' })) {
 *   console.log(event.type);
 * }
 * ```
 */
export function createOpenAiResponsesBackendClient(options: OpenAiResponsesBackendClientOptions): BackendClient {
  if (!options.apiKey && !options.baseUrl) {
    throw new AgentError('UNAUTHENTICATED', 'createOpenAiResponsesBackendClient needs options.apiKey (or options.baseUrl for a server without keys)');
  }
  const baseUrl = (options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
  const secrets = secretsOf(options, baseUrl);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'text/event-stream',
    ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
    ...options.headers,
  };
  const store = options.store ?? false;
  const historyJson = createHistoryJson((content, index) => inputItemsOf(content, index, store));
  return {
    async *streamGenerateContent(model, body, signal) {
      // The history's items are written from the text kept for each content.
      const input: JsonObject[] = [];
      const request = toOpenAiResponsesRequest(options.model ?? model, body, options, input);
      const response = await openProviderStream({
        provider: PROVIDER,
        fetch: options.fetch,
        url: `${baseUrl}/responses`,
        headers,
        body: fieldsJson(request, new Map([[input, historyJson(body.contents ?? [])]])),
        signal,
        retry: options.retry,
        secrets,
      });
      yield* translateResponsesStream(readSseEvents(response, { provider: PROVIDER, limits: options.limits, signal }), secrets);
    },
    ...mediaMethods(options.upstream, 'createOpenAiResponsesBackendClient'),
  };
}

/** Each fixed declaration as a Responses tool, translated once. */
const responsesTools = new WeakMap<FunctionDeclaration, JsonObject>();

/**
 * The Responses request for a Gemini-shaped body. With `input`, that array stands in for the
 * translated history and is left empty (the client writes its text from a cache).
 */
export function toOpenAiResponsesRequest(
  model: string,
  body: GenerateContentRequest,
  options: Omit<OpenAiResponsesBackendClientOptions, 'fetch'> = {},
  input?: JsonObject[],
): JsonObject {
  const store = options.store ?? false;
  const reasoningModel = options.reasoning ?? REASONING_MODEL.test(model);
  const request: JsonObject = { model, input: input ?? toInput(body.contents ?? [], store), stream: true, store };
  const instructions = systemTextOf(body);
  if (instructions !== undefined) request.instructions = instructions;

  const include = new Set(options.include ?? []);
  const extra: JsonObject[] = [];
  const builtins = builtinToolsOf(body);
  if (builtins.has('googleSearch')) extra.push({ type: 'web_search' });
  if (builtins.has('codeExecution')) extra.push({ type: 'code_interpreter', container: { type: 'auto' } });
  for (const tool of options.hostedTools ?? []) extra.push(tool);
  const tools = providerTools(
    body,
    responsesTools,
    (declaration) => ({
      type: 'function',
      name: declaration.name,
      description: declaration.description,
      parameters: parametersSchemaOf(declaration),
      strict: false,
    }),
    extra,
  );
  for (const tool of tools) {
    if (tool.type === 'web_search' || tool.type === 'web_search_preview') include.add('web_search_call.action.sources');
    if (tool.type === 'code_interpreter') include.add('code_interpreter_call.outputs');
  }
  if (tools.length > 0) {
    request.tools = tools;
    const calling = functionCallingOf(body);
    if (calling.mode === 'NONE') request.tool_choice = 'none';
    else if (calling.mode === 'ANY') request.tool_choice = calling.allowed.length === 1 ? { type: 'function', name: calling.allowed[0] } : 'required';
    else request.tool_choice = 'auto';
  }

  const settings = generationSettingsOf(body);
  // Reasoning models refuse sampling settings; the loop always sends them.
  if (!reasoningModel) {
    if (settings.temperature !== undefined) request.temperature = settings.temperature;
    if (settings.topP !== undefined) request.top_p = settings.topP;
  }
  if (settings.maxOutputTokens !== undefined) request.max_output_tokens = settings.maxOutputTokens;
  if (settings.json) {
    request.text = {
      format: settings.jsonSchema ? { type: 'json_schema', name: 'response', schema: settings.jsonSchema, strict: false } : { type: 'json_object' },
    };
  }
  if (reasoningModel) {
    const reasoning: JsonObject = {};
    const effort = options.reasoningEffort ?? settings.thinkingLevel;
    if (effort !== undefined) reasoning.effort = effort;
    const summary = options.reasoningSummary ?? (settings.includeThoughts ? 'auto' : 'none');
    if (summary !== 'none') reasoning.summary = summary;
    if (Object.keys(reasoning).length > 0) request.reasoning = reasoning;
    if (!store) include.add('reasoning.encrypted_content');
  }
  if (include.size > 0) request.include = [...include];
  return request;
}

function toInput(contents: readonly LLMContent[], store: boolean): JsonObject[] {
  const input: JsonObject[] = [];
  contents.forEach((content, contentIndex) => input.push(...inputItemsOf(content, contentIndex, store)));
  return input;
}

/** The input items one content of the history becomes. */
function inputItemsOf(content: LLMContent, contentIndex: number, store: boolean): JsonObject[] {
  const items: JsonObject[] = [];
  if (content.role === 'model') appendModelItems(items, content.parts, contentIndex, store);
  else appendUserItems(items, content.parts, contentIndex, `contents[${contentIndex}]`);
  return items;
}

function appendUserItems(input: JsonObject[], parts: readonly Part[], contentIndex: number, path: string): void {
  let message: JsonObject[] | undefined;
  let responsePosition = 0;
  const flush = (): void => {
    if (message && message.length > 0) input.push({ role: 'user', content: message });
    message = undefined;
  };
  parts.forEach((part, partIndex) => {
    const response = part.functionResponse;
    if (response) {
      flush();
      input.push({
        type: 'function_call_output',
        call_id: wireCallId(response.id, contentIndex - 1, responsePosition),
        output: responseTextOf(response.response),
      });
      responsePosition += 1;
      return;
    }
    if (part.thought === true) return;
    const piece = userPiece(part, `${path}.parts[${partIndex}]`);
    if (piece) (message ??= []).push(piece);
  });
  flush();
}

function userPiece(part: Part, path: string): JsonObject | undefined {
  if (typeof part.text === 'string') return part.text.length > 0 ? { type: 'input_text', text: part.text } : undefined;
  if (part.json !== undefined) return { type: 'input_text', text: JSON.stringify(part.json) };
  const media = mediaOf(part, path, PROVIDER);
  if (!media) return undefined;
  if (media.mimeType.startsWith('image/')) {
    return { type: 'input_image', image_url: media.kind === 'inline' ? dataUrlOf(media.mimeType, media.data) : media.url, detail: 'auto' };
  }
  if (media.kind === 'url') return { type: 'input_file', file_url: media.url };
  return { type: 'input_file', filename: media.title ?? `attachment.${media.mimeType.split('/')[1] ?? 'bin'}`, file_data: dataUrlOf(media.mimeType, media.data) };
}

function appendModelItems(input: JsonObject[], parts: readonly Part[], contentIndex: number, store: boolean): void {
  let callPosition = 0;
  for (const part of parts) {
    const data = providerDataOf(part, 'openai-responses');
    const call = part.functionCall;
    if (call) {
      const position = callPosition;
      callPosition += 1;
      if (data && data.item.type === 'function_call') {
        input.push(data.item);
        continue;
      }
      input.push({ type: 'function_call', call_id: wireCallId(call.id, contentIndex, position), name: call.name, arguments: JSON.stringify(call.args ?? {}) });
      continue;
    }
    if (data) {
      const item = data.item;
      // Without a store, a reasoning item can only come back with its encrypted content.
      if (item.type === 'reasoning' && !store && typeof item.encrypted_content !== 'string') continue;
      if (item.type === 'image_generation_call' && item.result === undefined && part.inlineData) {
        input.push({ ...item, result: part.inlineData.data });
        continue;
      }
      input.push(item);
      continue;
    }
    // Thoughts of another provider cannot be replayed as OpenAI reasoning.
    if (part.thought === true) continue;
    if (typeof part.text === 'string' && part.text.length > 0) {
      input.push({ role: 'assistant', content: [{ type: 'output_text', text: part.text }] });
    }
  }
}

/** Translates a Responses event stream into Gemini chunks. */
export async function* translateResponsesStream(events: AsyncIterable<SseEvent>, secrets: readonly string[]): AsyncGenerator<GenerateContentResponse> {
  const identity: ChunkIdentity = {};
  let sawCall = false;
  let malformed: string | undefined;
  const callId = createCallIds();
  for await (const event of events) {
    const data = event.data.trim();
    if (data.length === 0 || data === '[DONE]') continue;
    const payload = parseEventJson(PROVIDER, data, secrets);
    const type = typeof payload.type === 'string' ? payload.type : (event.event ?? '');
    switch (type) {
      case 'response.created':
      case 'response.in_progress':
      case 'response.queued':
        readIdentity(payload.response, identity);
        break;
      case 'response.output_item.added': {
        const item = payload.item;
        if (isObject(item) && isHostedToolItem(item)) {
          yield progressChunk(progressOf(item, 'in_progress'), [], identity);
        }
        break;
      }
      case 'response.output_item.done': {
        const item = payload.item;
        if (!isObject(item) || typeof item.type !== 'string') {
          throw new AgentError('MODEL_ERROR', `${PROVIDER} sent response.output_item.done without an item`, { details: { provider: PROVIDER } });
        }
        const translated = translateItem(item, callId);
        if (translated.malformed) malformed ??= translated.malformed;
        if (translated.call) sawCall = true;
        if (translated.chunk) yield withIdentity(translated.chunk, identity);
        break;
      }
      case 'response.completed':
      case 'response.incomplete': {
        const response = isObject(payload.response) ? payload.response : {};
        readIdentity(response, identity);
        yield finishOf(response, type, sawCall ? undefined : malformed, identity);
        return;
      }
      case 'response.failed': {
        const response = isObject(payload.response) ? payload.response : {};
        const error = isObject(response.error) ? response.error : {};
        throw providerError(PROVIDER, undefined, errorFieldsOf({ error }), secrets);
      }
      case 'error':
        throw providerError(PROVIDER, undefined, errorFieldsOf(payload), secrets);
      case 'response.image_generation_call.partial_image':
        yield progressChunk(
          {
            provider: 'openai-responses',
            tool: 'image_generation',
            id: String(payload.item_id ?? ''),
            status: 'partial_image',
            detail: {
              index: payload.partial_image_index ?? 0,
              image: { mimeType: `image/${String(payload.output_format ?? 'png')}`, data: String(payload.partial_image_b64 ?? '') },
            },
          },
          [],
          identity,
        );
        break;
      case 'response.code_interpreter_call_code.done':
        yield progressChunk(
          { provider: 'openai-responses', tool: 'code_interpreter', id: String(payload.item_id ?? ''), status: 'code', detail: { code: payload.code ?? '' } },
          [],
          identity,
        );
        break;
      default: {
        const progress = HOSTED_PROGRESS.exec(type);
        if (progress) {
          yield progressChunk(
            { provider: 'openai-responses', tool: (progress[1] ?? '').replace(/_call$/, ''), id: String(payload.item_id ?? ''), status: progress[2] ?? '' },
            [],
            identity,
          );
        }
        // Deltas are ignored: each item arrives whole in `response.output_item.done`.
      }
    }
  }
  throw truncatedStream(PROVIDER, 'response.completed');
}

const HOSTED_PROGRESS = /^response\.([a-z_]+_call)\.([a-z_]+)$/;

function readIdentity(response: unknown, identity: ChunkIdentity): void {
  if (!isObject(response)) return;
  if (typeof response.id === 'string') identity.responseId = response.id;
  if (typeof response.model === 'string') identity.modelVersion = response.model;
}

function withIdentity(chunk: GenerateContentResponse, identity: ChunkIdentity): GenerateContentResponse {
  if (identity.responseId !== undefined) chunk.responseId = identity.responseId;
  if (identity.modelVersion !== undefined) chunk.modelVersion = identity.modelVersion;
  return chunk;
}

interface TranslatedItem {
  chunk?: GenerateContentResponse;
  call?: boolean;
  malformed?: string;
}

const NOT_HOSTED = new Set(['reasoning', 'message', 'function_call', 'custom_tool_call']);

function isHostedToolItem(item: JsonObject): boolean {
  return typeof item.type === 'string' && !NOT_HOSTED.has(item.type);
}

/**
 * One finished output item as Gemini parts: the item rides on its part, unchanged but for the
 * `call_id` of a call that came without one or with one taken (see `createCallIds`).
 */
function translateItem(item: JsonObject, callId: (id: unknown) => string): TranslatedItem {
  const carry = (extra: Part, stored: JsonObject = item): Part => ({ ...extra, [PROVIDER_DATA_FIELD]: { provider: 'openai-responses', item: stored } });
  switch (item.type) {
    case 'reasoning':
      return { chunk: partsChunk([carry({ thought: true, text: summaryOf(item) })], {}) };
    case 'message': {
      const chunk = partsChunk([carry({ text: messageTextOf(item) })], {});
      const citations = citationsOf(item);
      if (citations.length > 0) (chunk.candidates?.[0] as JsonObject).citationMetadata = { citations };
      return { chunk };
    }
    case 'function_call': {
      const name = typeof item.name === 'string' ? item.name : '';
      const args = typeof item.arguments === 'string' ? parseArguments(item.arguments) : isObject(item.arguments) ? item.arguments : undefined;
      if (!args || name.length === 0) {
        return { malformed: `the arguments of ${name || 'a function call'} are not a JSON object` };
      }
      const id = callId(item.call_id);
      const stored = id === item.call_id ? item : { ...item, call_id: id };
      return { chunk: partsChunk([carry({ functionCall: { id, name, args } }, stored)], {}), call: true };
    }
    case 'image_generation_call': {
      if (typeof item.result !== 'string' || item.result.length === 0) {
        return { chunk: progressChunk(progressOf(item, String(item.status ?? 'completed')), [carry({})], {}) };
      }
      const { result, ...rest } = item;
      const part = carry({ inlineData: { mimeType: `image/${String(item.output_format ?? 'png')}`, data: result } }, rest);
      return { chunk: progressChunk(progressOf(item, String(item.status ?? 'completed')), [part], {}) };
    }
    default:
      // Hosted tools (web search, file search, code interpreter, MCP, ...) and item types this
      // client does not know yet: kept for the next request, reported as progress.
      return { chunk: progressChunk(progressOf(item, String(item.status ?? 'completed')), [carry({})], {}) };
  }
}

function progressOf(item: JsonObject, status: string): ServerToolProgress {
  const { id: _id, type, status: _status, result: _result, encrypted_content: _encrypted, ...detail } = item;
  const progress: ServerToolProgress = {
    provider: 'openai-responses',
    tool: String(type ?? 'unknown').replace(/_call$/, ''),
    id: typeof item.id === 'string' ? item.id : '',
    status,
  };
  if (Object.keys(detail).length > 0) progress.detail = detail;
  return progress;
}

function summaryOf(item: JsonObject): string {
  const summary = Array.isArray(item.summary) ? item.summary : [];
  return summary
    .map((entry) => (isObject(entry) && typeof entry.text === 'string' ? entry.text : ''))
    .filter((text) => text.length > 0)
    .join('\n\n');
}

function messageTextOf(item: JsonObject): string {
  const content = Array.isArray(item.content) ? item.content : [];
  let text = '';
  for (const entry of content) {
    if (!isObject(entry)) continue;
    if (entry.type === 'output_text' && typeof entry.text === 'string') text += entry.text;
    else if (entry.type === 'refusal' && typeof entry.refusal === 'string') text += entry.refusal;
  }
  return text;
}

/** Annotations of a message as Gemini `citationMetadata.citations`. */
function citationsOf(item: JsonObject): JsonObject[] {
  const citations: JsonObject[] = [];
  for (const entry of Array.isArray(item.content) ? item.content : []) {
    if (!isObject(entry) || !Array.isArray(entry.annotations)) continue;
    for (const annotation of entry.annotations) {
      if (!isObject(annotation)) continue;
      const citation: JsonObject = { type: annotation.type };
      if (typeof annotation.start_index === 'number') citation.startIndex = annotation.start_index;
      if (typeof annotation.end_index === 'number') citation.endIndex = annotation.end_index;
      if (typeof annotation.url === 'string') citation.uri = annotation.url;
      if (typeof annotation.title === 'string') citation.title = annotation.title;
      if (typeof annotation.filename === 'string') citation.title = annotation.filename;
      if (typeof annotation.file_id === 'string') citation.fileId = annotation.file_id;
      if (typeof annotation.container_id === 'string') citation.containerId = annotation.container_id;
      citations.push(citation);
    }
  }
  return citations;
}

function finishOf(response: JsonObject, type: string, malformed: string | undefined, identity: ChunkIdentity): GenerateContentResponse {
  const usage = usageOf(response.usage);
  if (type === 'response.incomplete') {
    const reason = isObject(response.incomplete_details) ? response.incomplete_details.reason : undefined;
    return finishChunk(reason === 'max_output_tokens' ? 'MAX_TOKENS' : reason === 'content_filter' ? 'SAFETY' : 'OTHER', usage, identity);
  }
  if (malformed) return finishChunk('MALFORMED_FUNCTION_CALL', usage, identity, { finishMessage: malformed });
  return finishChunk('STOP', usage, identity);
}

function usageOf(value: unknown): UsageMetadata | undefined {
  if (!isObject(value)) return undefined;
  const input = typeof value.input_tokens === 'number' ? value.input_tokens : undefined;
  const output = typeof value.output_tokens === 'number' ? value.output_tokens : undefined;
  const reasoning = isObject(value.output_tokens_details) && typeof value.output_tokens_details.reasoning_tokens === 'number' ? value.output_tokens_details.reasoning_tokens : 0;
  const cached = isObject(value.input_tokens_details) && typeof value.input_tokens_details.cached_tokens === 'number' ? value.input_tokens_details.cached_tokens : undefined;
  const usage: UsageMetadata = {};
  if (input !== undefined) usage.promptTokenCount = input;
  if (output !== undefined) usage.candidatesTokenCount = output >= reasoning ? output - reasoning : output;
  if (reasoning > 0) usage.thoughtsTokenCount = reasoning;
  if (cached) usage.cachedContentTokenCount = cached;
  if (typeof value.total_tokens === 'number') usage.totalTokenCount = value.total_tokens;
  return usage;
}
