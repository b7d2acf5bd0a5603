import { composeFunctionGroups } from '../functions/index.js';
import { createToolbox, runAgentLoop, type LoopOutcome, type LoopSession, type Toolbox } from '../loop/agent-loop.js';
import type { AgentPorts } from '../ports/index.js';
import type { AgentResult } from '../protocol/events.js';
import { toEnvelope, toSavedCalls, toSavedState } from './persistence.js';
import type { RunEnvironment } from './run-environment.js';
import type { RunEvent } from './run-events.js';
import type { RunOptions } from './run-options.js';

/** The toolbox of a run: the composed function groups, assembled once. */
export function toolboxFor(options: RunOptions): Toolbox {
  return createToolbox(composeFunctionGroups(options.functionGroups, options.defaultFunctionGroups !== false));
}

/** Runs the loop for a prepared session and reports how it ended. */
export async function continueRun(
  session: LoopSession,
  toolbox: Toolbox,
  ports: AgentPorts,
  options: RunOptions,
  environment: RunEnvironment,
): Promise<void> {
  const outcome = await runAgentLoop(session, { ports, toolbox, signal: environment.signal, emit: environment.emit });
  await finishRun(outcome, session, ports, options, environment);
}

/**
 * Turns a loop outcome into the last events of the segment, in the protocol's order: `finish` and
 * `complete`; `finish`, `error`, `complete{success:false}`; a saved suspend; or a saved pause.
 */
export async function finishRun(
  outcome: LoopOutcome,
  session: LoopSession,
  ports: AgentPorts,
  options: RunOptions,
  { emit }: RunEnvironment,
): Promise<void> {
  switch (outcome.kind) {
    case 'done': {
      const result: AgentResult = { ...outcome.result };
      const files = session.fs.files();
      if (result.success && files.length > 0) result.intermediate = files.map(({ path, part }) => ({ path, content: part }));
      else delete result.intermediate;
      if (result.href === '/') delete result.href;
      emit({ type: 'finish' });
      emit({ type: 'complete', result });
      return;
    }
    case 'fatal':
      emit({ type: 'finish' });
      emit({ type: 'error', message: outcome.message, code: outcome.code });
      emit({ type: 'complete', result: { success: false } });
      return;
    case 'suspend': {
      const interactionId = crypto.randomUUID();
      const state = toSavedState(session, 'suspend');
      state.calls = toSavedCalls(outcome.calls, outcome.pending);
      state.pendingCallId = outcome.pending.callId;
      state.precondition = outcome.suspend.precondition;
      await ports.store.save(interactionId, toEnvelope(state, options));
      emit({ ...outcome.suspend.event, interactionId } as RunEvent);
      return;
    }
    case 'pause': {
      const interactionId = crypto.randomUUID();
      await ports.store.save(interactionId, toEnvelope(toSavedState(session, 'pause'), options));
      emit({
        type: 'error',
        message: `${outcome.error.message} (the run was saved; resume interaction ${interactionId} to retry)`,
        code: outcome.error.code,
        interactionId,
      });
      return;
    }
  }
}
