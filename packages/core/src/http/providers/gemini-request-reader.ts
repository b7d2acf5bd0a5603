import { AgentError } from '../../errors/index.js';
import type { JsonObject, LLMContent, Part } from '../../protocol/content.js';
import { createContentCache } from '../../protocol/content-json-cache.js';
import { fixedFrom, fixedJson, isFixed } from '../../protocol/fixed-json.js';
import type { FunctionDeclaration, GenerateContentRequest } from '../../protocol/gemini.js';

/**
 * Reads the pieces of a Gemini-shaped request that every provider translation needs: the system
 * text, the function declarations with JSON Schema parameters, the function-calling mode, the
 * generation settings, media sources and call ids.
 */

/** The system instruction as one text, or `undefined` when there is none. */
export function systemTextOf(body: GenerateContentRequest): string | undefined {
  const parts = body.systemInstruction?.parts ?? [];
  const text = parts
    .map((part) => (typeof part.text === 'string' ? part.text : ''))
    .filter((value) => value.length > 0)
    .join('\n\n');
  return text.length > 0 ? text : undefined;
}

/** Every function declaration of the request, in order. */
export function functionDeclarationsOf(body: GenerateContentRequest): FunctionDeclaration[] {
  const declarations: FunctionDeclaration[] = [];
  for (const tool of body.tools ?? []) for (const declaration of tool.functionDeclarations ?? []) declarations.push(declaration);
  return declarations;
}

/**
 * A provider's tools for the request: each function declaration translated by `translate`, then
 * `extra` (built-in and configured tools). When every declaration is fixed (a run's own, see
 * `fixedJson`), each is translated once and kept in `translations`, and the list is fixed too, so
 * the request is written without serialising its tools again (see `fieldsJson`).
 */
export function providerTools(
  body: GenerateContentRequest,
  translations: WeakMap<FunctionDeclaration, JsonObject>,
  translate: (declaration: FunctionDeclaration) => JsonObject,
  extra: readonly JsonObject[] = [],
): JsonObject[] {
  const declarations = functionDeclarationsOf(body);
  if (!declarations.every(isFixed)) return [...declarations.map(translate), ...extra];
  const tools = declarations.map((declaration) => {
    let tool = translations.get(declaration);
    if (tool === undefined) {
      tool = fixedJson(translate(declaration));
      translations.set(declaration, tool);
    }
    return tool;
  });
  for (const tool of extra) tools.push(fixedJson(tool));
  return fixedFrom(tools);
}

/**
 * Keeps, for each content of a run's history, the JSON of what a provider makes of it
 * (`translate` gives its messages or items), and writes a request's history as one JSON array
 * from those texts, after `leading` items (a system message): a request carries the history
 * without translating or serialising again the contents it sent before.
 */
export function createHistoryJson(
  translate: (content: LLMContent, index: number) => readonly JsonObject[],
): (contents: readonly LLMContent[], leading?: readonly JsonObject[]) => string {
  const itemsJson = createContentCache((content, index) => {
    let text = '';
    for (const item of translate(content as LLMContent, index)) text += `${text === '' ? '' : ','}${JSON.stringify(item)}`;
    return text;
  });
  return (contents, leading = []) =>
    joinedItemsJson([...leading.map((item) => JSON.stringify(item)), ...contents.map((content, index) => itemsJson(content, index))]);
}

/** A JSON array written from pieces of comma-separated items, the empty ones left out. */
export function joinedItemsJson(pieces: readonly string[]): string {
  let text = '[';
  for (const piece of pieces) {
    if (piece === '') continue;
    text += `${text === '[' ? '' : ','}${piece}`;
  }
  return `${text}]`;
}

/** Which Gemini built-in tools the request asks for (`googleSearch`, `codeExecution`, ...). */
export function builtinToolsOf(body: GenerateContentRequest): Set<string> {
  const names = new Set<string>();
  for (const tool of body.tools ?? []) for (const key of Object.keys(tool)) if (key !== 'functionDeclarations') names.add(key);
  return names;
}

/** The JSON Schema of a declaration's parameters: `parametersJsonSchema`, or `parameters` converted from Gemini's schema dialect. */
export function parametersSchemaOf(declaration: FunctionDeclaration): JsonObject {
  if (isObject(declaration.parametersJsonSchema)) return declaration.parametersJsonSchema;
  if (isObject(declaration.parameters)) return fromGeminiSchema(declaration.parameters) as JsonObject;
  return { type: 'object', properties: {} };
}

/** Gemini's OpenAPI-style schema (`"type": "OBJECT"`, `nullable`) as plain JSON Schema. */
function fromGeminiSchema(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(fromGeminiSchema);
  if (!isObject(value)) return value;
  const result: JsonObject = {};
  for (const [key, inner] of Object.entries(value)) {
    if (key === 'type' && typeof inner === 'string') result.type = inner.toLowerCase();
    else if (key === 'nullable') continue;
    else if (key === 'properties' && isObject(inner)) {
      result.properties = Object.fromEntries(Object.entries(inner).map(([name, schema]) => [name, fromGeminiSchema(schema)]));
    } else result[key] = fromGeminiSchema(inner);
  }
  if (value.nullable === true && typeof result.type === 'string') result.type = [result.type, 'null'];
  return result;
}

/** The function-calling mode of the request (`AUTO` when unset) and the functions it allows. */
export function functionCallingOf(body: GenerateContentRequest): { mode: 'AUTO' | 'ANY' | 'NONE'; allowed: string[] } {
  const config = body.toolConfig?.functionCallingConfig;
  const mode = config?.mode === 'ANY' ? 'ANY' : config?.mode === 'NONE' ? 'NONE' : 'AUTO';
  return { mode, allowed: Array.isArray(config?.allowedFunctionNames) ? config.allowedFunctionNames : [] };
}

/** The generation settings every provider can express. */
export interface GenerationSettings {
  temperature?: number;
  topP?: number;
  topK?: number;
  maxOutputTokens?: number;
  stopSequences?: string[];
  /** A JSON Schema the answer must follow (`responseMimeType: application/json`). */
  jsonSchema?: JsonObject;
  /** The answer must be JSON, schema or not. */
  json: boolean;
  includeThoughts: boolean;
  /** `-1` means dynamic, `0` off. */
  thinkingBudget?: number;
  thinkingLevel?: string;
}

/** Reads `generationConfig`, ignoring values of the wrong type. */
export function generationSettingsOf(body: GenerateContentRequest): GenerationSettings {
  const config = (body.generationConfig ?? {}) as JsonObject;
  const settings: GenerationSettings = { json: config.responseMimeType === 'application/json', includeThoughts: false };
  if (typeof config.temperature === 'number') settings.temperature = config.temperature;
  if (typeof config.topP === 'number') settings.topP = config.topP;
  if (typeof config.topK === 'number') settings.topK = config.topK;
  if (typeof config.maxOutputTokens === 'number') settings.maxOutputTokens = config.maxOutputTokens;
  if (Array.isArray(config.stopSequences)) settings.stopSequences = config.stopSequences.filter((item): item is string => typeof item === 'string');
  const schema = isObject(config.responseJsonSchema) ? config.responseJsonSchema : isObject(config.responseSchema) ? (fromGeminiSchema(config.responseSchema) as JsonObject) : undefined;
  if (schema && settings.json) settings.jsonSchema = schema;
  const thinking = isObject(config.thinkingConfig) ? config.thinkingConfig : undefined;
  if (thinking) {
    settings.includeThoughts = thinking.includeThoughts === true;
    if (typeof thinking.thinkingBudget === 'number') settings.thinkingBudget = thinking.thinkingBudget;
    if (typeof thinking.thinkingLevel === 'string') settings.thinkingLevel = thinking.thinkingLevel.toLowerCase();
  }
  return settings;
}

/** Media a part carries, as inline bytes or a URL the provider can fetch itself. */
export type MediaSource = { kind: 'inline'; mimeType: string; data: string; title?: string } | { kind: 'url'; mimeType: string; url: string };

const GEMINI_FILE_URI = /^https:\/\/generativelanguage\.googleapis\.com\//;

/**
 * The media of `part` (`inlineData` or an http(s) `fileData`), or `undefined` when it carries
 * none. Throws `BAD_REQUEST` naming the part for media the provider cannot read: a Gemini File
 * API URI, a Drive or blob handle.
 */
export function mediaOf(part: Part, path: string, provider: string): MediaSource | undefined {
  if (part.inlineData) {
    const source: MediaSource = { kind: 'inline', mimeType: part.inlineData.mimeType, data: part.inlineData.data };
    if (typeof part.inlineData.title === 'string') source.title = part.inlineData.title;
    return source;
  }
  if (part.fileData) {
    const uri = part.fileData.fileUri;
    if (GEMINI_FILE_URI.test(uri) || !/^https?:\/\//.test(uri)) {
      throw new AgentError('BAD_REQUEST', `${path}.fileData: ${provider} cannot read "${uri.slice(0, 120)}"; send the file inline or as a public http(s) URL`, {
        details: { path: `${path}.fileData` },
      });
    }
    return { kind: 'url', mimeType: part.fileData.mimeType, url: uri };
  }
  if (part.storedData) {
    throw new AgentError('BAD_REQUEST', `${path}.storedData: ${provider} cannot read stored handles; resolve the file before the request`, {
      details: { path: `${path}.storedData` },
    });
  }
  return undefined;
}

/** A `data:` URL for inline bytes. */
export function dataUrlOf(mimeType: string, data: string): string {
  return `data:${mimeType};base64,${data}`;
}

/**
 * The id a call or response goes by on the provider's wire. Calls that came with an id keep it;
 * a call without one (a history from a model that gives none) and its response get the same
 * made-up id from their position: call `k` of content `i` answers to response `k` of content `i + 1`.
 */
export function wireCallId(id: string | undefined, callContentIndex: number, position: number): string {
  return typeof id === 'string' && id.length > 0 ? id : `call_${callContentIndex}_${position}`;
}

/** A function response as the text a provider's tool result takes. */
export function responseTextOf(response: JsonObject): string {
  return JSON.stringify(response);
}

/** Whether a function response is the loop's shape for a failed handler, `{"error": "..."}`. */
export function isErrorResponse(response: JsonObject): boolean {
  const keys = Object.keys(response);
  return keys.length === 1 && keys[0] === 'error';
}

/** Decodes base64 text content (for `text/*` inline parts). */
export function decodeBase64Text(data: string): string {
  const binary = atob(data);
  const bytes = new Uint8Array(binary.length);
  for (let index = 0; index < binary.length; index += 1) bytes[index] = binary.charCodeAt(index);
  return new TextDecoder().decode(bytes);
}

/** Parses streamed tool arguments: empty means `{}`; anything but a JSON object is `undefined`. */
export function parseArguments(text: string): JsonObject | undefined {
  if (text.trim().length === 0) return {};
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
