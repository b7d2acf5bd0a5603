import { AgentFileSystem, TaskTreeManager } from '../agent-fs/index.js';
import { formatFirstIssue, messageOf } from '../errors/index.js';
import { WEBPAGE_CONSENT } from '../functions/index.js';
import { createFunctionContext, fatalOutcome, type LoopOutcome, type LoopSession, type Toolbox } from '../loop/agent-loop.js';
import { invokeFunction, toFunctionResponsePart } from '../loop/function-caller.js';
import type { AgentPorts } from '../ports/index.js';
import type { JsonObject, Part } from '../protocol/content.js';
import type { AgentResult } from '../protocol/events.js';
import { continueRun, finishRun, toolboxFor } from './finish-run.js';
import { InteractionEnvelopeSchema, type InteractionState } from './interaction-state.js';
import { driveRun, type RunEnvironment } from './run-environment.js';
import type { ResumeResponse } from '../protocol/resume-responses.js';
import type { RunEvent } from './run-events.js';
import { DEFAULT_MAX_TURNS, type RunOptions } from './run-options.js';

/**
 * Resumes the suspended run saved under `interactionId` with the client's `response` and yields
 * the rest of its events. An interaction can be resumed once: an unknown or already-used id yields
 * one `error` event with code `INTERACTION_NOT_FOUND`; an interaction started by another owner is
 * refused with `FORBIDDEN` and stays resumable by its owner.
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
    const stored = await ports.store.take(interactionId);
    if (stored === undefined || stored === null) {
      emit({ type: 'error', message: `Unknown interaction ID: ${interactionId}`, code: 'INTERACTION_NOT_FOUND' });
      return;
    }
    const parsed = InteractionEnvelopeSchema.safeParse(stored);
    if (!parsed.success) {
      const where = formatFirstIssue('', parsed.error.issues).text;
      emit({
        type: 'error',
        message: `Interaction ${interactionId} has a saved state this runtime cannot read (${where})`,
        code: 'STORE_ERROR',
      });
      return;
    }
    const envelope = parsed.data;
    if (envelope.owner !== undefined && envelope.owner !== options.owner) {
      // Put it back untouched: the rightful owner can still resume it.
      await ports.store.save(interactionId, stored);
      emit({ type: 'error', message: `Interaction ${interactionId} belongs to another user`, code: 'FORBIDDEN' });
      return;
    }
    const state = envelope.state;
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
    };
    if (state.graph) session.graph = state.graph;
    const toolbox = toolboxFor(options);
    if (state.kind === 'suspend') {
      const answered = await answerPendingCall(state, response as JsonObject, session, toolbox, ports, environment);
      if (answered.kind === 'outcome') {
        await finishRun(answered.outcome, session, ports, options, environment);
        return;
      }
      const parts: Part[] = state.calls.map((call) =>
        toFunctionResponsePart(call, call.callId === state.pendingCallId ? answered.response : (call.response ?? {})),
      );
      session.contents.push({ role: 'user', parts });
    }
    await continueRun(session, toolbox, ports, options, environment);
  });
}

/** What the client's answer made of the suspended call: its function response, or the run's end. */
type Answered = { kind: 'response'; response: JsonObject } | { kind: 'outcome'; outcome: LoopOutcome };

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
  environment: RunEnvironment,
): Promise<Answered> {
  const call = state.calls.find((candidate) => candidate.callId === state.pendingCallId);
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
