import { AgentError } from '../errors/index.js';
import type { LoopMode } from '../loop/agent-loop.js';
import type { JournalledCall } from '../loop/turn-journal.js';
import type { JsonObject, LLMContent } from '../protocol/content.js';
import type { AgentResult } from '../protocol/events.js';

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
 * Reads a stored state. The runtime wrote it, so only its frame is checked (version, kind, the
 * fields every resume reads); a state from another version or a damaged one is `STORE_ERROR`.
 */
export function readInteractionState(id: string, text: string): InteractionState {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw unreadable(id, 'not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw unreadable(id, 'not an object');
  const state = value as Partial<InteractionState>;
  if (state.version !== INTERACTION_STATE_VERSION) {
    throw unreadable(id, `it was saved in format ${JSON.stringify(state.version)}; this runtime reads format ${INTERACTION_STATE_VERSION}`);
  }
  if (state.kind !== 'suspend' && state.kind !== 'checkpoint') throw unreadable(id, 'kind: expected "suspend" or "checkpoint"');
  if (state.mode !== 'objective' && state.mode !== 'chat') throw unreadable(id, 'mode: expected "objective" or "chat"');
  if (typeof state.model !== 'string') throw unreadable(id, 'model: expected string');
  if (!Array.isArray(state.contents)) throw unreadable(id, 'contents: expected array');
  if (typeof state.turnCount !== 'number') throw unreadable(id, 'turnCount: expected number');
  if (!Array.isArray(state.consentsGranted)) throw unreadable(id, 'consentsGranted: expected array');
  if (typeof state.flags !== 'object' || state.flags === null) throw unreadable(id, 'flags: expected object');
  if (state.kind === 'suspend' && (!Array.isArray(state.calls) || typeof state.pendingCallId !== 'string')) {
    throw unreadable(id, 'a suspended state needs calls and pendingCallId');
  }
  return state as InteractionState;
}

function unreadable(id: string, problem: string): AgentError {
  return new AgentError('STORE_ERROR', `Interaction ${id} has a saved state this runtime cannot read (${problem})`);
}
