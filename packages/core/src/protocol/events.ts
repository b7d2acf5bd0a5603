import { ERROR_CODES } from '../errors/agent-error.js';
import { JsonObjectShape, LLMContentShape, PartShape } from './content-shapes.js';
import {
  array,
  boolean,
  dropInvalid,
  enumOf,
  looseObject,
  nullable,
  number,
  optional,
  string,
  unknown,
  type Infer,
} from './shape.js';

/**
 * Every AgentEvent of the Opal protocol, as shapes (`shape.ts`): the one description of the
 * events that `fromWireEvent` checks on the client and the server builds zod schemas from.
 * Internally an event is `{ type: <wire key>, ...payload }`; on the wire it is
 * `{ <wire key>: payload }` (see `wire.ts`). Payload objects are loose: a field a newer server
 * adds passes through untouched.
 */

/** A file the run produced: its path and its content as a single part. */
export const FileDataShape = looseObject({ path: string(), content: PartShape });

/** The outcome of a run, carried by `complete`. */
export const AgentResultShape = looseObject({
  success: boolean(),
  href: optional(string()),
  outcomes: optional(LLMContentShape),
  intermediate: optional(array(FileDataShape)),
});

const UsageMetadataShape = looseObject({
  promptTokenCount: optional(number()),
  candidatesTokenCount: optional(number()),
  totalTokenCount: optional(number()),
  thoughtsTokenCount: optional(number()),
  cachedContentTokenCount: optional(number()),
});

const ChoiceShape = looseObject({ id: string(), content: LLMContentShape });

/** Payload shapes by wire key, in the catalog's order. */
export const AGENT_EVENT_PAYLOADS = {
  start: looseObject({ objective: LLMContentShape }),
  thought: looseObject({ text: string() }),
  functionCall: looseObject({
    callId: string(),
    name: string(),
    args: JsonObjectShape,
    icon: optional(string()),
    title: optional(string()),
  }),
  functionCallUpdate: looseObject({
    callId: string(),
    status: nullable(string()),
    opts: optional(looseObject({ expectedDurationInSec: optional(number()), isThought: optional(boolean()) })),
  }),
  /** `metadata`: progress details a function reported (sources, executed code); never sent to the model. */
  functionResult: looseObject({ callId: string(), content: LLMContentShape, metadata: optional(JsonObjectShape) }),
  content: looseObject({ content: LLMContentShape }),
  turnComplete: looseObject({}),
  sendRequest: looseObject({ model: string(), body: JsonObjectShape }),
  waitForInput: looseObject({
    requestId: string(),
    prompt: LLMContentShape,
    inputType: string(),
    skipLabel: optional(string()),
    interactionId: optional(string()),
  }),
  waitForChoice: looseObject({
    requestId: string(),
    prompt: LLMContentShape,
    choices: array(ChoiceShape),
    selectionMode: enumOf(['single', 'multiple']),
    layout: optional(enumOf(['list', 'row', 'grid'])),
    noneOfTheAboveLabel: optional(string()),
    interactionId: optional(string()),
  }),
  readGraph: looseObject({ requestId: string(), interactionId: optional(string()) }),
  inspectNode: looseObject({ requestId: string(), nodeId: string(), interactionId: optional(string()) }),
  applyEdits: looseObject({
    requestId: string(),
    label: string(),
    edits: optional(array(unknown())),
    transform: optional(JsonObjectShape),
    interactionId: optional(string()),
  }),
  queryConsent: looseObject({
    requestId: string(),
    consentType: string(),
    scope: JsonObjectShape,
    graphUrl: string(),
    interactionId: optional(string()),
  }),
  graphEdit: looseObject({ edits: array(unknown()), label: string() }),
  complete: looseObject({ result: AgentResultShape }),
  /**
   * `code` is one of the closed error codes (an unknown code from a newer server reads as absent);
   * `interactionId` is set when the run was saved and can be resumed (a transient model failure).
   * Clients that know neither field ignore them.
   */
  error: looseObject({
    message: string(),
    code: dropInvalid(enumOf(ERROR_CODES)),
    interactionId: optional(string()),
  }),
  finish: looseObject({}),
  subagentAddJson: looseObject({ callId: string(), title: string(), data: unknown(), icon: optional(string()) }),
  subagentError: looseObject({
    callId: string(),
    error: looseObject({ $error: string(), metadata: optional(JsonObjectShape) }),
  }),
  subagentFinish: looseObject({ callId: string() }),
  usageMetadata: looseObject({ metadata: UsageMetadataShape }),
  paused: looseObject({ message: string(), statusCode: number(), interactionId: optional(string()) }),
  subagentAddContent: looseObject({
    callId: string(),
    title: string(),
    content: LLMContentShape,
    icon: optional(string()),
  }),
} as const;

/** The 24 wire keys. */
export type AgentEventType = keyof typeof AGENT_EVENT_PAYLOADS;

/** Every event type, in catalog order. */
export const AGENT_EVENT_TYPES = Object.keys(AGENT_EVENT_PAYLOADS) as AgentEventType[];

/** The internal event of one type: `{ type, ...payload }`. */
export type AgentEventOf<T extends AgentEventType> = { type: T } & Infer<(typeof AGENT_EVENT_PAYLOADS)[T]>;

/** Any agent event. */
export type AgentEvent = { [T in AgentEventType]: AgentEventOf<T> }[AgentEventType];

/** The events that suspend a run until the client answers. */
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

export type AgentResult = Infer<typeof AgentResultShape>;
export type FileData = Infer<typeof FileDataShape>;
