import { addChatLogFile, type AgentFileSystem, type ChatLogEntry, type TaskTreeManager } from '../agent-fs/index.js';
import { AgentError, ERROR_CODES, toAgentError, type ErrorCode } from '../errors/index.js';
import {
  toFunctionDeclaration,
  type FunctionContext,
  type FunctionDefinition,
  type FunctionGroup,
  type Suspend,
} from '../functions/index.js';
import type { SheetManager } from '../memory/index.js';
import { BodyConformer, HistoryValidator } from '../model/index.js';
import type { AgentPorts } from '../ports/index.js';
import type { JsonObject, LLMContent, Part } from '../protocol/content.js';
import type { AgentResult } from '../protocol/events.js';
import { fixedFrom, fixedJson } from '../protocol/fixed-json.js';
import type { GenerateContentRequest, Tool } from '../protocol/gemini.js';
import type { RunEvent } from '../protocol/run-events.js';
import { FunctionCaller, toFunctionResponsePart, type CallRecord, type SettledCall } from './function-caller.js';
import {
  DEFAULT_MODEL_POLICY,
  guardModelStream,
  isTransient,
  retriedByBackend,
  retryDelayMs,
  sleep,
  stopError,
  toModelFailure,
  type ModelPolicy,
} from './model-stream.js';
import { interruptedResponse, type RecoveredTurn, type TurnJournal } from './turn-journal.js';
import { UnusableTurnGuard, type GuardedTurn } from './unusable-turn.js';

/** How the loop decides it is done: `objective` ends on a termination function, `chat` on a turn without calls. */
export type LoopMode = 'objective' | 'chat';

/** Everything one run carries from turn to turn; it is what a suspend saves. */
export interface LoopSession {
  mode: LoopMode;
  model: string;
  contents: LLMContent[];
  fs: AgentFileSystem;
  taskTree: TaskTreeManager;
  flags: Record<string, unknown>;
  graph?: { url?: string; title?: string };
  consentsGranted: Set<string>;
  turnCount: number;
  maxTurns: number;
  /**
   * Chat log entries from before this session (kept in memory); `/mnt/system/chat_log.json` lists
   * them before the ones derived from `contents`. Never saved with the session.
   */
  chatLogSeed?: ChatLogEntry[];
  /** The graph's memory when the run has one; handlers see it as `context.memory`. Never saved. */
  memory?: SheetManager;
  /** The conversation this run belongs to, stable across suspends and resumes (saved with the run). */
  sessionId?: string;
}

/** How a loop ended. */
export type LoopOutcome =
  | { kind: 'done'; result: AgentResult }
  | { kind: 'fatal'; message: string; code: ErrorCode }
  | { kind: 'suspend'; suspend: Suspend; pending: CallRecord; calls: SettledCall[] }
  | { kind: 'pause'; error: AgentError };

/**
 * The tools, declarations and instruction assembled once from the function groups of a run. The
 * tools and the instruction go out with every request as they are: they are fixed (frozen, their
 * JSON kept), so no request serialises them again.
 */
export interface Toolbox {
  definitions: ReadonlyMap<string, FunctionDefinition>;
  tools: Tool[];
  /** The groups' instructions as the request's `systemInstruction`; none when no group has one. */
  systemInstruction?: LLMContent;
}

/** Assembles groups into a toolbox; a later group's function replaces an earlier one of the same name. */
export function createToolbox(groups: readonly FunctionGroup[]): Toolbox {
  const definitions = new Map<string, FunctionDefinition>();
  for (const group of groups) for (const definition of group.functions) definitions.set(definition.name, definition);
  const functionDeclarations = [...definitions.values()].map((definition) => toFunctionDeclaration(definition));
  const tools: Tool[] = fixedFrom(functionDeclarations.length > 0 ? [fixedFrom({ functionDeclarations: fixedFrom(functionDeclarations) })] : []);
  const instruction = groups
    .map((group) => group.instruction ?? '')
    .filter((text) => text.length > 0)
    .join('\n\n');
  if (instruction.length === 0) return { definitions, tools };
  return { definitions, tools, systemInstruction: fixedInstruction(instruction) };
}

/** The instructions of recent toolboxes, by their text: runs with the same groups share one. */
const instructions = new Map<string, LLMContent>();
const MAX_KEPT_INSTRUCTIONS = 64;

/** `text` as a fixed `systemInstruction` content (written as JSON once, not once per run). */
function fixedInstruction(text: string): LLMContent {
  let content = instructions.get(text);
  if (content === undefined) {
    content = fixedFrom<LLMContent>({ parts: fixedFrom([fixedFrom({ text })]), role: 'user' });
    if (instructions.size >= MAX_KEPT_INSTRUCTIONS) instructions.delete(instructions.keys().next().value as string);
    instructions.set(text, content);
  }
  return content;
}

const GENERATION_CONFIG = fixedJson({
  temperature: 1,
  topP: 1,
  thinkingConfig: { includeThoughts: true, thinkingBudget: -1 },
});

/** An objective run must call a function every turn (until it calls one that ends the run). */
const OBJECTIVE_TOOL_CONFIG: GenerateContentRequest['toolConfig'] = fixedJson({ functionCallingConfig: { mode: 'ANY' } });

/** What the loop needs from its surroundings. */
export interface LoopEnvironment {
  ports: AgentPorts;
  toolbox: Toolbox;
  signal: AbortSignal;
  emit(event: RunEvent): void;
  /** Metadata handlers reported for their calls, emitted with each `functionResult`. */
  resultMetadata?: Map<string, JsonObject>;
  /** Records progress so a crashed run can go on; absent, nothing is recorded. */
  journal?: TurnJournal;
  /** Model timeouts and retries; defaults in {@link DEFAULT_MODEL_POLICY}. */
  modelPolicy?: ModelPolicy;
}

/** The result of a call announced from an answer that broke off and was asked for again. */
const SET_ASIDE = "The model's answer broke off before it finished, so this call was set aside";

/**
 * Runs model turns until the session ends, suspends, or fails. Events go out through `emit` as
 * they happen; the outcome says how it ended. Cancellation (the signal) rejects with an
 * `ABORTED` error. A `recovered` turn (from a journal) is finished first, without asking the
 * model again.
 */
export async function runAgentLoop(session: LoopSession, environment: LoopEnvironment, recovered?: RecoveredTurn): Promise<LoopOutcome> {
  const { ports, toolbox, signal, emit, journal } = environment;
  const policy = { ...DEFAULT_MODEL_POLICY, ...environment.modelPolicy };
  let result: AgentResult | undefined = recovered?.result;
  const terminate = (value: AgentResult): void => {
    result ??= value;
  };
  const resultMetadata = new Map<string, JsonObject>();
  const unusableTurns = new UnusableTurnGuard(signal);
  // The history only grows at its end: each request checks and conforms only what was appended.
  const history = new HistoryValidator();
  const conformer = new BodyConformer(ports.backend);
  addChatLogFile(session.fs, () => session.contents, () => session.chatLogSeed ?? []);
  const emitResult = (call: CallRecord, response: JsonObject): void => {
    const metadata = resultMetadata.get(call.callId);
    resultMetadata.delete(call.callId);
    const content = { parts: [{ functionResponse: { name: call.name, response } }] };
    emit(metadata ? { type: 'functionResult', callId: call.callId, content, metadata } : { type: 'functionResult', callId: call.callId, content });
  };
  let attempt = 1;
  /** Stops passing the run's abort to the turn's request and calls: once they have all settled. */
  let detachTurn: (() => void) | undefined;

  try {
    for (;;) {
      detachTurn?.();
      detachTurn = undefined;
      throwIfAborted(signal);
      let caller: FunctionCaller;
      if (recovered) {
        caller = replayTurn(recovered, session, { ...environment, resultMetadata }, terminate, journal);
        recovered = undefined;
      } else {
        const capped = session.turnCount >= session.maxTurns;
        if (capped) {
          emit({
            type: 'thought',
            text: `Turn limit reached (${session.maxTurns} turns): asking the model for a final answer without tools.`,
          });
        }
        // A history that could not be sent ends the run before any request is announced.
        history.check(session.contents);
        const body = buildRequestBody(session, toolbox, capped);
        emit({ type: 'sendRequest', model: session.model, body });
        if (journal) await journal.requestStarting(session);
        session.turnCount += 1;
        const sendable = await conformer.conform(body, signal);

        // One controller per request: a timeout or a broken answer stops the request and the calls it started.
        const turnController = new AbortController();
        const stopTurn = (): void => turnController.abort(signal.reason);
        // The run may have been stopped while the request was being prepared: its signal fires no more.
        if (signal.aborted) stopTurn();
        else {
          signal.addEventListener('abort', stopTurn, { once: true });
          detachTurn = () => signal.removeEventListener('abort', stopTurn);
        }
        // Side-effecting calls start once the whole answer is in (and journalled): `true` lets
        // them run, `false` settles them unrun, for an answer that broke off and is asked again.
        let openGate: (run: boolean) => void = () => undefined;
        const sideEffectGate = new Promise<boolean>((resolve) => {
          openGate = resolve;
        });
        const turnEnvironment = { ...environment, signal: turnController.signal, resultMetadata };
        caller = new FunctionCaller(
          toolbox.definitions,
          (call) => createFunctionContext(session, turnEnvironment, call.callId, terminate),
          {
            sideEffectGate,
            ...(journal ? { onSettled: (call, outcome) => journal.callSettled(session, call, outcome, result) } : {}),
          },
        );
        let chunks = 0;
        let guarded: GuardedTurn;
        try {
          guarded = await unusableTurns.streamTurn({
            request: () =>
              guardModelStream(ports.backend.streamGenerateContent(session.model, sendable, turnController.signal), turnController, policy),
            onDelta(delta) {
              chunks += 1;
              for (const text of delta.thoughts) emit({ type: 'thought', text });
              // The last turn is asked for without tools: a call the model makes anyway is not run
              // (it would outlive the run), nor announced.
              if (capped) return;
              for (const call of delta.functionCalls) {
                const record: CallRecord =
                  call.providerId === undefined
                    ? { callId: call.callId, name: call.name, args: call.args }
                    : { callId: call.callId, name: call.name, args: call.args, providerId: call.providerId };
                const definition = toolbox.definitions.get(call.name);
                emit(withOptional({ type: 'functionCall', callId: call.callId, name: call.name, args: call.args }, {
                  icon: definition?.icon,
                  title: definition?.title,
                }));
                caller.call(record);
              }
            },
            onUsage: (metadata) => emit({ type: 'usageMetadata', metadata }),
            final: capped,
          });
        } catch (error) {
          if (signal.aborted) throw error;
          const failure = toModelFailure(error);
          // The calls this partial answer started belong to an answer that will not be used.
          turnController.abort(failure);
          openGate(false);
          await caller.settle();
          // The backend retries what fails before its first chunk; a break mid-answer or a
          // timeout is retried here, as a new request for the same turn, unless the backend said
          // asking again cannot help (a daily quota, a wait past its budget): then the run pauses.
          const retryable =
            isTransient(failure) && failure.details?.retryable !== false && (chunks > 0 || failure.code === 'TIMEOUT' || !retriedByBackend(failure));
          // Each call announced from it gets its result, so no client shows it running forever.
          for (const call of caller.calls) emitResult(call, { error: SET_ASIDE });
          if (!retryable || attempt >= policy.maxAttempts) throw failure;
          await sleep(retryDelayMs(attempt, policy), signal);
          attempt += 1;
          session.turnCount -= 1;
          continue;
        }
        attempt = 1;
        if (guarded.kind === 'fatal') return guarded;
        if (guarded.kind === 'correction') {
          session.contents.push(guarded.content);
          continue;
        }
        const turn = guarded.turn;
        if (turn.content.parts.length > 0) session.contents.push(turn.content);
        saveDeliverables(session, turn.content);

        if (capped) {
          return { kind: 'done', result: { success: false, outcomes: answerOf(turn.content) } };
        }
        if (caller.size === 0) {
          if (session.mode === 'chat') return { kind: 'done', result: { success: true, outcomes: answerOf(turn.content) } };
          continue;
        }
        if (journal) await journal.turnReceived(session, caller.calls);
        openGate(true);
      }

      const settled = await caller.settle();
      const fatal = settled.find((entry) => entry.outcome.kind === 'fatal');
      if (fatal && fatal.outcome.kind === 'fatal') return fatalOutcome(fatal.outcome.error);

      const suspended = settled.find((entry) => entry.outcome.kind === 'suspend');
      if (suspended && suspended.outcome.kind === 'suspend') {
        const calls = settled.map((entry): SettledCall =>
          entry === suspended || entry.outcome.kind !== 'suspend'
            ? entry
            : {
                call: entry.call,
                outcome: { kind: 'response', response: { error: 'Another function in this turn suspended the session' } },
              },
        );
        for (const entry of calls) {
          if (entry !== suspended && entry.outcome.kind === 'response') emitResult(entry.call, entry.outcome.response);
        }
        return { kind: 'suspend', suspend: suspended.outcome.suspend, pending: suspended.call, calls };
      }

      const parts: Part[] = [];
      for (const entry of settled) {
        const response = entry.outcome.kind === 'response' ? entry.outcome.response : {};
        emitResult(entry.call, response);
        parts.push(toFunctionResponsePart(entry.call, response));
      }
      session.contents.push({ role: 'user', parts });
      emit({ type: 'turnComplete' });
      if (result) return { kind: 'done', result };
      if (journal) await journal.turnEnded(session);
    }
  } catch (error) {
    if (signal.aborted) throw stopError(signal);
    const agentError = toAgentError(error);
    if (isTransient(agentError)) return { kind: 'pause', error: agentError };
    return { kind: 'fatal', message: `Agent error: ${agentError.message}`, code: agentError.code };
  } finally {
    detachTurn?.();
  }
}

/**
 * Finishes a turn recovered from a journal: calls with a recorded response keep it, a
 * side-effecting call that had started is reported as interrupted, every other call runs again.
 */
function replayTurn(
  recovered: RecoveredTurn,
  session: LoopSession,
  environment: LoopEnvironment & { resultMetadata: Map<string, JsonObject> },
  terminate: (result: AgentResult) => void,
  journal: TurnJournal | undefined,
): FunctionCaller {
  const { toolbox } = environment;
  let result: AgentResult | undefined = recovered.result;
  const caller = new FunctionCaller(
    toolbox.definitions,
    (call) => createFunctionContext(session, environment, call.callId, (value) => {
      result ??= value;
      terminate(value);
    }),
    journal ? { onSettled: (call, outcome) => journal.callSettled(session, call, outcome, result) } : {},
  );
  for (const journalled of recovered.calls) {
    const { response, started, ...call } = journalled;
    if (response !== undefined) caller.settleWith(call, { kind: 'response', response });
    else if (started === true && toolbox.definitions.get(call.name)?.sideEffects === true) {
      caller.settleWith(call, { kind: 'response', response: interruptedResponse(call) });
    } else caller.call(call);
  }
  return caller;
}

/** The context a handler receives for one call. */
export function createFunctionContext(
  session: LoopSession,
  environment: Pick<LoopEnvironment, 'ports' | 'signal' | 'emit' | 'resultMetadata'>,
  callId: string,
  terminate: (result: AgentResult) => void,
  options: { silent?: boolean } = {},
): FunctionContext {
  const { emit } = environment;
  return {
    callId,
    signal: environment.signal,
    fs: session.fs,
    taskTree: session.taskTree,
    ports: environment.ports,
    model: session.model,
    consentsGranted: session.consentsGranted,
    flags: session.flags,
    ...(session.graph ? { graph: session.graph } : {}),
    ...(session.memory ? { memory: session.memory } : {}),
    reportMetadata(metadata) {
      if (options.silent) return;
      const known = environment.resultMetadata?.get(callId);
      environment.resultMetadata?.set(callId, known ? { ...known, ...metadata } : metadata);
    },
    update(status, updateOptions) {
      if (options.silent) return;
      const opts: { expectedDurationInSec?: number; isThought?: boolean } = {};
      if (updateOptions?.expectedDurationInSec !== undefined) opts.expectedDurationInSec = updateOptions.expectedDurationInSec;
      if (updateOptions?.isThought !== undefined) opts.isThought = updateOptions.isThought;
      emit(
        Object.keys(opts).length > 0
          ? { type: 'functionCallUpdate', callId, status, opts }
          : { type: 'functionCallUpdate', callId, status },
      );
    },
    terminate,
  };
}

function buildRequestBody(session: LoopSession, toolbox: Toolbox, capped: boolean): GenerateContentRequest {
  const body: GenerateContentRequest = { contents: session.contents.slice(), generationConfig: GENERATION_CONFIG };
  if (toolbox.systemInstruction) body.systemInstruction = toolbox.systemInstruction;
  if (!capped && toolbox.tools.length > 0) {
    body.tools = toolbox.tools;
    if (session.mode === 'objective') body.toolConfig = OBJECTIVE_TOOL_CONFIG;
  }
  return body;
}

/** Files the model produced itself (an image model's pictures) become files of the run. */
function saveDeliverables(session: LoopSession, content: LLMContent): void {
  for (const part of content.parts) {
    if (!part.inlineData || part.thought === true) continue;
    try {
      session.fs.addPart({ inlineData: part.inlineData });
    } catch {
      // A part the file system cannot name stays in the history only.
    }
  }
}

/** The model's visible answer of a turn: its non-thought text and inline media. */
function answerOf(content: LLMContent): LLMContent {
  const parts: Part[] = [];
  for (const part of content.parts) {
    if (part.thought === true) continue;
    if (typeof part.text === 'string' && part.text.length > 0) parts.push({ text: part.text });
    else if (part.inlineData) parts.push({ inlineData: part.inlineData });
  }
  return { role: 'model', parts };
}

/** The outcome of a handler's `{"$error": message, code?}`: the run ends with that message and code. */
export function fatalOutcome(error: JsonObject): LoopOutcome {
  const value = error.$error;
  const message = typeof value === 'string' ? value : JSON.stringify(value);
  const code = (ERROR_CODES as readonly unknown[]).includes(error.code) ? (error.code as ErrorCode) : 'INTERNAL';
  return { kind: 'fatal', message, code };
}

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw stopError(signal);
}

function withOptional<T extends object, O extends Record<string, unknown>>(base: T, optional: O): T & Partial<O> {
  const target = base as Record<string, unknown>;
  for (const key of Object.keys(optional)) if (optional[key] !== undefined) target[key] = optional[key];
  return target as T & Partial<O>;
}
