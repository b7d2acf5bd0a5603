import { z } from 'zod';
import { AgentError } from '../errors/index.js';
import { LLMContentSchema } from './content.js';
import { lazy } from './lazy.js';
import { formatFirstIssue, formatPath } from '../errors/format-issues.js';
import { clipped, describeType, isPlainObject } from './values.js';

// The request schemas are built on first parse: a process that never parses a request body (one
// that calls run() itself) never pays for them.

/** A text segment of the objective. */
const textSegmentSchema = lazy(() => z.object({ type: z.literal('text'), text: z.string() }));
/** An asset (a file the graph holds) referenced by the objective. */
const assetSegmentSchema = lazy(() =>
  z.object({
    type: z.literal('asset'),
    title: z.string().optional(),
    content: LLMContentSchema,
  }),
);
/** A value the user gave as input. */
const inputSegmentSchema = lazy(() =>
  z.object({
    type: z.literal('input'),
    title: z.string().optional(),
    content: LLMContentSchema,
  }),
);
/** A tool the objective refers to (routing, memory, NotebookLM, or a tool URL). */
const toolSegmentSchema = lazy(() =>
  z.object({
    type: z.literal('tool'),
    path: z.string(),
    title: z.string().optional(),
    instance: z.string().optional(),
  }),
);

/** One segment in its normalised form (`type` is the kind), whichever spelling the client sent. */
export type Segment =
  | z.infer<ReturnType<typeof textSegmentSchema>>
  | z.infer<ReturnType<typeof assetSegmentSchema>>
  | z.infer<ReturnType<typeof inputSegmentSchema>>
  | z.infer<ReturnType<typeof toolSegmentSchema>>;

/** The schema of {@link Segment}; its declared type keeps zod's internal generics out of our types. */
const segmentSchema = lazy(
  (): z.ZodType<Segment> =>
    z.discriminatedUnion('type', [textSegmentSchema(), assetSegmentSchema(), inputSegmentSchema(), toolSegmentSchema()]),
);

/** The graph a run belongs to. */
const graphIdentitySchema = lazy(() => z.object({ url: z.string().optional(), title: z.string().optional() }));

/** A start request, normalised. */
const startRequestSchema = lazy(() =>
  z.object({
    kind: z.string().optional(),
    segments: z.array(z.unknown()),
    flags: z.record(z.string(), z.unknown()).optional(),
    graph: graphIdentitySchema().optional(),
  }),
);
export interface StartRequest {
  segments: Segment[];
  flags?: Record<string, unknown>;
  graph?: z.infer<ReturnType<typeof graphIdentitySchema>>;
}

/** A resume request: the suspend event's `interactionId` and the client's answer. */
const resumeRequestSchema = lazy(() =>
  z.object({
    interactionId: z.string().min(1).max(256),
    response: z.record(z.string(), z.unknown()).default({}),
  }),
);
export type ResumeRequest = z.infer<ReturnType<typeof resumeRequestSchema>>;

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

/** Limits a request body must keep; each has a default. */
export interface AgentRequestLimits {
  /** Deepest nesting of arrays and objects anywhere in the body. Default {@link DEFAULT_MAX_JSON_DEPTH}. */
  maxJsonDepth?: number;
  /** Most segments in a start request. Default {@link DEFAULT_MAX_SEGMENTS}. */
  maxSegments?: number;
}

/** Default nesting limit of a request body: ample for segments, contents and flags. */
export const DEFAULT_MAX_JSON_DEPTH = 64;
/** Default number of segments a start request may hold. */
export const DEFAULT_MAX_SEGMENTS = 1000;

/**
 * Parses the raw text of a request body. Not JSON, JSON nested deeper than the limit, or JSON that
 * fails the schema, throws an `AgentError` with code `BAD_REQUEST` whose message starts with the
 * path of the bad field. The nesting is checked before the text is parsed, so a hostile body never
 * becomes a deep object.
 *
 * @example
 * ```ts
 * parseAgentRequestText('{"start":{"segments":[{"textSegment":{"text":"Hi"}}]}}', { maxSegments: 10 });
 * ```
 */
export function parseAgentRequestText(text: string, limits: AgentRequestLimits = {}): AgentRequestBody {
  return parseBody(parseJsonBody(text, limits), limits.maxSegments ?? DEFAULT_MAX_SEGMENTS);
}

/**
 * Parses the raw text of any JSON request body within the depth limit: empty, too deep or not
 * JSON is a `BAD_REQUEST` naming `(body)`.
 */
export function parseJsonBody(text: string, limits: Pick<AgentRequestLimits, 'maxJsonDepth'> = {}): unknown {
  if (text.trim().length === 0) throw badRequest('(body)', 'expected a JSON object, got an empty body');
  const maxDepth = limits.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH;
  if (jsonTextNestsDeeper(text, maxDepth)) throw tooDeep('(body)', maxDepth);
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw badRequest('(body)', `not valid JSON (${withoutQuotedText(error instanceof Error ? error.message : String(error))})`);
  }
}

/**
 * A JSON parser's message without the piece of the body it quotes (V8 writes `Unexpected token 'x',
 * "...text..." is not valid JSON`): that piece can hold the caller's `accessToken`, and an error
 * message ends up in logs.
 */
function withoutQuotedText(message: string): string {
  const quoted = /^(?:(Unexpected token '[\s\S]+?'), )?(?:\.\.\.)?"[\s\S]*"(?:\.\.\.)? is not valid JSON$/.exec(message);
  return quoted ? (quoted[1] ?? 'unexpected text') : message;
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
export function parseAgentRequestBody(json: unknown, limits: AgentRequestLimits = {}): AgentRequestBody {
  const maxDepth = limits.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH;
  if (valueNestsDeeper(json, maxDepth)) throw tooDeep('(root)', maxDepth);
  return parseBody(json, limits.maxSegments ?? DEFAULT_MAX_SEGMENTS);
}

function parseBody(json: unknown, maxSegments: number): AgentRequestBody {
  if (!isPlainObject(json)) throw badRequest('(root)', `expected a JSON object, got ${describeType(json)}`);
  const { accessToken, ...rest } = json;
  if (accessToken !== undefined && typeof accessToken !== 'string') {
    throw badRequest('accessToken', `expected string, got ${describeType(accessToken)}`);
  }
  const token = accessToken === undefined || accessToken === '' ? {} : { accessToken };
  if ('resume' in rest) return { kind: 'resume', resume: parseResume(rest.resume, 'resume'), ...token };
  if ('start' in rest) return { kind: 'start', start: parseStart(rest.start, 'start', maxSegments), ...token };
  // The flat resume: a truthy `interactionId`, as the reference reads it. One of another type, or
  // an empty one, in a body without segments was meant as a resume too: its error names it.
  const interactionId = rest.interactionId;
  const flatResume =
    typeof interactionId === 'string'
      ? interactionId.length > 0 || rest.segments === undefined
      : interactionId !== undefined && interactionId !== null && rest.segments === undefined;
  if (flatResume) return { kind: 'resume', resume: parseResume(rest, ''), ...token };
  return { kind: 'start', start: parseStart(rest, '', maxSegments), ...token };
}

/**
 * Whether JSON text nests arrays and objects deeper than `limit`, found in one pass that stops at
 * the first level too deep. Strings are skipped with native searches for their closing quote.
 */
function jsonTextNestsDeeper(text: string, limit: number): boolean {
  let depth = 0;
  const length = text.length;
  for (let index = 0; index < length; index += 1) {
    const code = text.charCodeAt(index);
    if (code === 34 /* '"' */) {
      let end = index;
      for (;;) {
        end = text.indexOf('"', end + 1);
        // Unterminated: JSON.parse reports it.
        if (end === -1) return false;
        let backslashes = 0;
        while (text.charCodeAt(end - 1 - backslashes) === 92 /* '\\' */) backslashes += 1;
        if (backslashes % 2 === 0) break;
      }
      index = end;
    } else if (code === 91 /* '[' */ || code === 123 /* '{' */) {
      depth += 1;
      if (depth > limit) return true;
    } else if (code === 93 /* ']' */ || code === 125 /* '}' */) {
      depth -= 1;
    }
  }
  return false;
}

/** Whether a parsed value nests arrays and objects deeper than `limit` (walked without recursion). */
function valueNestsDeeper(value: unknown, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop() as [unknown, number];
    if (typeof current !== 'object' || current === null) continue;
    if (depth > limit) return true;
    for (const child of Array.isArray(current) ? current : Object.values(current)) {
      if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
    }
  }
  return false;
}

function tooDeep(path: string, limit: number): AgentError {
  return new AgentError('BAD_REQUEST', `${path}: JSON nests deeper than the limit of ${limit} levels`, { details: { path, limit } });
}

function parseResume(value: unknown, prefix: string): ResumeRequest {
  const parsed = resumeRequestSchema().safeParse(value);
  if (!parsed.success) throw fromIssues(prefix, parsed.error.issues);
  parseResumeResponse(parsed.data.response, formatPath(prefix, ['response']));
  return parsed.data;
}

/**
 * Checks the answer to a suspend event: a JSON object whose `input`, when it is an object with
 * `parts`, is content (`{ role?, parts: [...] }`), so an answer the run could only read as empty is
 * refused before the single-use interaction is spent on it. Any other field, and an `input` of
 * another type or without `parts`, goes to the run as it is, as the reference takes such answers.
 * `path` names the answer in messages (empty: the body itself).
 */
export function parseResumeResponse(value: unknown, path: string): Record<string, unknown> {
  if (!isPlainObject(value)) throw badRequest(path || '(body)', `expected the answer as a JSON object, e.g. {"input": {...}}, got ${describeType(value)}`);
  if (isPlainObject(value.input) && value.input.parts !== undefined) {
    const parsed = LLMContentSchema.safeParse(value.input);
    if (!parsed.success) throw fromIssues(formatPath(path, ['input']), parsed.error.issues);
  }
  return value;
}

function parseStart(value: unknown, prefix: string, maxSegments: number): StartRequest {
  if (!isPlainObject(value)) throw badRequest(prefix || '(root)', `expected object, got ${describeType(value)}`);
  if (value.segments === undefined) throw badRequest(formatPath(prefix, ['segments']), "required: Missing 'segments' in request body");
  const parsed = startRequestSchema().safeParse(value);
  if (!parsed.success) throw fromIssues(prefix, parsed.error.issues);
  const count = parsed.data.segments.length;
  if (count === 0) throw badRequest(formatPath(prefix, ['segments']), "empty: Missing 'segments' in request body");
  if (count > maxSegments) {
    const path = formatPath(prefix, ['segments']);
    throw new AgentError('BAD_REQUEST', `${path}: holds ${count} segments, more than the limit of ${maxSegments}`, {
      details: { path, limit: maxSegments },
    });
  }
  const segments: Segment[] = [];
  parsed.data.segments.forEach((segment, index) => {
    const known = parseSegment(segment, formatPath(prefix, ['segments', index]));
    if (known) segments.push(known);
  });
  if (segments.length === 0) {
    throw badRequest(formatPath(prefix, ['segments']), 'no segment of a kind this server knows (text, asset, input or tool)');
  }
  const start: StartRequest = { segments };
  if (parsed.data.flags !== undefined) start.flags = parsed.data.flags;
  if (parsed.data.graph !== undefined) start.graph = parsed.data.graph;
  return start;
}

/**
 * Normalises one segment from either spelling and validates it. As the reference does, a segment
 * of no kind (neither a `type` nor a spelling this server knows, say a newer client's, or an empty
 * `type`) and an input with no content are left out (`undefined`); an unknown `type` is refused.
 */
export function parseSegment(value: unknown, path: string): Segment | undefined {
  if (!isPlainObject(value)) throw badRequest(path, `expected object, got ${describeType(value)}`);
  let flat: Record<string, unknown> = value;
  if (value.type === undefined || value.type === null || value.type === '') {
    const key = Object.keys(SEGMENT_SPELLINGS).find((candidate) => candidate in value) as keyof typeof SEGMENT_SPELLINGS | undefined;
    if (!key) return undefined;
    const inner = value[key];
    if (!isPlainObject(inner)) throw badRequest(`${path}.${key}`, `expected object, got ${describeType(inner)}`);
    path = `${path}.${key}`;
    flat = { ...inner, type: SEGMENT_SPELLINGS[key] };
  } else if (!SEGMENT_KINDS.includes(value.type as string)) {
    throw badRequest(`${path}.type`, `Unknown segment type: ${clipped(typeof value.type === 'string' ? value.type : JSON.stringify(value.type))}`);
  }
  if (flat.type === 'input' || flat.type === 'asset') {
    if (hasNoParts(flat.content)) {
      if (flat.type === 'input') return undefined;
      throw badRequest(`${path}.content`, 'Invalid asset format: an asset needs content with at least one part');
    }
  }
  const parsed = segmentSchema().safeParse(flat);
  if (!parsed.success) throw fromIssues(path, parsed.error.issues);
  return parsed.data;
}

const SEGMENT_KINDS: readonly string[] = Object.values(SEGMENT_SPELLINGS);

/** Content that is absent, or has no parts (content of another shape is the schema's to refuse). */
function hasNoParts(content: unknown): boolean {
  if (content === undefined || content === null) return true;
  if (!isPlainObject(content)) return false;
  return content.parts === undefined || (Array.isArray(content.parts) && content.parts.length === 0);
}

function fromIssues(prefix: string, issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>): AgentError {
  const { path, text } = formatFirstIssue(prefix, issues);
  return new AgentError('BAD_REQUEST', text, { details: { path } });
}

function badRequest(path: string, problem: string): AgentError {
  return new AgentError('BAD_REQUEST', `${path}: ${problem}`, { details: { path } });
}

