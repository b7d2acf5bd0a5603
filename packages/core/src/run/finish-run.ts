import { AgentError, toAgentError } from '../errors/index.js';
import { composeFunctionGroups, type FunctionGroup, type OptionalGroups } from '../functions/index.js';
import { saveInteraction, type InteractionClaim } from '../interactions/index.js';
import { createToolbox, runAgentLoop, type LoopOutcome, type LoopSession, type Toolbox } from '../loop/agent-loop.js';
import type { RecoveredTurn } from '../loop/turn-journal.js';
import type { AgentPorts } from '../ports/index.js';
import type { AgentResult } from '../protocol/events.js';
import type { RunEvent } from '../protocol/run-events.js';
import { CheckpointJournal } from './checkpoint-journal.js';
import { toSavedCalls, toSavedState } from './persistence.js';
import type { RunEnvironment } from './run-environment.js';
import type { RunMemory } from './run-memory.js';
import type { RunOptions } from './run-options.js';

/** The toolboxes of runs with the built-in groups only, by the optional groups they turn on. */
const defaultToolboxes = new Map<string, Toolbox>();

/**
 * The toolbox of a run: the composed function groups (with the `optional` built-in groups the
 * run turns on), assembled once. Runs with the built-in groups only share one toolbox per
 * process for each set of optional groups.
 */
export function toolboxFor(options: RunOptions, optional: OptionalGroups = {}): Toolbox {
  const extra: readonly FunctionGroup[] = options.functionGroups ?? [];
  const includeDefaults = options.defaultFunctionGroups !== false;
  if (extra.length === 0 && includeDefaults) {
    const key = `${optional.memory === true}:${optional.googleDrive === true}`;
    let toolbox = defaultToolboxes.get(key);
    if (!toolbox) {
      toolbox = createToolbox(composeFunctionGroups([], true, optional));
      defaultToolboxes.set(key, toolbox);
    }
    return toolbox;
  }
  return createToolbox(composeFunctionGroups(extra, includeDefaults, optional));
}

/** One segment of a run: what it runs with, and the record it holds, if any. */
export interface Segment {
  session: LoopSession;
  toolbox: Toolbox;
  ports: AgentPorts;
  options: RunOptions;
  environment: RunEnvironment;
  /** The record this segment holds (a resumed run, or a run that keeps checkpoints from its start). */
  claim?: InteractionClaim;
  /** A turn a crash interrupted, to finish first. */
  recovered?: RecoveredTurn;
  /** The session differs from the held record (an answer was applied): checkpoint it first. */
  unsaved?: boolean;
  /** The run's memory, when it has one: questions the run suspends on are added to its chat log. */
  memory?: RunMemory;
}

/**
 * Runs the loop for a prepared segment and ends it: the outcome's events, and the held record
 * committed (the run moved on to a durable point) or released (it stopped any other way, and
 * stays resumable under the same id at once). When the store fails as the segment ends (the
 * commit, the save of a suspend, the release of a pause), the held record is the run: one `error`
 * event says so with its `interactionId`, as a pause does.
 */
export async function runSegment(segment: Segment): Promise<void> {
  const { claim, environment } = segment;
  if (claim) {
    claim.startHeartbeat();
    claim.onLost((reason) => environment.abort(reason));
  }
  let journal: CheckpointJournal | undefined;
  try {
    journal = claim ? new CheckpointJournal(claim, segment.toolbox.definitions, segment.options, environment.signal, segment.unsaved === true) : undefined;
    const outcome = await runAgentLoop(
      segment.session,
      {
        ports: segment.ports,
        toolbox: segment.toolbox,
        signal: environment.signal,
        emit: environment.emit,
        ...(journal ? { journal } : {}),
        ...(segment.options.modelPolicy ? { modelPolicy: segment.options.modelPolicy } : {}),
      },
      segment.recovered,
    );
    // The store kept failing a checkpoint (the loop ends on it as on any failure): the record is
    // still there, as last written, so the run is as resumable as after any other store failure.
    if (journal?.failure?.code === 'STORE_ERROR') throw journal.failure;
    await finishSegment(outcome, segment);
  } catch (error) {
    // Stopped, or the record was taken over: nothing more to say (or the loss, as it is).
    if (!claim || environment.signal.aborted) throw error;
    const failure = toAgentError(error);
    try {
      await claim.release();
    } catch (releaseError) {
      // Gone, or another process holds it now: no run to resume here.
      if (claim.lost.aborted) throw releaseError;
      // Still held by this process's lease: resumable once it runs out.
    }
    // A resume whose answer's checkpoint was never written still holds the question, not the answer.
    if (journal?.answerUnsaved === true) {
      environment.emit(answerNotSaved(claim.id, failure));
      return;
    }
    environment.emit({
      type: 'error',
      message: `${failure.message} (the run was saved; resume interaction ${claim.id} to retry)`,
      code: failure.code,
      interactionId: claim.id,
    });
  } finally {
    // Whatever stopped the segment early (a disconnect, a thrown error): the run stays resumable.
    await claim?.release().catch(() => undefined);
  }
}

/**
 * The `error` event of a resume whose answer was applied but never saved: the record still holds
 * the question, so resuming it with `{}` (as a pause is retried) is no retry. It says to resume
 * with the answer again, and keeps the id to do so with.
 */
export function answerNotSaved(interactionId: string, failure: AgentError): RunEvent {
  return {
    type: 'error',
    message: `${failure.message} (the answer was not saved: interaction ${interactionId} still waits for it; resume it with the answer again)`,
    code: failure.code,
    interactionId,
  };
}

/**
 * Turns a loop outcome into the last events of the segment, in the protocol's order: `finish` and
 * `complete`; `finish`, `error`, `complete{success:false}`; a saved suspend; or a saved pause.
 */
export async function finishSegment(outcome: LoopOutcome, segment: Segment): Promise<void> {
  const { session, ports, options, claim } = segment;
  const { emit } = segment.environment;
  switch (outcome.kind) {
    case 'done': {
      const result: AgentResult = { ...outcome.result };
      const files = session.fs.files();
      if (result.success && files.length > 0) result.intermediate = files.map(({ path, part }) => ({ path, content: part }));
      else delete result.intermediate;
      if (result.href === '/') delete result.href;
      await claim?.commit();
      emit({ type: 'finish' });
      emit({ type: 'complete', result });
      return;
    }
    case 'fatal':
      // A held record stays resumable from its last checkpoint (released by runSegment).
      emit({ type: 'finish' });
      emit(
        claim
          ? { type: 'error', message: outcome.message, code: outcome.code, interactionId: claim.id }
          : { type: 'error', message: outcome.message, code: outcome.code },
      );
      emit({ type: 'complete', result: { success: false } });
      return;
    case 'suspend': {
      const interactionId = crypto.randomUUID();
      const state = toSavedState(session, 'suspend', options);
      state.calls = toSavedCalls(outcome.calls, outcome.pending);
      state.pendingCallId = outcome.pending.callId;
      state.precondition = outcome.suspend.precondition;
      await saveInteraction(ports.store, interactionId, state, options.owner, options.sessionId);
      // The chat log in memory is kept best effort: a failed write never stops the run.
      await segment.memory?.chatLog.recordQuestion(outcome.pending, segment.environment.signal).catch(() => undefined);
      await handOver(interactionId, segment);
      emit({ ...outcome.suspend.event, interactionId } as RunEvent);
      return;
    }
    case 'pause': {
      let interactionId: string;
      if (claim) {
        // The last checkpoint is this turn boundary: releasing the record is the pause.
        interactionId = claim.id;
        await claim.release();
      } else {
        interactionId = crypto.randomUUID();
        await saveInteraction(ports.store, interactionId, toSavedState(session, 'checkpoint', options), options.owner, options.sessionId);
      }
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

/**
 * Makes the record just saved under `next` the run, in place of the one the segment holds (which
 * is committed). The suspend event that names `next` goes out right after, so a reader that left
 * before it could be read never learns `next`: then the held record stays the run (put back if it
 * was already committed) and `next` goes, as it does when the commit fails.
 */
async function handOver(next: string, segment: Segment): Promise<void> {
  const { claim, environment, ports } = segment;
  const drop = () => ports.store.delete(next).catch(() => false);
  if (environment.readerLeft()) {
    await drop();
    throw new AgentError('ABORTED', 'Run was stopped');
  }
  if (!claim) return;
  try {
    await claim.commit();
  } catch (error) {
    // Taken over (the other process has the run), or the store failed and the held record is
    // still there: either way it is not `next`.
    await drop();
    throw error;
  }
  if (environment.readerLeft()) {
    await claim.reinstate();
    await drop();
    throw new AgentError('ABORTED', 'Run was stopped');
  }
}

/** The error a resume gets when the record is held by a live claim elsewhere. */
export function busyError(interactionId: string, until: number): AgentError {
  const seconds = Math.max(1, Math.ceil((until - Date.now()) / 1000));
  return new AgentError(
    'CONFLICT',
    `Interaction ${interactionId} is being resumed by another request; try again when it ends (or in ${seconds} s if that server stopped)`,
    { details: { retryAfterSeconds: seconds } },
  );
}
