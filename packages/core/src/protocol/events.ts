import { z } from 'zod';
import { ERROR_CODES } from '../errors/agent-error.js';
import { LLMContentSchema, PartSchema } from './content.js';

/**
 * Every AgentEvent of the Opal protocol (reference §2.6), as zod schemas. Internally an event is
 * `{ type: <wire key>, ...payload }`; on the wire it is `{ <wire key>: payload }` (see `wire.ts`).
 * Payload objects are loose: a field a newer server adds passes through untouched.
 */

const JsonObject = z.record(z.string(), z.unknown());

/** A file the run produced: its path and its content as a single part (reference §2.8). */
export const FileDataSchema = z.looseObject({ path: z.string(), content: PartSchema });

/** The outcome of a run, carried by `complete`. */
export const AgentResultSchema = z.looseObject({
  success: z.boolean(),
  href: z.string().optional(),
  outcomes: LLMContentSchema.optional(),
  intermediate: z.array(FileDataSchema).optional(),
});

const UsageMetadataSchema = z.looseObject({
  promptTokenCount: z.number().optional(),
  candidatesTokenCount: z.number().optional(),
  totalTokenCount: z.number().optional(),
  thoughtsTokenCount: z.number().optional(),
  cachedContentTokenCount: z.number().optional(),
});

const ChoiceSchema = z.looseObject({ id: z.string(), content: LLMContentSchema });

/** Payload schemas by wire key, in the catalog's order. */
export const AGENT_EVENT_PAYLOADS = {
  start: z.looseObject({ objective: LLMContentSchema }),
  thought: z.looseObject({ text: z.string() }),
  functionCall: z.looseObject({
    callId: z.string(),
    name: z.string(),
    args: JsonObject,
    icon: z.string().optional(),
    title: z.string().optional(),
  }),
  functionCallUpdate: z.looseObject({
    callId: z.string(),
    status: z.string().nullable(),
    opts: z.looseObject({ expectedDurationInSec: z.number().optional(), isThought: z.boolean().optional() }).optional(),
  }),
  /** `metadata`: progress details a function reported (sources, executed code); never sent to the model. */
  functionResult: z.looseObject({ callId: z.string(), content: LLMContentSchema, metadata: JsonObject.optional() }),
  content: z.looseObject({ content: LLMContentSchema }),
  turnComplete: z.looseObject({}),
  sendRequest: z.looseObject({ model: z.string(), body: JsonObject }),
  waitForInput: z.looseObject({
    requestId: z.string(),
    prompt: LLMContentSchema,
    inputType: z.string(),
    skipLabel: z.string().optional(),
    interactionId: z.string().optional(),
  }),
  waitForChoice: z.looseObject({
    requestId: z.string(),
    prompt: LLMContentSchema,
    choices: z.array(ChoiceSchema),
    selectionMode: z.enum(['single', 'multiple']),
    layout: z.enum(['list', 'row', 'grid']).optional(),
    noneOfTheAboveLabel: z.string().optional(),
    interactionId: z.string().optional(),
  }),
  readGraph: z.looseObject({ requestId: z.string(), interactionId: z.string().optional() }),
  inspectNode: z.looseObject({ requestId: z.string(), nodeId: z.string(), interactionId: z.string().optional() }),
  applyEdits: z.looseObject({
    requestId: z.string(),
    label: z.string(),
    edits: z.array(z.unknown()).optional(),
    transform: JsonObject.optional(),
    interactionId: z.string().optional(),
  }),
  queryConsent: z.looseObject({
    requestId: z.string(),
    consentType: z.string(),
    scope: JsonObject,
    graphUrl: z.string(),
    interactionId: z.string().optional(),
  }),
  graphEdit: z.looseObject({ edits: z.array(z.unknown()), label: z.string() }),
  complete: z.looseObject({ result: AgentResultSchema }),
  /**
   * `code` is one of the closed error codes (an unknown code from a newer server reads as absent);
   * `interactionId` is set when the run was saved and can be resumed (a transient model failure).
   * Clients that know neither field ignore them.
   */
  error: z.looseObject({
    message: z.string(),
    code: z.enum(ERROR_CODES).optional().catch(undefined),
    interactionId: z.string().optional(),
  }),
  finish: z.looseObject({}),
  subagentAddJson: z.looseObject({ callId: z.string(), title: z.string(), data: z.unknown(), icon: z.string().optional() }),
  subagentError: z.looseObject({
    callId: z.string(),
    error: z.looseObject({ $error: z.string(), metadata: JsonObject.optional() }),
  }),
  subagentFinish: z.looseObject({ callId: z.string() }),
  usageMetadata: z.looseObject({ metadata: UsageMetadataSchema }),
  paused: z.looseObject({ message: z.string(), statusCode: z.number(), interactionId: z.string().optional() }),
  subagentAddContent: z.looseObject({
    callId: z.string(),
    title: z.string(),
    content: LLMContentSchema,
    icon: z.string().optional(),
  }),
} as const;

/** The 24 wire keys. */
export type AgentEventType = keyof typeof AGENT_EVENT_PAYLOADS;

/** Every event type, in catalog order. */
export const AGENT_EVENT_TYPES = Object.keys(AGENT_EVENT_PAYLOADS) as AgentEventType[];

/** The internal event of one type: `{ type, ...payload }`. */
export type AgentEventOf<T extends AgentEventType> = { type: T } & z.infer<(typeof AGENT_EVENT_PAYLOADS)[T]>;

/** Any agent event. */
export type AgentEvent = { [T in AgentEventType]: AgentEventOf<T> }[AgentEventType];

/** The events that suspend a run until the client answers (reference §2.6). */
export const SUSPEND_EVENT_TYPES = [
  'waitForInput',
  'waitForChoice',
  'readGraph',
  'inspectNode',
  'applyEdits',
  'queryConsent',
] as const satisfies readonly AgentEventType[];

export type SuspendEventType = (typeof SUSPEND_EVENT_TYPES)[number];
export type SuspendEvent = { [T in SuspendEventType]: AgentEventOf<T> }[SuspendEventType];

/** Whether `event` suspends the run. */
export function isSuspendEvent(event: AgentEvent): event is SuspendEvent {
  return (SUSPEND_EVENT_TYPES as readonly string[]).includes(event.type);
}

export type AgentResult = z.infer<typeof AgentResultSchema>;
export type FileData = z.infer<typeof FileDataSchema>;
