import { AgentError } from '../../errors/index.js';
import type { BackendClient } from '../../ports/index.js';
import type { JsonObject, LLMContent, Part } from '../../protocol/content.js';
import { createContentCache } from '../../protocol/content-json-cache.js';
import { fieldsJson } from '../../protocol/fixed-json.js';
import type { FunctionDeclaration, GenerateContentRequest, GenerateContentResponse, UsageMetadata } from '../../protocol/gemini.js';
import type { SseEvent } from '../../sse/index.js';
import { createCallIds, finishChunk, partsChunk, progressChunk, type ChunkIdentity, type ServerToolProgress } from './gemini-chunks.js';
import {
  builtinToolsOf,
  decodeBase64Text,
  functionCallingOf,
  generationSettingsOf,
  isErrorResponse,
  isObject,
  joinedItemsJson,
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

/** Options of {@link createAnthropicBackendClient}. */
export interface AnthropicBackendClientOptions extends ProviderClientOptions {
  /** `max_tokens` when the run sets no `maxOutputTokens`. Default 16 000 (4096 or 8192 for Claude 3 and 3.5 models). */
  maxTokens?: number;
  /**
   * Extended thinking: its token budget (default 4096), or `false` to turn it off. It is on when the
   * run asks for thoughts and the model can think; it is left out of a request that forces a
   * function call, which the API refuses with thinking on.
   */
  thinking?: false | { budgetTokens: number };
  /** Provider-executed tools added to every request, e.g. `{ type: 'web_search_20250305', name: 'web_search' }`. */
  serverTools?: JsonObject[];
  /** Beta features, sent as `anthropic-beta`. */
  betas?: string[];
  /** `anthropic-version`. Default `2023-06-01`. */
  version?: string;
}

const PROVIDER = 'Anthropic';
const DEFAULT_BASE_URL = 'https://api.anthropic.com/v1';
const DEFAULT_MAX_TOKENS = 16_000;
const DEFAULT_THINKING_BUDGET = 4096;
const MIN_THINKING_BUDGET = 1024;
/** The most output older models accept; newer ones take {@link DEFAULT_MAX_TOKENS}. */
function defaultMaxTokens(model: string): number {
  if (/^claude-3-(?:opus|sonnet|haiku)/i.test(model)) return 4096;
  if (/^claude-3-5-/i.test(model)) return 8192;
  return DEFAULT_MAX_TOKENS;
}

/** Models from before extended thinking. */
const NO_THINKING = /^claude-(?:instant|2|3-(?:5-|haiku|opus|sonnet))/i;

/**
 * A `BackendClient` for the Anthropic Messages API (`POST /v1/messages`, streamed). Thinking
 * blocks with their signatures, tool use blocks and server tool blocks ride on their parts under
 * `providerData` and go back unchanged; tool use ids (`toolu_...`) are kept and matched; server
 * tools (web search, web fetch, code execution) report progress in `serverToolProgress`.
 *
 * @example
 * ```ts
 * const backend = createAnthropicBackendClient({ apiKey: env.ANTHROPIC_API_KEY, fetch, model: 'claude-sonnet-4-5' });
 * ```
 */
export function createAnthropicBackendClient(options: AnthropicBackendClientOptions): BackendClient {
  if (!options.apiKey && !options.baseUrl) {
    throw new AgentError('UNAUTHENTICATED', 'createAnthropicBackendClient needs options.apiKey (or options.baseUrl for a server without keys)');
  }
  const baseUrl = (options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
  const secrets = secretsOf(options, baseUrl);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'text/event-stream',
    'anthropic-version': options.version ?? '2023-06-01',
    ...(options.apiKey ? { 'x-api-key': options.apiKey } : {}),
    ...(options.betas && options.betas.length > 0 ? { 'anthropic-beta': options.betas.join(',') } : {}),
    ...options.headers,
  };
  const turnOf = createContentCache((content, index) => keptTurnOf(content as LLMContent, index));
  return {
    async *streamGenerateContent(model, body, signal) {
      // The history's messages are written from the text kept for each content.
      const now = Date.now();
      const contents = body.contents ?? [];
      const kept = keptHistory(contents, now, turnOf);
      const messages: JsonObject[] = [];
      const request = toAnthropicRequest(options.model ?? model, body, options, now, kept.container === undefined ? { messages } : { messages, container: kept.container });
      // A turn the API paused (a long server tool loop) goes on in a new request that ends with
      // what it said so far, unchanged; the parts of every round make one model turn.
      const paused: Part[] = [];
      let usage: UsageMetadata | undefined;
      for (let round = 0; ; round += 1) {
        let history = kept.json;
        if (paused.length > 0) {
          const turn = contentTurnOf({ role: 'model', parts: paused }, contents.length);
          history = withPausedTurn(history, turn.blocks);
          // A container the paused turn started (code execution) serves the rest of it.
          const container = turn.container && containerAt(turn.container, now);
          if (container) request.container = container;
        }
        const response = await openProviderStream({
          provider: PROVIDER,
          fetch: options.fetch,
          url: `${baseUrl}/messages`,
          headers,
          body: fieldsJson(request, new Map([[messages, history]])),
          signal,
          retry: options.retry,
          secrets,
        });
        const stream = translateAnthropicStream(readSseEvents(response, { provider: PROVIDER, limits: options.limits, signal }), secrets, {
          goesOn: round < MAX_PAUSE_CONTINUATIONS,
          ...(usage ? { usage } : {}),
        });
        for (;;) {
          const next = await stream.next();
          if (next.done) {
            if (next.value === undefined) return;
            usage = next.value.usage;
            break;
          }
          const parts = next.value.candidates?.[0]?.content?.parts;
          if (parts) paused.push(...parts);
          yield next.value;
        }
      }
    },
    ...mediaMethods(options.upstream, 'createAnthropicBackendClient'),
  };
}

/** How many times one turn the API paused is continued before it ends as it stands. */
const MAX_PAUSE_CONTINUATIONS = 5;

/** The history's messages (a JSON array) with the paused turn's blocks as a last assistant message. */
function withPausedTurn(historyJson: string, blocks: JsonObject[]): string {
  if (blocks.length === 0) return historyJson;
  const message = JSON.stringify({ role: 'assistant', content: blocks });
  return historyJson === '[]' ? `[${message}]` : `${historyJson.slice(0, -1)},${message}]`;
}

/** Each fixed declaration as a Messages tool, translated once. */
const anthropicTools = new WeakMap<FunctionDeclaration, JsonObject>();

/**
 * The Messages request for a Gemini-shaped body. With `history`, its `messages` array stands in
 * for the translated history (the client writes its text from a cache).
 */
export function toAnthropicRequest(
  model: string,
  body: GenerateContentRequest,
  options: Omit<AnthropicBackendClientOptions, 'fetch'> = {},
  now: number = Date.now(),
  history?: MessagesHistory,
): JsonObject {
  const settings = generationSettingsOf(body);
  const { messages, container } = history ?? toMessages(body.contents ?? [], now);
  const request: JsonObject = { model, max_tokens: settings.maxOutputTokens ?? options.maxTokens ?? defaultMaxTokens(model), messages, stream: true };
  const system = systemTextOf(body);
  if (system !== undefined) request.system = system;
  if (container !== undefined) request.container = container;

  const extra: JsonObject[] = [];
  if (builtinToolsOf(body).has('googleSearch')) extra.push({ type: 'web_search_20250305', name: 'web_search' });
  for (const tool of options.serverTools ?? []) extra.push(tool);
  const tools = providerTools(
    body,
    anthropicTools,
    (declaration) => {
      const schema = parametersSchemaOf(declaration);
      return { name: declaration.name, description: declaration.description, input_schema: schema.type === 'object' ? schema : { type: 'object', ...schema } };
    },
    extra,
  );
  const calling = functionCallingOf(body);
  const forced = tools.length > 0 && calling.mode === 'ANY';
  if (tools.length > 0) {
    request.tools = tools;
    if (calling.mode === 'NONE') request.tool_choice = { type: 'none' };
    else if (forced) request.tool_choice = calling.allowed.length === 1 ? { type: 'tool', name: calling.allowed[0] } : { type: 'any' };
    else request.tool_choice = { type: 'auto' };
  } else {
    // The API refuses a history with tool use blocks in a request that defines no tools (the
    // tool-free last turn at the turn cap): the functions it called are declared, not callable.
    const called = calledFunctionTools(body.contents ?? []);
    if (called.length > 0) {
      request.tools = called;
      request.tool_choice = { type: 'none' };
    }
  }

  const wantsThinking = settings.includeThoughts || (settings.thinkingBudget !== undefined && settings.thinkingBudget > 0);
  const thinking = options.thinking !== false && wantsThinking && !forced && !NO_THINKING.test(model) && settings.thinkingBudget !== 0;
  if (thinking) {
    const requested = options.thinking ? options.thinking.budgetTokens : settings.thinkingBudget !== undefined && settings.thinkingBudget > 0 ? settings.thinkingBudget : DEFAULT_THINKING_BUDGET;
    const maxTokens = request.max_tokens as number;
    const budget = Math.max(MIN_THINKING_BUDGET, Math.min(requested, maxTokens - 1));
    if (budget < maxTokens) request.thinking = { type: 'enabled', budget_tokens: budget };
  }
  // With thinking the API takes no sampling settings; newer models take temperature or top_p, not both.
  if (!request.thinking) {
    if (settings.temperature !== undefined) request.temperature = settings.temperature;
    else if (settings.topP !== undefined) request.top_p = settings.topP;
    if (settings.topK !== undefined) request.top_k = settings.topK;
  }
  if (settings.stopSequences && settings.stopSequences.length > 0) request.stop_sequences = settings.stopSequences;
  return request;
}

/** A stand-in declaration for each function the history calls, to be shown and not called. */
function calledFunctionTools(contents: readonly LLMContent[]): JsonObject[] {
  const names = new Set<string>();
  for (const content of contents) {
    if (content.role !== 'model') continue;
    for (const part of content.parts) if (part.functionCall) names.add(part.functionCall.name);
  }
  return [...names].map((name) => ({ name, description: 'Not available in this turn.', input_schema: { type: 'object' } }));
}

/** The history as Messages: one message per content, neighbours of the same role merged. */
interface MessagesHistory {
  messages: JsonObject[];
  container?: string;
}

/** `indexes` gives each content's index in the history when `contents` are a part of it. */
function toMessages(contents: readonly LLMContent[], now: number, indexes?: readonly number[]): MessagesHistory {
  const messages: Array<{ role: 'user' | 'assistant'; content: JsonObject[] }> = [];
  let container: string | undefined;
  contents.forEach((content, at) => {
    const turn = contentTurnOf(content, indexes?.[at] ?? at);
    if (turn.container) container = containerAt(turn.container, now);
    const { role, blocks } = turn;
    if (blocks.length === 0) return;
    const last = messages[messages.length - 1];
    if (last && last.role === role) {
      last.content.push(...blocks);
      if (role === 'user') last.content.sort((a, b) => Number(b.type === 'tool_result') - Number(a.type === 'tool_result'));
    } else {
      messages.push({ role, content: blocks });
    }
  });
  return container === undefined ? { messages } : { messages, container };
}

/** What one content of the history becomes, before neighbours of the same role are merged. */
interface ContentTurn {
  role: 'user' | 'assistant';
  blocks: JsonObject[];
  /** The last code-execution container the content names. */
  container?: { id: unknown; expiresAt: number };
}

/** The id of a named container still alive at `now`, else `undefined`. */
function containerAt(container: { id: unknown; expiresAt: number }, now: number): string | undefined {
  return typeof container.id === 'string' && !(container.expiresAt <= now) ? container.id : undefined;
}

function contentTurnOf(content: LLMContent, contentIndex: number): ContentTurn {
  const path = `contents[${contentIndex}]`;
  const role = content.role === 'model' ? 'assistant' : 'user';
  const blocks: JsonObject[] = [];
  let container: ContentTurn['container'];
  if (role === 'assistant') {
    let callPosition = 0;
    for (const part of content.parts) {
      const data = providerDataOf(part, 'anthropic');
      if (data && 'container' in data) {
        const expires = typeof data.container.expires_at === 'string' ? Date.parse(data.container.expires_at) : Number.NaN;
        container = { id: data.container.id, expiresAt: expires };
        continue;
      }
      const call = part.functionCall;
      if (call) {
        const position = callPosition;
        callPosition += 1;
        if (data && data.block.type === 'tool_use') blocks.push(data.block);
        else blocks.push({ type: 'tool_use', id: wireCallId(call.id, contentIndex, position), name: call.name, input: call.args ?? {} });
        continue;
      }
      if (data) {
        blocks.push(data.block);
        continue;
      }
      // A thought without its signature (another provider's) cannot go back to Claude.
      if (part.thought === true) continue;
      if (typeof part.text === 'string' && part.text.length > 0) blocks.push({ type: 'text', text: part.text });
    }
  } else {
    const results: JsonObject[] = [];
    let responsePosition = 0;
    content.parts.forEach((part, partIndex) => {
      const response = part.functionResponse;
      if (response) {
        const result: JsonObject = {
          type: 'tool_result',
          tool_use_id: wireCallId(response.id, contentIndex - 1, responsePosition),
          content: responseTextOf(response.response),
        };
        if (isErrorResponse(response.response)) result.is_error = true;
        results.push(result);
        responsePosition += 1;
        return;
      }
      if (part.thought === true) return;
      const block = userBlock(part, `${path}.parts[${partIndex}]`);
      if (block) blocks.push(block);
    });
    // Tool results must open the user message.
    blocks.unshift(...results);
  }
  return container === undefined ? { role, blocks } : { role, blocks, container };
}

/** A content as kept by a client: the JSON of its message alone (empty when it has no blocks). */
interface KeptTurn {
  role: ContentTurn['role'];
  message: string;
  container?: ContentTurn['container'];
}

function keptTurnOf(content: LLMContent, contentIndex: number): KeptTurn {
  const turn = contentTurnOf(content, contentIndex);
  const message = turn.blocks.length === 0 ? '' : JSON.stringify({ role: turn.role, content: turn.blocks });
  return turn.container === undefined ? { role: turn.role, message } : { role: turn.role, message, container: turn.container };
}

/**
 * The history's messages as JSON, from what `turnOf` keeps for each content, with the container
 * alive at `now`: what {@link toMessages} gives, written without translating a content twice.
 * Neighbours of the same role (rare) are merged as `toMessages` merges them, from their blocks.
 */
function keptHistory(contents: readonly LLMContent[], now: number, turnOf: (content: LLMContent, index: number) => KeptTurn): { json: string; container?: string } {
  const messages: string[] = [];
  let container: string | undefined;
  /** The indexes of the contents of the message being gathered, and its role. */
  let group: number[] = [];
  let role: string | undefined;
  const close = (): void => {
    if (group.length === 1) messages.push(turnOf(contents[group[0] as number] as LLMContent, group[0] as number).message);
    else if (group.length > 1) messages.push(JSON.stringify(toMessages(group.map((index) => contents[index] as LLMContent), now, group).messages[0]));
    group = [];
  };
  for (let index = 0; index < contents.length; index += 1) {
    const turn = turnOf(contents[index] as LLMContent, index);
    if (turn.container) container = containerAt(turn.container, now);
    if (turn.message === '') continue;
    if (turn.role !== role) close();
    role = turn.role;
    group.push(index);
  }
  close();
  const json = joinedItemsJson(messages);
  return container === undefined ? { json } : { json, container };
}

function userBlock(part: Part, path: string): JsonObject | undefined {
  if (typeof part.text === 'string') return part.text.length > 0 ? { type: 'text', text: part.text } : undefined;
  if (part.json !== undefined) return { type: 'text', text: JSON.stringify(part.json) };
  const media = mediaOf(part, path, PROVIDER);
  if (!media) return undefined;
  if (media.mimeType.startsWith('image/')) {
    return { type: 'image', source: media.kind === 'inline' ? { type: 'base64', media_type: media.mimeType, data: media.data } : { type: 'url', url: media.url } };
  }
  if (media.mimeType === 'application/pdf') {
    return { type: 'document', source: media.kind === 'inline' ? { type: 'base64', media_type: media.mimeType, data: media.data } : { type: 'url', url: media.url } };
  }
  if (media.kind === 'inline' && (media.mimeType.startsWith('text/') || media.mimeType === 'application/json')) {
    return { type: 'document', source: { type: 'text', media_type: 'text/plain', data: decodeBase64Text(media.data) } };
  }
  throw new AgentError('BAD_REQUEST', `${path}: ${PROVIDER} does not take ${media.mimeType} files; send images, PDF or text`, { details: { path } });
}

/** A content block being streamed. */
interface OpenBlock {
  block: JsonObject;
  text: string;
  thinking: string;
  signature: string;
  json: string;
  citations: JsonObject[];
}

/** How a Messages stream is read when its turn may go on in another request. */
interface StreamRound {
  /** A `pause_turn` stop ends the stream without a finish chunk: the turn goes on. */
  goesOn?: boolean;
  /** What the earlier requests of the turn cost, added to this one's. */
  usage?: UsageMetadata;
}

/**
 * Translates a Messages event stream into Gemini chunks. When `round.goesOn` and the API paused
 * the turn, the stream ends without a finish chunk and returns the usage so far.
 */
export async function* translateAnthropicStream(
  events: AsyncIterable<SseEvent>,
  secrets: readonly string[],
  round: StreamRound = {},
): AsyncGenerator<GenerateContentResponse, { usage: UsageMetadata } | undefined> {
  const identity: ChunkIdentity = {};
  const open = new Map<number, OpenBlock>();
  let usage: UsageMetadata = {};
  let stopReason: string | undefined;
  let malformed: string | undefined;
  let sawCall = false;
  let container: JsonObject | undefined;
  const callId = createCallIds();
  for await (const event of events) {
    const data = event.data.trim();
    if (data.length === 0) continue;
    const payload = parseEventJson(PROVIDER, data, secrets);
    const type = typeof payload.type === 'string' ? payload.type : (event.event ?? '');
    switch (type) {
      case 'message_start': {
        const message = isObject(payload.message) ? payload.message : {};
        if (typeof message.id === 'string') identity.responseId = message.id;
        if (typeof message.model === 'string') identity.modelVersion = message.model;
        usage = usageOf(message.usage, usage);
        break;
      }
      case 'content_block_start': {
        const index = indexOf(payload);
        const block = isObject(payload.content_block) ? { ...payload.content_block } : undefined;
        if (!block || typeof block.type !== 'string') {
          throw new AgentError('MODEL_ERROR', `${PROVIDER} sent content_block_start ${index} without a block`, { details: { provider: PROVIDER } });
        }
        open.set(index, { block, text: '', thinking: '', signature: '', json: '', citations: [] });
        if (block.type === 'server_tool_use' || block.type === 'mcp_tool_use') {
          yield progressChunk(toolProgress(block, 'in_progress'), [], identity);
        }
        break;
      }
      case 'content_block_delta': {
        const index = indexOf(payload);
        const current = open.get(index);
        if (!current) {
          throw new AgentError('MODEL_ERROR', `${PROVIDER} sent content_block_delta for block ${index}, which was never started`, { details: { provider: PROVIDER } });
        }
        const delta = isObject(payload.delta) ? payload.delta : {};
        if (delta.type === 'text_delta' && typeof delta.text === 'string') current.text += delta.text;
        else if (delta.type === 'input_json_delta' && typeof delta.partial_json === 'string') current.json += delta.partial_json;
        else if (delta.type === 'thinking_delta' && typeof delta.thinking === 'string') current.thinking += delta.thinking;
        else if (delta.type === 'signature_delta' && typeof delta.signature === 'string') current.signature += delta.signature;
        else if (delta.type === 'citations_delta' && isObject(delta.citation)) current.citations.push(delta.citation);
        break;
      }
      case 'content_block_stop': {
        const index = indexOf(payload);
        const current = open.get(index);
        if (!current) break;
        open.delete(index);
        const finished = finishBlock(current, callId);
        if (finished.malformed) malformed ??= finished.malformed;
        if (finished.call) sawCall = true;
        if (finished.parts.length > 0 || finished.progress) {
          yield finished.progress ? progressChunk(finished.progress, finished.parts, identity) : partsChunk(finished.parts, identity);
        }
        break;
      }
      case 'message_delta': {
        const delta = isObject(payload.delta) ? payload.delta : {};
        if (typeof delta.stop_reason === 'string') stopReason = delta.stop_reason;
        if (isObject(delta.container)) container = delta.container;
        usage = usageOf(payload.usage, usage);
        break;
      }
      case 'message_stop': {
        if (container) yield partsChunk([{ [PROVIDER_DATA_FIELD]: { provider: 'anthropic', container } }], identity);
        if (round.usage) usage = addedUsage(round.usage, usage);
        const total = (usage.promptTokenCount ?? 0) + (usage.candidatesTokenCount ?? 0);
        if (total > 0) usage.totalTokenCount = total;
        if (stopReason === 'pause_turn' && round.goesOn) return { usage };
        const reason = finishReasonOf(stopReason, sawCall ? undefined : malformed);
        yield finishChunk(reason, usage, identity, reason === 'MALFORMED_FUNCTION_CALL' && malformed ? { finishMessage: malformed } : {});
        return undefined;
      }
      case 'error':
        throw providerError(PROVIDER, undefined, errorFieldsOf(payload), secrets);
      default:
        // `ping` and event types newer than this client.
        break;
    }
  }
  throw truncatedStream(PROVIDER, 'message_stop');
}

function indexOf(payload: JsonObject): number {
  return typeof payload.index === 'number' ? payload.index : -1;
}

interface FinishedBlock {
  parts: Part[];
  progress?: ServerToolProgress;
  call?: boolean;
  malformed?: string;
}

/**
 * One finished content block as Gemini parts; the block rides on its part, unchanged but for the
 * id of a tool use that came without one or with one taken (see `createCallIds`).
 */
function finishBlock(current: OpenBlock, callId: (id: unknown) => string): FinishedBlock {
  const { block } = current;
  const carry = (extra: Part, stored: JsonObject): Part => ({ ...extra, [PROVIDER_DATA_FIELD]: { provider: 'anthropic', block: stored } });
  switch (block.type) {
    case 'text': {
      const text = (typeof block.text === 'string' ? block.text : '') + current.text;
      const earlier = Array.isArray(block.citations) ? (block.citations as JsonObject[]) : [];
      const citations = [...earlier, ...current.citations];
      if (citations.length === 0) return { parts: text.length > 0 ? [{ text }] : [] };
      // Cited text goes back with its citations (they carry the provider's encrypted index).
      return { parts: [carry({ text }, { ...block, text, citations })] };
    }
    case 'thinking': {
      const thinking = (typeof block.thinking === 'string' ? block.thinking : '') + current.thinking;
      const signature = current.signature.length > 0 ? current.signature : typeof block.signature === 'string' ? block.signature : '';
      return { parts: [carry({ thought: true, text: thinking }, { ...block, thinking, signature })] };
    }
    case 'redacted_thinking':
      return { parts: [carry({ thought: true, text: '' }, block)] };
    case 'tool_use': {
      const name = typeof block.name === 'string' ? block.name : '';
      const input = current.json.length > 0 ? parseArguments(current.json) : isObject(block.input) ? block.input : {};
      if (!input || name.length === 0) return { parts: [], malformed: `the input of ${name || 'a tool call'} is not a JSON object` };
      const id = callId(block.id);
      const stored = { ...block, id, input };
      return { parts: [carry({ functionCall: { id, name, args: input } }, stored)], call: true };
    }
    case 'server_tool_use':
    case 'mcp_tool_use': {
      const input = current.json.length > 0 ? (parseArguments(current.json) ?? { raw: current.json }) : isObject(block.input) ? block.input : {};
      const stored = { ...block, input };
      return { parts: [carry({}, stored)], progress: toolProgress(stored, 'running') };
    }
    default: {
      // Server tool results, MCP results and block types newer than this client: kept verbatim.
      const progress = String(block.type).endsWith('_tool_result') ? resultProgress(block) : undefined;
      return progress ? { parts: [carry({}, block)], progress } : { parts: [carry({}, block)] };
    }
  }
}

function toolProgress(block: JsonObject, status: string): ServerToolProgress {
  const progress: ServerToolProgress = {
    provider: 'anthropic',
    tool: typeof block.name === 'string' ? block.name : String(block.type),
    id: typeof block.id === 'string' ? block.id : '',
    status,
  };
  if (isObject(block.input) && Object.keys(block.input).length > 0) progress.detail = { input: block.input };
  return progress;
}

function resultProgress(block: JsonObject): ServerToolProgress {
  const content = block.content;
  const failed = block.is_error === true || (isObject(content) && typeof content.type === 'string' && content.type.endsWith('_error'));
  return {
    provider: 'anthropic',
    tool: String(block.type).replace(/_tool_result$/, ''),
    id: typeof block.tool_use_id === 'string' ? block.tool_use_id : '',
    status: failed ? 'failed' : 'completed',
    detail: { content },
  };
}

function finishReasonOf(stopReason: string | undefined, malformed: string | undefined): string {
  if (malformed) return 'MALFORMED_FUNCTION_CALL';
  switch (stopReason) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'MAX_TOKENS';
    case 'refusal':
      return 'SAFETY';
    case undefined:
    case 'end_turn':
    case 'tool_use':
    case 'stop_sequence':
    case 'pause_turn':
      return 'STOP';
    default:
      return 'OTHER';
  }
}

/** The usage of two requests of one turn together. */
function addedUsage(earlier: UsageMetadata, later: UsageMetadata): UsageMetadata {
  const sum: UsageMetadata = { ...later };
  for (const key of ['promptTokenCount', 'cachedContentTokenCount', 'candidatesTokenCount'] as const) {
    const total = (earlier[key] ?? 0) + (later[key] ?? 0);
    if (total > 0) sum[key] = total;
  }
  return sum;
}

function usageOf(value: unknown, known: UsageMetadata): UsageMetadata {
  if (!isObject(value)) return known;
  const usage: UsageMetadata = { ...known };
  const number = (key: string): number | undefined => (typeof value[key] === 'number' ? (value[key] as number) : undefined);
  const input = number('input_tokens');
  const cacheRead = number('cache_read_input_tokens') ?? 0;
  const cacheWrite = number('cache_creation_input_tokens') ?? 0;
  if (input !== undefined) usage.promptTokenCount = input + cacheRead + cacheWrite;
  if (cacheRead > 0) usage.cachedContentTokenCount = cacheRead;
  const output = number('output_tokens');
  if (output !== undefined) usage.candidatesTokenCount = output;
  return usage;
}
