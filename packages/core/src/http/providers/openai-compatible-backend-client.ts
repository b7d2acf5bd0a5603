import { AgentError } from '../../errors/index.js';
import type { BackendClient } from '../../ports/index.js';
import type { JsonObject, LLMContent, Part } from '../../protocol/content.js';
import { fieldsJson } from '../../protocol/fixed-json.js';
import type { FunctionDeclaration, GenerateContentRequest, GenerateContentResponse, UsageMetadata } from '../../protocol/gemini.js';
import type { SseEvent } from '../../sse/index.js';
import { createCallIds, finishChunk, partsChunk, type ChunkIdentity } from './gemini-chunks.js';
import {
  createHistoryJson,
  dataUrlOf,
  decodeBase64Text,
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

/** Options of {@link createOpenAiCompatibleBackendClient}. */
export interface OpenAiCompatibleBackendClientOptions extends ProviderClientOptions {
  /** The server's API root, e.g. `http://localhost:11434/v1` (Ollama), `http://localhost:8000/v1` (vLLM). Required. */
  baseUrl: string;
  /**
   * Send the model's reasoning (`reasoning_content` / `reasoning`) back with its assistant turn,
   * under the field it came in. Default `true`: reasoning models need it within a tool loop.
   */
  replayReasoning?: boolean;
  /** Ask for a usage chunk (`stream_options.include_usage`). Default `true`. */
  includeUsage?: boolean;
  /** Extra fields merged into every request body (server-specific switches). */
  extraBody?: JsonObject;
  /** The server's name in messages. Default `OpenAI-compatible server`. */
  providerName?: string;
}

const REASONING_FIELDS = ['reasoning_content', 'reasoning'] as const;

/**
 * A `BackendClient` for any Chat Completions server (`POST {baseUrl}/chat/completions`,
 * streamed): Ollama, vLLM, llama.cpp, LM Studio, OpenAI itself. Streamed tool calls are put
 * together by index (or id), ids are kept (and made up when the server sends none), and the
 * model's reasoning becomes a thought that goes back under the field it came in.
 *
 * @example
 * ```ts
 * const backend = createOpenAiCompatibleBackendClient({ baseUrl: 'http://localhost:11434/v1', fetch, model: 'qwen3' });
 * ```
 */
export function createOpenAiCompatibleBackendClient(options: OpenAiCompatibleBackendClientOptions): BackendClient {
  if (typeof options.baseUrl !== 'string' || !/^https?:\/\//.test(options.baseUrl)) {
    throw new AgentError('BAD_REQUEST', 'createOpenAiCompatibleBackendClient needs options.baseUrl, an http(s) URL such as http://localhost:11434/v1');
  }
  const provider = options.providerName ?? 'OpenAI-compatible server';
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const secrets = secretsOf(options, baseUrl);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'text/event-stream',
    ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
    ...options.headers,
  };
  const replayReasoning = options.replayReasoning ?? true;
  const historyJson = createHistoryJson((content, index) => chatMessagesOf(content, index, replayReasoning, provider));
  return {
    async *streamGenerateContent(model, body, signal) {
      // The history's messages are written from the text kept for each content.
      const messages: JsonObject[] = [];
      const request = toChatCompletionsRequest(options.model ?? model, body, options, messages);
      const messagesJson = historyJson(body.contents ?? [], systemMessagesOf(body));
      const response = await openProviderStream({
        provider,
        fetch: options.fetch,
        url: `${baseUrl}/chat/completions`,
        headers,
        body: fieldsJson(request, new Map([[messages, messagesJson]])),
        signal,
        retry: options.retry,
        secrets,
      });
      yield* translateChatCompletionsStream(readSseEvents(response, { provider, limits: options.limits, signal }), provider, secrets);
    },
    ...mediaMethods(options.upstream, 'createOpenAiCompatibleBackendClient'),
  };
}

/** Each fixed declaration as a Chat Completions tool, translated once. */
const chatTools = new WeakMap<FunctionDeclaration, JsonObject>();

/**
 * The Chat Completions request for a Gemini-shaped body. With `messages`, that array stands in
 * for the translated history and is left empty (the client writes its text from a cache).
 */
export function toChatCompletionsRequest(
  model: string,
  body: GenerateContentRequest,
  options: Omit<OpenAiCompatibleBackendClientOptions, 'fetch' | 'baseUrl'> = {},
  messages?: JsonObject[],
): JsonObject {
  const provider = options.providerName ?? 'OpenAI-compatible server';
  const history = messages ?? chatHistory(body, options.replayReasoning ?? true, provider);
  const request: JsonObject = { model, messages: history, stream: true };
  if (options.includeUsage ?? true) request.stream_options = { include_usage: true };
  const tools = providerTools(body, chatTools, (declaration) => ({
    type: 'function',
    function: { name: declaration.name, description: declaration.description, parameters: parametersSchemaOf(declaration) },
  }));
  if (tools.length > 0) {
    request.tools = tools;
    const calling = functionCallingOf(body);
    if (calling.mode === 'NONE') request.tool_choice = 'none';
    else if (calling.mode === 'ANY') {
      request.tool_choice = calling.allowed.length === 1 ? { type: 'function', function: { name: calling.allowed[0] } } : 'required';
    } else request.tool_choice = 'auto';
  }
  const settings = generationSettingsOf(body);
  if (settings.temperature !== undefined) request.temperature = settings.temperature;
  if (settings.topP !== undefined) request.top_p = settings.topP;
  if (settings.maxOutputTokens !== undefined) request.max_tokens = settings.maxOutputTokens;
  if (settings.stopSequences && settings.stopSequences.length > 0) request.stop = settings.stopSequences;
  if (settings.json) {
    request.response_format = settings.jsonSchema
      ? { type: 'json_schema', json_schema: { name: 'response', schema: settings.jsonSchema } }
      : { type: 'json_object' };
  }
  return options.extraBody ? { ...request, ...options.extraBody } : request;
}

/** The system message and the messages of every content. */
function chatHistory(body: GenerateContentRequest, replayReasoning: boolean, provider: string): JsonObject[] {
  const messages = systemMessagesOf(body);
  (body.contents ?? []).forEach((content, contentIndex) => messages.push(...chatMessagesOf(content, contentIndex, replayReasoning, provider)));
  return messages;
}

/** The system message, when the body has an instruction. */
function systemMessagesOf(body: GenerateContentRequest): JsonObject[] {
  const system = systemTextOf(body);
  return system === undefined ? [] : [{ role: 'system', content: system }];
}

/** The messages one content of the history becomes (none, one, or a tool message per response and a user message). */
function chatMessagesOf(content: LLMContent, contentIndex: number, replayReasoning: boolean, provider: string): JsonObject[] {
  const messages: JsonObject[] = [];
  if (content.role === 'model') appendAssistant(messages, content, contentIndex, replayReasoning);
  else appendUser(messages, content, contentIndex, provider);
  return messages;
}

function appendAssistant(messages: JsonObject[], content: LLMContent, contentIndex: number, replayReasoning: boolean): void {
  let text = '';
  const reasoning = new Map<string, string>();
  const calls: JsonObject[] = [];
  for (const part of content.parts) {
    const call = part.functionCall;
    if (call) {
      calls.push({
        id: wireCallId(call.id, contentIndex, calls.length),
        type: 'function',
        function: { name: call.name, arguments: JSON.stringify(call.args ?? {}) },
      });
      continue;
    }
    if (typeof part.text !== 'string') continue;
    if (part.thought === true) {
      const data = providerDataOf(part, 'openai-compatible');
      if (data && replayReasoning) reasoning.set(data.reasoningField, (reasoning.get(data.reasoningField) ?? '') + part.text);
      continue;
    }
    text += part.text;
  }
  if (text.length === 0 && calls.length === 0 && reasoning.size === 0) return;
  const message: JsonObject = { role: 'assistant', content: text };
  for (const [field, value] of reasoning) message[field] = value;
  if (calls.length > 0) message.tool_calls = calls;
  messages.push(message);
}

function appendUser(messages: JsonObject[], content: LLMContent, contentIndex: number, provider: string): void {
  const pieces: JsonObject[] = [];
  let responsePosition = 0;
  content.parts.forEach((part, partIndex) => {
    const response = part.functionResponse;
    if (response) {
      // Tool messages must follow the assistant message that called them, before any user text.
      messages.push({ role: 'tool', tool_call_id: wireCallId(response.id, contentIndex - 1, responsePosition), content: responseTextOf(response.response) });
      responsePosition += 1;
      return;
    }
    if (part.thought === true) return;
    const piece = userPiece(part, `contents[${contentIndex}].parts[${partIndex}]`, provider);
    if (piece) pieces.push(piece);
  });
  if (pieces.length === 0) return;
  const textOnly = pieces.every((piece) => piece.type === 'text');
  messages.push({ role: 'user', content: textOnly ? pieces.map((piece) => piece.text).join('\n\n') : pieces });
}

function userPiece(part: Part, path: string, provider: string): JsonObject | undefined {
  if (typeof part.text === 'string') return part.text.length > 0 ? { type: 'text', text: part.text } : undefined;
  if (part.json !== undefined) return { type: 'text', text: JSON.stringify(part.json) };
  const media = mediaOf(part, path, provider);
  if (!media) return undefined;
  if (media.mimeType.startsWith('image/')) {
    return { type: 'image_url', image_url: { url: media.kind === 'inline' ? dataUrlOf(media.mimeType, media.data) : media.url } };
  }
  if (media.kind === 'inline' && (media.mimeType.startsWith('text/') || media.mimeType === 'application/json')) {
    return { type: 'text', text: decodeBase64Text(media.data) };
  }
  throw new AgentError('BAD_REQUEST', `${path}: ${provider} takes text and images only, not ${media.mimeType}`, { details: { path } });
}

/** A tool call being put together from deltas. */
interface PendingCall {
  /** The server's id, or empty when it sent none. */
  id: string;
  name: string;
  arguments: string;
  /** The server sent the call whole; a repeat of it must not be appended. */
  whole: boolean;
  /** Handed on as a part; whatever the server sends for it later changes nothing. */
  emitted: boolean;
}

/** Translates a Chat Completions stream (OpenAI and compatible servers) into Gemini chunks. */
export async function* translateChatCompletionsStream(
  events: AsyncIterable<SseEvent>,
  provider: string,
  secrets: readonly string[],
): AsyncGenerator<GenerateContentResponse> {
  const identity: ChunkIdentity = {};
  let reasoning = '';
  let reasoningField: string | undefined;
  const calls = new Map<string, PendingCall>();
  let finishReason: string | undefined;
  let usage: UsageMetadata | undefined;
  let done = false;
  let malformed: string | undefined;
  let emittedCall = false;
  const callId = createCallIds();

  const flushReasoning = (): Part[] => {
    if (reasoning.length === 0 || reasoningField === undefined) return [];
    const part: Part = { thought: true, text: reasoning, [PROVIDER_DATA_FIELD]: { provider: 'openai-compatible', reasoningField } };
    reasoning = '';
    return [part];
  };
  /**
   * The calls not handed on yet, as parts. With `completeOnly` (mid-answer), only those whose
   * arguments are already a whole object: parallel calls may interleave their fragments by index,
   * so a call still missing some may get them after another call's.
   */
  const flushCalls = (completeOnly = false): Part[] => {
    const parts: Part[] = [];
    for (const call of calls.values()) {
      if (call.emitted) continue;
      const args = parseArguments(call.arguments);
      if (completeOnly && (call.arguments.trim().length === 0 || !args || call.name.length === 0)) continue;
      call.emitted = true;
      if (!args || call.name.length === 0) {
        malformed ??= `the arguments of ${call.name || 'a tool call'} are not a JSON object`;
        continue;
      }
      emittedCall = true;
      parts.push({ functionCall: { id: callId(call.id), name: call.name, args } });
    }
    return parts;
  };

  for await (const event of events) {
    const data = event.data.trim();
    if (data.length === 0) continue;
    if (data === '[DONE]') {
      done = true;
      break;
    }
    const chunk = parseEventJson(provider, data, secrets);
    if (chunk.error !== undefined && chunk.error !== null) throw providerError(provider, undefined, errorFieldsOf(chunk), secrets);
    if (typeof chunk.id === 'string') identity.responseId = chunk.id;
    if (typeof chunk.model === 'string' && chunk.model.length > 0) identity.modelVersion = chunk.model;
    if (isObject(chunk.usage)) usage = usageOf(chunk.usage);
    const choice = Array.isArray(chunk.choices) && isObject(chunk.choices[0]) ? chunk.choices[0] : undefined;
    if (!choice) continue;
    const delta = isObject(choice.delta) ? choice.delta : {};
    const parts: Part[] = [];
    for (const field of REASONING_FIELDS) {
      const value = delta[field];
      if (typeof value === 'string' && value.length > 0) {
        reasoningField ??= field;
        reasoning += value;
      }
    }
    // A refusal (OpenAI, with structured outputs) stands where the answer would: shown as its text.
    for (const text of [delta.content, delta.refusal]) {
      if (typeof text === 'string' && text.length > 0) parts.push(...flushReasoning(), { text });
    }
    if (Array.isArray(delta.tool_calls)) {
      parts.push(...flushReasoning());
      delta.tool_calls.forEach((entry, position) => {
        if (!isObject(entry)) return;
        const fn = isObject(entry.function) ? entry.function : {};
        const id = typeof entry.id === 'string' && entry.id.length > 0 ? entry.id : undefined;
        let key = typeof entry.index === 'number' ? `index:${entry.index}` : id !== undefined ? `id:${id}` : `position:${position}`;
        let known = calls.get(key);
        // Another id at an index already taken is another call (a server that sends every whole call as index 0).
        if (known && id !== undefined && known.id.length > 0 && known.id !== id) {
          key = `id:${id}`;
          known = calls.get(key);
        }
        const fragment = typeof fn.arguments === 'string' ? fn.arguments : isObject(fn.arguments) ? JSON.stringify(fn.arguments) : '';
        if (!known) {
          // A new call: the ones before it that are complete can start running.
          parts.push(...flushCalls(true));
          const name = typeof fn.name === 'string' ? fn.name : '';
          calls.set(key, { id: id ?? '', name, arguments: fragment, whole: name.length > 0 && parseArguments(fragment) !== undefined && fragment.length > 0, emitted: false });
          return;
        }
        // A whole call sent again (Groq, xAI repeat chunks) must not run twice.
        if (known.emitted) return;
        if (typeof fn.name === 'string' && fn.name.length > 0 && known.name.length === 0) known.name = fn.name;
        if (known.whole && fragment === known.arguments) return;
        known.arguments += fragment;
        known.whole = false;
      });
    }
    if (typeof choice.finish_reason === 'string' && finishReason === undefined) {
      finishReason = choice.finish_reason;
      parts.push(...flushReasoning(), ...flushCalls());
    }
    if (parts.length > 0) yield partsChunk(parts, identity);
  }
  if (!done && finishReason === undefined) throw truncatedStream(provider, 'the end of its answer');
  const rest = [...flushReasoning(), ...flushCalls()];
  if (rest.length > 0) yield partsChunk(rest, identity);
  const reason = malformed && !emittedCall ? 'MALFORMED_FUNCTION_CALL' : finishReasonOf(finishReason);
  yield finishChunk(reason, usage, identity, reason === 'MALFORMED_FUNCTION_CALL' && malformed ? { finishMessage: malformed } : {});
}

function finishReasonOf(reason: string | undefined): string {
  switch (reason) {
    case 'length':
      return 'MAX_TOKENS';
    case 'content_filter':
      return 'SAFETY';
    case undefined:
    case 'stop':
    case 'tool_calls':
    case 'function_call':
      return 'STOP';
    default:
      return 'OTHER';
  }
}

function usageOf(value: JsonObject): UsageMetadata {
  const usage: UsageMetadata = {};
  if (typeof value.prompt_tokens === 'number') usage.promptTokenCount = value.prompt_tokens;
  const reasoning = isObject(value.completion_tokens_details) && typeof value.completion_tokens_details.reasoning_tokens === 'number' ? value.completion_tokens_details.reasoning_tokens : 0;
  // OpenAI counts reasoning inside `completion_tokens`; some servers (xAI) count it apart.
  if (typeof value.completion_tokens === 'number') usage.candidatesTokenCount = value.completion_tokens >= reasoning ? value.completion_tokens - reasoning : value.completion_tokens;
  if (reasoning > 0) usage.thoughtsTokenCount = reasoning;
  const cached = isObject(value.prompt_tokens_details) && typeof value.prompt_tokens_details.cached_tokens === 'number' ? value.prompt_tokens_details.cached_tokens : undefined;
  if (cached) usage.cachedContentTokenCount = cached;
  if (typeof value.total_tokens === 'number') usage.totalTokenCount = value.total_tokens;
  return usage;
}
