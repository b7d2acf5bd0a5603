import type { JsonObject, LLMContent, Part } from './content.js';

/**
 * Gemini `generateContent` request and response shapes, as TypeScript types only.
 *
 * Streamed chunks are never validated with zod: they are trusted as the provider sent them and
 * every field we do not read is carried along untouched (see "Model turns" in docs/architecture.md).
 */

/** A Gemini function declaration in JSON Schema style (`parametersJsonSchema`). */
export interface FunctionDeclaration {
  name: string;
  description: string;
  parametersJsonSchema?: JsonObject;
  responseJsonSchema?: JsonObject;
  [key: string]: unknown;
}

/** One entry of `tools`: function declarations or a provider-executed tool such as `{codeExecution: {}}`. */
export interface Tool {
  functionDeclarations?: FunctionDeclaration[];
  googleSearch?: JsonObject;
  googleMaps?: JsonObject;
  urlContext?: JsonObject;
  codeExecution?: JsonObject;
  [key: string]: unknown;
}

/** Body of `models/{model}:streamGenerateContent`. */
export interface GenerateContentRequest {
  contents: LLMContent[];
  systemInstruction?: LLMContent;
  tools?: Tool[];
  toolConfig?: {
    functionCallingConfig?: { mode?: 'AUTO' | 'ANY' | 'NONE' | 'VALIDATED'; allowedFunctionNames?: string[] };
    includeServerSideToolInvocations?: boolean;
    [key: string]: unknown;
  };
  generationConfig?: JsonObject;
  safetySettings?: JsonObject[];
  cachedContent?: string;
  [key: string]: unknown;
}

/** Gemini `usageMetadata`, cumulative within one stream. */
export interface UsageMetadata {
  promptTokenCount?: number;
  candidatesTokenCount?: number;
  totalTokenCount?: number;
  thoughtsTokenCount?: number;
  cachedContentTokenCount?: number;
  toolUsePromptTokenCount?: number;
  [key: string]: unknown;
}

/** One candidate of a response chunk. */
export interface Candidate {
  content?: { role?: string; parts?: Part[]; [key: string]: unknown };
  finishReason?: string;
  finishMessage?: string;
  index?: number;
  groundingMetadata?: JsonObject;
  urlContextMetadata?: JsonObject;
  citationMetadata?: JsonObject;
  safetyRatings?: JsonObject[];
  [key: string]: unknown;
}

/** One streamed `GenerateContentResponse` chunk: a delta of new parts plus repeated metadata. */
export interface GenerateContentResponse {
  candidates?: Candidate[];
  promptFeedback?: { blockReason?: string; blockReasonMessage?: string; [key: string]: unknown };
  usageMetadata?: UsageMetadata;
  modelVersion?: string;
  responseId?: string;
  [key: string]: unknown;
}
