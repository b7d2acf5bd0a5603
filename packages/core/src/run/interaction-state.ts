import { AgentError } from '../errors/index.js';
import { utf8Length } from '../protocol/utf8-length.js';
import type { LoopMode } from '../loop/agent-loop.js';
import type { JournalledCall } from '../loop/turn-journal.js';
import type { JsonObject, LLMContent } from '../protocol/content.js';
import type { AgentResult } from '../protocol/events.js';
import { isPlainObject } from '../protocol/values.js';

/** The version of the state this runtime writes; other versions are refused by name. */
export const INTERACTION_STATE_VERSION = 2;

/** One call of the turn that suspended; `response` is set for every call that already finished. */
export interface SavedCall {
  callId: string;
  name: string;
  args: JsonObject;
  providerId?: string;
  response?: JsonObject;
}

/** What a suspended or running run needs to go on, as plain JSON. */
export interface InteractionState {
  version: typeof INTERACTION_STATE_VERSION;
  createdAt: string;
  /**
   * `suspend`: waiting for the client's answer to `pendingCallId`. `checkpoint`: the run goes on
   * from here with no answer needed (a pause after a model failure, or the last checkpoint of a
   * running segment).
   */
  kind: 'suspend' | 'checkpoint';
  mode: LoopMode;
  model: string;
  contents: LLMContent[];
  fileSystem: unknown;
  taskTree: unknown;
  flags: Record<string, unknown>;
  graph?: { url?: string; title?: string };
  /**
   * The conversation the run belongs to, the same for every segment of the run: the rows it adds
   * to a kept chat log carry it. Absent in states saved before it existed.
   */
  sessionId?: string;
  consentsGranted: string[];
  turnCount: number;
  /** `suspend`: every call of the turn that suspended, in call order. */
  calls?: SavedCall[];
  /** `suspend`: the call waiting for the client's answer. */
  pendingCallId?: string;
  /** `suspend`: the suspend came from a precondition (consent); the model never sees the round trip. */
  precondition?: boolean;
  /** `checkpoint` in the middle of a turn: its calls, and what is known of them. */
  turn?: { calls: JournalledCall[]; result?: AgentResult };
}

/**
 * Reads a stored state. The runtime wrote it, so only its frame is checked (version, kind, and the
 * shape of every field a resume reads, down to each content and call but not into them); a state
 * from another version, a damaged or hand-edited one, or one bigger than `maxBytes` (UTF-8) is
 * `STORE_ERROR` naming what is wrong, before anything runs.
 */
export function readInteractionState(id: string, text: string, maxBytes?: number): InteractionState {
  // Three bytes per UTF-16 unit is the worst case, so most texts need no exact count.
  if (maxBytes !== undefined && text.length * 3 > maxBytes) {
    const size = utf8Length(text);
    if (size > maxBytes) {
      throw new AgentError('STORE_ERROR', `Interaction ${id} has a saved state of ${size} bytes, more than the limit of ${maxBytes} bytes`, {
        details: { size, limit: maxBytes },
      });
    }
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw unreadable(id, 'not JSON');
  }
  if (!isPlainObject(value)) throw unreadable(id, 'not an object');
  const state = value as Partial<InteractionState>;
  if (state.version !== INTERACTION_STATE_VERSION) {
    throw unreadable(id, `it was saved in format ${JSON.stringify(state.version)}; this runtime reads format ${INTERACTION_STATE_VERSION}`);
  }
  if (state.kind !== 'suspend' && state.kind !== 'checkpoint') throw unreadable(id, 'kind: expected "suspend" or "checkpoint"');
  if (state.mode !== 'objective' && state.mode !== 'chat') throw unreadable(id, 'mode: expected "objective" or "chat"');
  if (typeof state.model !== 'string') throw unreadable(id, 'model: expected string');
  if (!Array.isArray(state.contents)) throw unreadable(id, 'contents: expected array');
  for (let index = 0; index < state.contents.length; index += 1) {
    const content: unknown = state.contents[index];
    if (!isPlainObject(content) || !Array.isArray(content.parts)) throw unreadable(id, `contents[${index}]: expected an object with a parts array`);
    if (content.role !== undefined && typeof content.role !== 'string') throw unreadable(id, `contents[${index}].role: expected string`);
    const parts = content.parts as unknown[];
    for (let at = 0; at < parts.length; at += 1) {
      if (!isPlainObject(parts[at])) throw unreadable(id, `contents[${index}].parts[${at}]: expected object`);
    }
  }
  if (typeof state.turnCount !== 'number' || !Number.isSafeInteger(state.turnCount) || state.turnCount < 0) {
    throw unreadable(id, 'turnCount: expected a whole number, 0 or more');
  }
  if (!Array.isArray(state.consentsGranted) || !state.consentsGranted.every((consent) => typeof consent === 'string')) {
    throw unreadable(id, 'consentsGranted: expected array of strings');
  }
  if (!isPlainObject(state.flags)) throw unreadable(id, 'flags: expected object');
  if (state.graph !== undefined && !isPlainObject(state.graph)) throw unreadable(id, 'graph: expected object');
  if (state.sessionId !== undefined && typeof state.sessionId !== 'string') throw unreadable(id, 'sessionId: expected string');
  // The calls of a suspended turn, or of the turn in flight, answer the model's turn: the last content.
  const callsOf = (calls: unknown, field: string): void => {
    if (!Array.isArray(calls)) throw unreadable(id, `${field}: expected array`);
    for (let index = 0; index < calls.length; index += 1) {
      const problem = callProblem(calls[index]);
      if (problem) throw unreadable(id, `${field}[${index}]${problem}`);
    }
    if (state.contents?.at(-1)?.role !== 'model') throw unreadable(id, `${field}: the last content is not the model's turn they answer`);
  };
  if (state.kind === 'suspend') {
    callsOf(state.calls, 'calls');
    if (typeof state.pendingCallId !== 'string' || !state.calls?.some((call) => call.callId === state.pendingCallId)) {
      throw unreadable(id, 'pendingCallId: expected the callId of one of the calls');
    }
    if (state.precondition !== undefined && typeof state.precondition !== 'boolean') throw unreadable(id, 'precondition: expected boolean');
  }
  if (state.turn !== undefined) {
    if (!isPlainObject(state.turn)) throw unreadable(id, 'turn: expected object');
    callsOf(state.turn.calls, 'turn.calls');
    if (state.turn.result !== undefined && !isPlainObject(state.turn.result)) throw unreadable(id, 'turn.result: expected object');
  }
  return state as InteractionState;
}

/** What is wrong with a saved call (`": ..."` or `".field: ..."`), or `undefined`. */
function callProblem(call: unknown): string | undefined {
  if (!isPlainObject(call)) return ': expected object';
  if (typeof call.callId !== 'string') return '.callId: expected string';
  if (typeof call.name !== 'string') return '.name: expected string';
  if (!isPlainObject(call.args)) return '.args: expected object';
  if (call.providerId !== undefined && typeof call.providerId !== 'string') return '.providerId: expected string';
  if (call.response !== undefined && !isPlainObject(call.response)) return '.response: expected object';
  if (call.started !== undefined && typeof call.started !== 'boolean') return '.started: expected boolean';
  return undefined;
}

function unreadable(id: string, problem: string): AgentError {
  return new AgentError('STORE_ERROR', `Interaction ${id} has a saved state this runtime cannot read (${problem})`);
}
