import { z } from 'zod';
import { AgentError } from '../errors/index.js';
import { LLMContentSchema } from './content.js';
import { formatFirstIssue, formatPath } from '../errors/format-issues.js';

/** A text segment of the objective. */
export const TextSegmentSchema = z.object({ type: z.literal('text'), text: z.string() });
/** An asset (a file the graph holds) referenced by the objective. */
export const AssetSegmentSchema = z.object({
  type: z.literal('asset'),
  title: z.string().optional(),
  content: LLMContentSchema,
});
/** A value the user gave as input. */
export const InputSegmentSchema = z.object({
  type: z.literal('input'),
  title: z.string().optional(),
  content: LLMContentSchema,
});
/** A tool the objective refers to (routing, memory, NotebookLM, or a tool URL). */
export const ToolSegmentSchema = z.object({
  type: z.literal('tool'),
  path: z.string(),
  title: z.string().optional(),
  instance: z.string().optional(),
});

/** One segment in its normalised form (`type` is the kind), whichever spelling the client sent. */
export type Segment =
  | z.infer<typeof TextSegmentSchema>
  | z.infer<typeof AssetSegmentSchema>
  | z.infer<typeof InputSegmentSchema>
  | z.infer<typeof ToolSegmentSchema>;

/** The schema of {@link Segment}; its declared type keeps zod's internal generics out of our types. */
export const SegmentSchema: z.ZodType<Segment> = z.discriminatedUnion('type', [
  TextSegmentSchema,
  AssetSegmentSchema,
  InputSegmentSchema,
  ToolSegmentSchema,
]);

/** The graph a run belongs to. */
export const GraphIdentitySchema = z.object({ url: z.string().optional(), title: z.string().optional() });

/** A start request, normalised. */
export const StartRequestSchema = z.object({
  kind: z.string().optional(),
  segments: z.array(z.unknown()),
  flags: z.record(z.string(), z.unknown()).optional(),
  graph: GraphIdentitySchema.optional(),
});
export interface StartRequest {
  segments: Segment[];
  flags?: Record<string, unknown>;
  graph?: z.infer<typeof GraphIdentitySchema>;
}

/** A resume request: the suspend event's `interactionId` and the client's answer. */
export const ResumeRequestSchema = z.object({
  interactionId: z.string().min(1),
  response: z.record(z.string(), z.unknown()).default({}),
});
export type ResumeRequest = z.infer<typeof ResumeRequestSchema>;

/** A parsed body of `POST /v1beta1/streamRunAgent`. */
export type AgentRequestBody =
  | { kind: 'start'; start: StartRequest; accessToken?: string }
  | { kind: 'resume'; resume: ResumeRequest; accessToken?: string };

const SEGMENT_SPELLINGS = {
  textSegment: 'text',
  assetSegment: 'asset',
  inputSegment: 'input',
  toolSegment: 'tool',
} as const;

/**
 * Parses the raw text of a request body. Not JSON, or JSON that fails the schema, throws an
 * `AgentError` with code `BAD_REQUEST` whose message starts with the path of the bad field.
 */
export function parseAgentRequestText(text: string): AgentRequestBody {
  if (text.trim().length === 0) throw badRequest('(body)', 'expected a JSON object, got an empty body');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw badRequest('(body)', `not valid JSON (${error instanceof Error ? error.message : String(error)})`);
  }
  return parseAgentRequestBody(json);
}

/**
 * Parses a start or resume body in every accepted spelling: the envelopes `{start}` and
 * `{resume}`, the flat forms, and a top-level `accessToken` (a token sent in the body instead of a header).
 *
 * @example
 * ```ts
 * parseAgentRequestBody({ start: { segments: [{ textSegment: { text: 'Hi' } }] }, accessToken: 't' });
 * // -> { kind: 'start', start: { segments: [{ type: 'text', text: 'Hi' }] }, accessToken: 't' }
 * ```
 */
export function parseAgentRequestBody(json: unknown): AgentRequestBody {
  if (!isPlainObject(json)) throw badRequest('(root)', `expected a JSON object, got ${describe(json)}`);
  const { accessToken, ...rest } = json;
  if (accessToken !== undefined && typeof accessToken !== 'string') {
    throw badRequest('accessToken', `expected string, got ${describe(accessToken)}`);
  }
  const token = accessToken === undefined || accessToken === '' ? {} : { accessToken };
  if ('resume' in rest) return { kind: 'resume', resume: parseResume(rest.resume, 'resume'), ...token };
  if ('start' in rest) return { kind: 'start', start: parseStart(rest.start, 'start'), ...token };
  if (typeof rest.interactionId === 'string' && rest.interactionId.length > 0) {
    return { kind: 'resume', resume: parseResume(rest, ''), ...token };
  }
  return { kind: 'start', start: parseStart(rest, ''), ...token };
}

function parseResume(value: unknown, prefix: string): ResumeRequest {
  const parsed = ResumeRequestSchema.safeParse(value);
  if (!parsed.success) throw fromIssues(prefix, parsed.error.issues);
  return parsed.data;
}

function parseStart(value: unknown, prefix: string): StartRequest {
  if (!isPlainObject(value)) throw badRequest(prefix || '(root)', `expected object, got ${describe(value)}`);
  if (value.segments === undefined) throw badRequest(formatPath(prefix, ['segments']), "required: Missing 'segments' in request body");
  const parsed = StartRequestSchema.safeParse(value);
  if (!parsed.success) throw fromIssues(prefix, parsed.error.issues);
  if (parsed.data.segments.length === 0) throw badRequest(formatPath(prefix, ['segments']), 'must hold at least one segment');
  const segments = parsed.data.segments.map((segment, index) => parseSegment(segment, formatPath(prefix, ['segments', index])));
  const start: StartRequest = { segments };
  if (parsed.data.flags !== undefined) start.flags = parsed.data.flags;
  if (parsed.data.graph !== undefined) start.graph = parsed.data.graph;
  return start;
}

/** Normalises one segment from either spelling and validates it. */
export function parseSegment(value: unknown, path: string): Segment {
  if (!isPlainObject(value)) throw badRequest(path, `expected object, got ${describe(value)}`);
  let flat: Record<string, unknown> = value;
  if (!('type' in value)) {
    const key = Object.keys(SEGMENT_SPELLINGS).find((candidate) => candidate in value) as keyof typeof SEGMENT_SPELLINGS | undefined;
    if (!key) {
      const keys = Object.keys(value);
      throw badRequest(path, `unknown segment kind${keys.length > 0 ? ` "${keys[0]}"` : ' (empty object)'}`);
    }
    const inner = value[key];
    if (!isPlainObject(inner)) throw badRequest(`${path}.${key}`, `expected object, got ${describe(inner)}`);
    path = `${path}.${key}`;
    flat = { type: SEGMENT_SPELLINGS[key], ...inner };
  } else if (!['text', 'asset', 'input', 'tool'].includes(String(value.type))) {
    throw badRequest(`${path}.type`, `unknown segment kind "${String(value.type)}"`);
  }
  const parsed = SegmentSchema.safeParse(flat);
  if (!parsed.success) throw fromIssues(path, parsed.error.issues);
  return parsed.data;
}

function fromIssues(prefix: string, issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>): AgentError {
  const { path, text } = formatFirstIssue(prefix, issues);
  return new AgentError('BAD_REQUEST', text, { details: { path } });
}

function badRequest(path: string, problem: string): AgentError {
  return new AgentError('BAD_REQUEST', `${path}: ${problem}`, { details: { path } });
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}
