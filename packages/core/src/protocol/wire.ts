import { AgentError } from '../errors/agent-error.js';
import { formatPath } from '../errors/format-issues.js';
import { AGENT_EVENT_PAYLOADS, type AgentEvent, type AgentEventType } from './events.js';
import { ShapeIssue } from './shape.js';
import { clipped } from './values.js';

/** An event as it travels: a single-key object, `{"thought": {"text": "..."}}` (decision W1). */
export type WireEvent = { [key: string]: Record<string, unknown> };

/**
 * Converts an internal event to its wire form. Undefined fields are left out; nothing is
 * validated or copied beyond the top level, since this runs once per streamed event.
 */
export function toWireEvent(event: AgentEvent): WireEvent {
  return { [event.type]: wirePayload(event) };
}

/** The payload fields the protocol names: plain words, written into JSON as they are. */
const PLAIN_KEYS: ReadonlySet<string> = new Set(
  Object.values(AGENT_EVENT_PAYLOADS).flatMap((shape) =>
    shape.definition.kind === 'object' ? Object.keys(shape.definition.properties).filter((key) => /^\w+$/.test(key)) : [],
  ),
);

/**
 * The JSON text of an event's wire form: what `JSON.stringify(toWireEvent(event))` gives, written
 * without the intermediate single-key object. The cheaper way to put events on a stream.
 *
 * @example
 * ```ts
 * createSseEventStream(run(request, ports), { encode: (event) => encodeSseEvent(toWireEventJson(event)) });
 * ```
 */
export function toWireEventJson(event: AgentEvent): string {
  // Most of a streamed run's events are thoughts, one per model chunk: a thought that is just its
  // text is written in one piece, which is also cheaper for whoever joins the texts later.
  if (event.type === 'thought' && typeof event.text === 'string' && fieldCount(event) === 2) {
    return `{"thought":{"text":${JSON.stringify(event.text)}}}`;
  }
  // The protocol's event types are plain words with nothing to escape; any other name goes through JSON.stringify.
  if (!Object.hasOwn(AGENT_EVENT_PAYLOADS, event.type)) return JSON.stringify(toWireEvent(event));
  // Each field is written as JSON.stringify writes an object's (undefined, functions and symbols
  // left out), without building the payload object first: this runs once per streamed event.
  let fields = '';
  for (const key in event) {
    if (key === 'type') continue;
    const value = (event as Record<string, unknown>)[key];
    if (value === undefined) continue;
    const json = JSON.stringify(value) as string | undefined;
    if (json === undefined) continue;
    fields += `${fields === '' ? '' : ','}${PLAIN_KEYS.has(key) ? `"${key}"` : JSON.stringify(key)}:${json}`;
  }
  // Two fields the protocol always sends, as null when unset (spec 2.6).
  if (event.type === 'functionCallUpdate' && event.status === undefined) fields += `${fields === '' ? '' : ','}"status":null`;
  else if (event.type === 'subagentAddJson' && event.data === undefined) fields += `${fields === '' ? '' : ','}"data":null`;
  return `{"${event.type}":{${fields}}}`;
}

/** How many fields a `for ... in` loop visits on the event, as both writers walk it. */
function fieldCount(event: AgentEvent): number {
  let count = 0;
  for (const _key in event) count += 1;
  return count;
}

/**
 * The event without its `type` and its undefined fields; a `functionCallUpdate` always has a
 * `status` and a `subagentAddJson` always has `data`, `null` when unset.
 */
function wirePayload(event: AgentEvent): Record<string, unknown> {
  const payload: Record<string, unknown> = {};
  for (const key in event) {
    if (key === 'type') continue;
    const value = (event as Record<string, unknown>)[key];
    if (value === undefined) continue;
    // An own `__proto__` field (parsed from JSON) stays a field: assigned, it would set the payload's prototype.
    if (key === '__proto__') Object.defineProperty(payload, key, { value, enumerable: true, writable: true, configurable: true });
    else payload[key] = value;
  }
  if (event.type === 'functionCallUpdate' && payload.status === undefined) payload.status = null;
  else if (event.type === 'subagentAddJson' && payload.data === undefined) payload.data = null;
  return payload;
}

/**
 * Parses a wire event into the internal union, validating its payload against the event shapes
 * (no schema library: the browser client bundles this). Errors name the path of the bad field,
 * e.g. `functionCall.callId: expected string, got number`.
 */
export function fromWireEvent(value: unknown): AgentEvent {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw badEvent('(root)', 'expected an object with one event key');
  }
  const keys = Object.keys(value);
  if (keys.length !== 1) throw badEvent('(root)', `expected exactly one event key, got ${keys.length}`);
  const type = keys[0] as string;
  if (!Object.hasOwn(AGENT_EVENT_PAYLOADS, type)) throw badEvent(clipped(type), `unknown event type "${clipped(type)}"`);
  const payload = AGENT_EVENT_PAYLOADS[type as AgentEventType].check((value as Record<string, unknown>)[type]);
  if (payload instanceof ShapeIssue) throw badEvent(formatPath(type, payload.path), payload.message);
  // The key names the type: a payload field called `type` (a newer server's) must not override it.
  return { ...payload, type } as AgentEvent;
}

function badEvent(path: string, problem: string): AgentError {
  return new AgentError('BAD_REQUEST', `${path}: ${problem}`, { details: { path } });
}
