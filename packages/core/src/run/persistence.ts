import type { LoopSession } from '../loop/agent-loop.js';
import type { CallRecord, SettledCall } from '../loop/function-caller.js';
import {
  INTERACTION_STATE_VERSION,
  type InteractionEnvelope,
  type InteractionState,
  type SavedCall,
} from './interaction-state.js';
import type { RunOptions } from './run-options.js';

/** The state of a session as it is saved: plain JSON, nothing shared with the live session. */
export function toSavedState(session: LoopSession, kind: InteractionState['kind']): InteractionState {
  const state: InteractionState = {
    kind,
    mode: session.mode,
    model: session.model,
    contents: session.contents,
    calls: [],
    precondition: false,
    fileSystem: session.fs.snapshot(),
    taskTree: session.taskTree.snapshot(),
    flags: session.flags,
    consentsGranted: [...session.consentsGranted].sort(),
    turnCount: session.turnCount,
  };
  if (session.graph) state.graph = session.graph;
  return state;
}

/** The calls of a suspended turn as saved: every finished call keeps its response. */
export function toSavedCalls(calls: readonly SettledCall[], pending: CallRecord): SavedCall[] {
  return calls.map(({ call, outcome }) => {
    const saved: SavedCall = { callId: call.callId, name: call.name, args: call.args };
    if (call.providerId !== undefined) saved.providerId = call.providerId;
    if (call !== pending && outcome.kind === 'response') saved.response = outcome.response;
    return saved;
  });
}

/** Wraps a state in the versioned envelope, bound to the run's owner. */
export function toEnvelope(state: InteractionState, options: RunOptions): InteractionEnvelope {
  const value: InteractionEnvelope = {
    version: INTERACTION_STATE_VERSION,
    createdAt: (options.now?.() ?? new Date()).toISOString(),
    state,
  };
  if (options.owner !== undefined) value.owner = options.owner;
  return value;
}
