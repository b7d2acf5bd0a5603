import { AgentFileSystem, TaskTreeManager } from '../agent-fs/index.js';
import { AgentError, messageOf, toAgentError } from '../errors/index.js';
import { WEBPAGE_CONSENT } from '../functions/index.js';
import { claimInteraction, DEFAULT_MAX_STATE_BYTES, type InteractionClaim } from '../interactions/index.js';
import { createFunctionContext, fatalOutcome, type LoopOutcome, type LoopSession, type Toolbox } from '../loop/agent-loop.js';
import { invokeFunction, toFunctionResponsePart } from '../loop/function-caller.js';
import type { AgentPorts } from '../ports/index.js';
import type { JsonObject, Part } from '../protocol/content.js';
import type { AgentResult } from '../protocol/events.js';
import type { ResumeResponse } from '../protocol/resume-responses.js';
import type { RunEvent } from '../protocol/run-events.js';
import { CHECKPOINT_RETRY_DELAYS_MS } from './checkpoint-journal.js';
import { answerNotSaved, busyError, finishSegment, runSegment, toolboxFor, type Segment } from './finish-run.js';
import { readInteractionState, type InteractionState } from './interaction-state.js';
import { toSavedState } from './persistence.js';
import { driveRun, type RunEnvironment } from './run-environment.js';
import { openRunMemory, optionalGroupsOf } from './run-memory.js';
import { DEFAULT_MAX_TURNS, type RunOptions } from './run-options.js';

/**
 * Resumes the run saved under `interactionId` and yields the rest of its events: a suspended run
 * with the client's `response`, a paused or interrupted run from its last checkpoint (the
 * response is then ignored, so an answer is never applied twice). A suspended run takes any
 * response as its answer, as the reference does: when the store could not save an answer, the
 * `error` event says so, and that the interaction waits for the answer again.
 *
 * The run is claimed first: one resumer at a time, and only its owner. An unknown or finished id
 * yields one `error` event with code `INTERACTION_NOT_FOUND`, another owner's run `FORBIDDEN`
 * (and the run is not touched), a run another request is resuming `CONFLICT`. If the resumed
 * segment stops without reaching its next durable point (the client left, a fatal error, the
 * process died), the run stays resumable under the same id.
 *
 * @example
 * ```ts
 * for await (const event of resume(id, { input: { parts: [{ text: 'Ada' }] } }, ports)) {
 *   if (event.type === 'complete') console.log(event.result);
 * }
 * ```
 */
export function resume(
  interactionId: string,
  response: ResumeResponse,
  ports: AgentPorts,
  options: RunOptions = {},
): AsyncGenerator<RunEvent> {
  return driveRun(options, async (environment) => {
    const { emit } = environment;
    const claimed = await claimInteraction(ports.store, interactionId, {
      ...(options.owner === undefined ? {} : { owner: options.owner }),
      ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
    });
    if (claimed.status !== 'claimed') {
      const error =
        claimed.status === 'missing'
          ? new AgentError('INTERACTION_NOT_FOUND', `Unknown interaction ID: ${interactionId}`)
          : claimed.status === 'forbidden'
            ? new AgentError('FORBIDDEN', `Interaction ${interactionId} belongs to another user`)
            : busyError(interactionId, claimed.until);
      emit({ type: 'error', message: error.message, code: error.code });
      return;
    }
    await continueClaimed(claimed.claim, response, ports, options, environment);
  });
}

/**
 * Resumes a run whose record the caller already claimed (the session layer claims first, so a
 * refused claim never reaches the session's log). The claim is committed or released at the end.
 */
export function resumeClaimed(claim: InteractionClaim, response: ResumeResponse, ports: AgentPorts, options: RunOptions = {}): AsyncGenerator<RunEvent> {
  return driveRun(options, (environment) => continueClaimed(claim, response, ports, options, environment));
}

async function continueClaimed(
  claim: InteractionClaim,
  response: ResumeResponse,
  ports: AgentPorts,
  options: RunOptions,
  environment: RunEnvironment,
): Promise<void> {
  let prepared: Segment | undefined;
  // Held from now on: applying the answer may run a function (a consent), which takes its time.
  claim.startHeartbeat();
  claim.onLost((reason) => environment.abort(reason));
  try {
    prepared = await prepare(claim, response as JsonObject, ports, options, environment);
  } finally {
    // Unreadable, or the answer itself ended the run: nothing will hold the record any longer.
    if (!prepared) await claim.release().catch(() => undefined);
  }
  if (prepared) await runSegment(prepared);
}

/**
 * Rebuilds the session from the claimed record and applies the client's answer (recorded as the
 * first checkpoint before the first model request): the segment to run.
 * `undefined` when the answer itself ended the run (its events are already out).
 *
 * The segment is written out whole here rather than spread from a partial one: in V8 (Node 20)
 * each property written after a spread (`{ ...prepared, ports }`) costs about a microsecond, a
 * measurable part of a resume.
 */
async function prepare(
  claim: InteractionClaim,
  response: JsonObject,
  ports: AgentPorts,
  options: RunOptions,
  environment: RunEnvironment,
): Promise<Segment | undefined> {
  // A state bigger than the store keeps could never be checkpointed again: refused before anything runs.
  const state = readInteractionState(claim.id, claim.stateText, ports.store.maxStateBytes ?? DEFAULT_MAX_STATE_BYTES);
  const fs = AgentFileSystem.fromSnapshot(state.fileSystem as Parameters<typeof AgentFileSystem.fromSnapshot>[0]);
  const session: LoopSession = {
    mode: options.mode ?? state.mode,
    model: options.model ?? state.model,
    contents: state.contents,
    fs,
    taskTree: TaskTreeManager.fromSnapshot(state.taskTree as Parameters<typeof TaskTreeManager.fromSnapshot>[0], fs),
    flags: state.flags,
    consentsGranted: new Set(state.consentsGranted),
    turnCount: state.turnCount,
    maxTurns: options.maxTurns ?? DEFAULT_MAX_TURNS,
    sessionId: state.sessionId ?? options.sessionId ?? crypto.randomUUID(),
  };
  if (state.graph) session.graph = state.graph;
  const memory = await openRunMemory(session, ports, environment.signal, options, 'resume');
  const toolbox = toolboxFor(options, optionalGroupsOf(session, ports));
  const withMemory = memory ? { memory } : {};
  if (state.kind === 'checkpoint') {
    return state.turn
      ? { session, toolbox, ports, options, environment, claim, recovered: state.turn, ...withMemory }
      : { session, toolbox, ports, options, environment, claim, ...withMemory };
  }

  const answered = await answerPendingCall(state, response, session, toolbox, ports, options, environment, claim);
  if (answered.kind === 'unsaved') {
    environment.emit(answerNotSaved(claim.id, answered.error));
    return undefined;
  }
  if (answered.kind === 'outcome') {
    await finishSegment(answered.outcome, { session, toolbox, ports, options, environment, claim, ...withMemory });
    return undefined;
  }
  const pending = state.calls?.find((candidate) => candidate.callId === state.pendingCallId);
  if (memory && pending && !state.precondition) {
    // Best effort, like every chat log write: the answer reaches the model either way.
    await memory.chatLog.recordAnswer(pending, answered.response, environment.signal).catch(() => undefined);
  }
  const parts: Part[] = (state.calls ?? []).map((call) =>
    toFunctionResponsePart(call, call.callId === state.pendingCallId ? answered.response : (call.response ?? {})),
  );
  session.contents.push({ role: 'user', parts });
  // Written before the first model request, so a crash from there on never applies the answer again.
  return { session, toolbox, ports, options, environment, claim, unsaved: true, ...withMemory };
}

/**
 * What the client's answer made of the suspended call: its function response, the run's end, or
 * nothing yet (the store failed before a call the answer allowed could start).
 */
type Answered = { kind: 'response'; response: JsonObject } | { kind: 'outcome'; outcome: LoopOutcome } | { kind: 'unsaved'; error: AgentError };

/**
 * Turns the client's answer into the suspended call's function response: a consent re-runs the
 * call through the same path as any call (the model never sees the round trip), a function with
 * a `resume` hook maps the answer, anything else passes the answer through.
 */
async function answerPendingCall(
  state: InteractionState,
  response: JsonObject,
  session: LoopSession,
  toolbox: Toolbox,
  ports: AgentPorts,
  options: RunOptions,
  environment: RunEnvironment,
  claim: InteractionClaim,
): Promise<Answered> {
  const call = state.calls?.find((candidate) => candidate.callId === state.pendingCallId);
  if (!call) return { kind: 'response', response };
  const definition = toolbox.definitions.get(call.name);
  let result: AgentResult | undefined;
  const createContext = () =>
    createFunctionContext(session, { ports, signal: environment.signal, emit: environment.emit }, call.callId, (value) => {
      result ??= value;
    }, { silent: true });
  let answered: Answered;
  if (state.precondition) {
    if (response.consent !== true) return { kind: 'response', response: { error: 'User declined URL access consent' } };
    session.consentsGranted.add(WEBPAGE_CONSENT);
    if (definition?.sideEffects === true) {
      // Recorded as started before it runs, as the loop does: if this process dies while it runs,
      // the run goes on with the call reported as interrupted instead of running it a second time.
      const started = toSavedState(session, 'checkpoint', options);
      started.turn = {
        calls: (state.calls ?? []).map(({ response: answer, ...record }) =>
          record.callId === call.callId ? { ...record, started: true } : answer === undefined ? record : { ...record, response: answer },
        ),
      };
      try {
        await claim.checkpoint(started, { delaysMs: CHECKPOINT_RETRY_DELAYS_MS, signal: environment.signal });
      } catch (error) {
        // Lost or stopped: said as it is. Else the record still holds the question, unanswered.
        if (environment.signal.aborted) throw error;
        return { kind: 'unsaved', error: toAgentError(error) };
      }
    }
    const outcome = await invokeFunction(definition, call, createContext);
    if (outcome.kind === 'fatal') return { kind: 'outcome', outcome: fatalOutcome(outcome.error) };
    answered = {
      kind: 'response',
      response: outcome.kind === 'response' ? outcome.response : { error: 'The function asked for the user again after consent' },
    };
  } else if (definition?.resume) {
    try {
      answered = { kind: 'response', response: await definition.resume(response, createContext()) };
    } catch (error) {
      answered = { kind: 'response', response: { error: messageOf(error) } };
    }
  } else {
    answered = { kind: 'response', response };
  }
  // A termination function that suspended (none of the built-ins does) ends the run here.
  return result ? { kind: 'outcome', outcome: { kind: 'done', result } } : answered;
}
