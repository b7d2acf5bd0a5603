import type { z } from 'zod';
import { LLMContentShape, PartShape, type LLMContent, type Part } from './content-shapes.js';
import { AgentResultShape, FileDataShape, type AgentResult, type FileData } from './events.js';
import { toZodSchema } from './zod-schemas.js';

/**
 * zod schemas for Gemini `Content` and `Part` and for a run's result, built from the shapes in
 * `content-shapes.ts` and `events.ts` (the one description the browser client checks events
 * against too). Loose: unknown fields are kept.
 */

export type {
  FileDataPart,
  FunctionCall,
  FunctionResponse,
  InlineData,
  JsonObject,
  LLMContent,
  Part,
  StoredData,
} from './content-shapes.js';

/** One part of a content; unknown fields are kept. */
export const PartSchema: z.ZodType<Part> = toZodSchema(PartShape);
/** A Gemini `Content`: a role and its parts; unknown fields are kept. */
export const LLMContentSchema: z.ZodType<LLMContent> = toZodSchema(LLMContentShape);
/** A file a run produced: its path and its content as a single part. */
export const FileDataSchema: z.ZodType<FileData> = toZodSchema(FileDataShape);
/** The outcome of a run, carried by `complete`. */
export const AgentResultSchema: z.ZodType<AgentResult> = toZodSchema(AgentResultShape);
