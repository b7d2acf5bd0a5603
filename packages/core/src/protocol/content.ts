import { z } from 'zod';

/**
 * Schemas for Gemini `Content` and `Part` as the Gemini API defines them.
 *
 * They are deliberately loose: every object is `looseObject`, so a field a provider adds
 * tomorrow passes through untouched (byte for byte after re-serialisation). Only the fields
 * our code reads are typed.
 */

/** `inlineData`: base64 bytes with a MIME type. */
export const InlineDataSchema = z.looseObject({
  mimeType: z.string(),
  data: z.string(),
  title: z.string().optional(),
});

/** `fileData`: a file referenced by URI (Gemini File API, Drive, YouTube). */
export const FileDataPartSchema = z.looseObject({
  fileUri: z.string(),
  mimeType: z.string(),
  resourceKey: z.string().optional(),
});

/** `storedData`: an Opal blob or Drive handle, resolved before the model sees it. */
export const StoredDataSchema = z.looseObject({
  handle: z.string(),
  mimeType: z.string(),
  resourceKey: z.string().optional(),
});

/** `functionCall` as the model sends it; `id` is present only when the provider gave one. */
export const FunctionCallSchema = z.looseObject({
  name: z.string(),
  args: z.record(z.string(), z.unknown()).optional(),
  id: z.string().optional(),
});

/** `functionResponse` as we send it back; `response` is always a JSON object. */
export const FunctionResponseSchema = z.looseObject({
  name: z.string(),
  response: z.record(z.string(), z.unknown()),
  id: z.string().optional(),
});

/**
 * One part of a content. Exactly one data field is expected (`text`, `inlineData`, ...), plus
 * the optional flags `thought` and `thoughtSignature`; unknown fields are kept.
 */
export const PartSchema = z.looseObject({
  text: z.string().optional(),
  thought: z.boolean().optional(),
  thoughtSignature: z.string().optional(),
  inlineData: InlineDataSchema.optional(),
  fileData: FileDataPartSchema.optional(),
  storedData: StoredDataSchema.optional(),
  functionCall: FunctionCallSchema.optional(),
  functionResponse: FunctionResponseSchema.optional(),
  executableCode: z.looseObject({ language: z.string().optional(), code: z.string().optional() }).optional(),
  codeExecutionResult: z.looseObject({ outcome: z.string().optional(), output: z.string().optional() }).optional(),
  json: z.unknown().optional(),
});

/** A Gemini `Content`: a role and its parts. `role` is absent on some wire payloads. */
export const LLMContentSchema = z.looseObject({
  role: z.enum(['user', 'model']).optional(),
  parts: z.array(PartSchema),
});

export type InlineData = z.infer<typeof InlineDataSchema>;
export type FileDataPart = z.infer<typeof FileDataPartSchema>;
export type StoredData = z.infer<typeof StoredDataSchema>;
export type FunctionCall = z.infer<typeof FunctionCallSchema>;
export type FunctionResponse = z.infer<typeof FunctionResponseSchema>;
export type Part = z.infer<typeof PartSchema>;
export type LLMContent = z.infer<typeof LLMContentSchema>;

/** A JSON object, as function arguments and responses are. */
export type JsonObject = Record<string, unknown>;
