import { array, boolean, enumOf, looseObject, optional, record, string, unknown, type Infer } from './shape.js';

/**
 * Gemini `Content` and `Part` as the Gemini API defines them, as shapes (`shape.ts`): the one
 * description the browser client checks events against and the server builds its zod schemas
 * from (`content.ts`).
 *
 * They are deliberately loose: every object keeps fields it does not declare, so a field a
 * provider adds tomorrow passes through untouched (byte for byte after re-serialisation). Only
 * the fields our code reads are typed.
 */

/** `inlineData`: base64 bytes with a MIME type. */
export const InlineDataShape = looseObject({
  mimeType: string(),
  data: string(),
  title: optional(string()),
});

/** `fileData`: a file referenced by URI (Gemini File API, Drive, YouTube). */
export const FileDataPartShape = looseObject({
  fileUri: string(),
  mimeType: string(),
  resourceKey: optional(string()),
});

/** `storedData`: an Opal blob or Drive handle, resolved before the model sees it. */
export const StoredDataShape = looseObject({
  handle: string(),
  mimeType: string(),
  resourceKey: optional(string()),
});

/** A JSON object with any fields. */
export const JsonObjectShape = record(unknown());

/** `functionCall` as the model sends it; `id` is present only when the provider gave one. */
export const FunctionCallShape = looseObject({
  name: string(),
  args: optional(JsonObjectShape),
  id: optional(string()),
});

/** `functionResponse` as we send it back; `response` is always a JSON object. */
export const FunctionResponseShape = looseObject({
  name: string(),
  response: JsonObjectShape,
  id: optional(string()),
});

/**
 * One part of a content. Exactly one data field is expected (`text`, `inlineData`, ...), plus
 * the optional flags `thought` and `thoughtSignature`; unknown fields are kept.
 */
export const PartShape = looseObject({
  text: optional(string()),
  thought: optional(boolean()),
  thoughtSignature: optional(string()),
  inlineData: optional(InlineDataShape),
  fileData: optional(FileDataPartShape),
  storedData: optional(StoredDataShape),
  functionCall: optional(FunctionCallShape),
  functionResponse: optional(FunctionResponseShape),
  executableCode: optional(looseObject({ language: optional(string()), code: optional(string()) })),
  codeExecutionResult: optional(looseObject({ outcome: optional(string()), output: optional(string()) })),
  json: optional(unknown()),
});

/** A Gemini `Content`: a role and its parts. `role` is absent on some wire payloads. */
export const LLMContentShape = looseObject({
  role: optional(enumOf(['user', 'model'])),
  parts: array(PartShape),
});

export type InlineData = Infer<typeof InlineDataShape>;
export type FileDataPart = Infer<typeof FileDataPartShape>;
export type StoredData = Infer<typeof StoredDataShape>;
export type FunctionCall = Infer<typeof FunctionCallShape>;
export type FunctionResponse = Infer<typeof FunctionResponseShape>;
export type Part = Infer<typeof PartShape>;
export type LLMContent = Infer<typeof LLMContentShape>;

/** A JSON object, as function arguments and responses are. */
export type JsonObject = Record<string, unknown>;
