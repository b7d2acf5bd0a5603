import type { LoopSession } from '../loop/agent-loop.js';
import type { CallRecord, SettledCall } from '../loop/function-caller.js';
import { INTERACTION_STATE_VERSION, type InteractionState, type SavedCall } from './interaction-state.js';
import type { RunOptions } from './run-options.js';

/**
 * The state of a session as it is saved. It shares the session's arrays and objects: encode it
 * before the session changes again (the store encoding does so at once).
 */
export function toSavedState(session: LoopSession, kind: InteractionState['kind'], options: RunOptions): InteractionState {
  const state: InteractionState = {
    version: INTERACTION_STATE_VERSION,
    createdAt: (options.now?.() ?? new Date()).toISOString(),
    kind,
    mode: session.mode,
    model: session.model,
    contents: session.contents,
    fileSystem: session.fs.snapshot(),
    taskTree: session.taskTree.snapshot(),
    flags: session.flags,
    consentsGranted: [...session.consentsGranted].sort(),
    turnCount: session.turnCount,
  };
  if (session.graph) state.graph = session.graph;
  if (session.sessionId !== undefined) state.sessionId = session.sessionId;
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
