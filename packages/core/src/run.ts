import { createAudioGroup, createGenerateGroup, createImageGroup, createVideoGroup, WEBPAGE_CONSENT } from './generation/index.js';
import { AgentFileSystem, TaskTreeManager, toPidgin } from './agent-fs/index.js';
import { AgentError, toAgentError } from './errors/index.js';
import { createChatGroup, createSystemGroup, type FunctionGroup } from './functions/index.js';
import {
  createFunctionContext,
  createToolbox,
  runAgentLoop,
  type LoopMode,
  type LoopOutcome,
  type LoopSession,
  type Toolbox,
} from './loop/agent-loop.js';
import { EventChannel } from './loop/event-channel.js';
import { messageOf, toFunctionResponsePart } from './loop/function-caller.js';
import {
  INTERACTION_STATE_VERSION,
  InteractionEnvelopeSchema,
  type InteractionEnvelope,
  type InteractionState,
} from './loop/interaction-state.js';
import type { AgentPorts } from './ports/index.js';
import type { JsonObject, LLMContent, Part } from './protocol/content.js';
import type { AgentEvent, AgentResult } from './protocol/events.js';
import type { StartRequest } from './protocol/requests.js';

/** The model used when a run names none. */
export const DEFAULT_MODEL = 'gemini-3-flash-preview';

/** The turn cap used when a run sets none. */
export const DEFAULT_MAX_TURNS = 50;

/** Options of {@link run} and {@link resume}. */
export interface RunOptions {
  /** Cancels the model request and every running handler. */
  signal?: AbortSignal;
  /** Gemini model id; on resume, defaults to the model the run started with. */
  model?: string;
  /** `objective` (default): ends on the termination functions. `chat`: ends on a turn without calls. */
  mode?: LoopMode;
  /** After this many model turns, one last tool-free turn is requested and the run ends. */
  maxTurns?: number;
  /** Extra function groups; a group named like a built-in one (`system`, `chat`) replaces it. */
  functionGroups?: FunctionGroup[];
  /** `false` leaves out the built-in groups (`system`, `chat`): the model sees only `functionGroups`. */
  defaultFunctionGroups?: boolean;
  /** Who started the run; a resume by anyone else is refused (decision W9). */
  owner?: string;
  /** Clock for the objective's date line and saved states. */
  now?: () => Date;
}

/**
 * Starts an agent run for `request` and yields its events in the reference order: `start`, then
 * per turn `sendRequest`, `thought`, `functionCall`, `functionCallUpdate`, `usageMetadata`,
 * `functionResult`, `turnComplete`, and finally `finish` + `complete`, an `error`, or a suspend
 * event carrying the `interactionId` to resume with.
 *
 * @example
 * ```ts
 * for await (const event of run({ segments: [{ type: 'text', text: 'Say hi' }] }, ports)) {
 *   console.log(event.type);
 * }
 * ```
 */
export function run(request: StartRequest, ports: AgentPorts, options: RunOptions = {}): AsyncGenerator<AgentEvent> {
  return drive(options, async (environment) => {
    const flags: Record<string, unknown> = { ...(request.flags ?? {}) };
    const fs = new AgentFileSystem();
    const taskTree = new TaskTreeManager(fs);
    let pidgin: ReturnType<typeof toPidgin>;
    try {
      pidgin = toPidgin(request.segments, fs, { useNotebookLM: flags.useNotebookLM === true });
    } catch (error) {
      environment.emit({ type: 'error', message: messageOf(error) });
      return;
    }
    if (pidgin.useMemory) flags.useMemory = true;
    const now = options.now?.() ?? new Date();
    const objective: LLMContent = {
      parts: [
        {
          text: `<metadata>\n<current_date>${formatObjectiveDate(now)}</current_date>\n</metadata>\n<objective>${pidgin.text}</objective>`,
        },
      ],
      role: 'user',
    };
    environment.emit({ type: 'start', objective });
    const session: LoopSession = {
      mode: options.mode ?? 'objective',
      model: options.model ?? DEFAULT_MODEL,
      contents: [objective],
      fs,
      taskTree,
      flags,
      consentsGranted: new Set(),
      turnCount: 0,
      maxTurns: options.maxTurns ?? DEFAULT_MAX_TURNS,
    };
    if (request.graph) session.graph = request.graph;
    await continueRun(session, ports, options, environment);
  });
}

/**
 * Resumes the suspended run saved under `interactionId` with the client's `response` (reference
 * §2.4.3) and yields the rest of its events. An interaction can be resumed once: an unknown or
 * already-used id yields a single `error` event naming it.
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
  response: Record<string, unknown>,
  ports: AgentPorts,
  options: RunOptions = {},
): AsyncGenerator<AgentEvent> {
  return drive(options, async (environment) => {
    const { emit } = environment;
    const stored = await ports.store.take(interactionId);
    if (stored === undefined || stored === null) {
      emit({ type: 'error', message: `Unknown interaction ID: ${interactionId}` });
      return;
    }
    const parsed = InteractionEnvelopeSchema.safeParse(stored);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue ? `${issue.path.map(String).join('.') || '(root)'}: ${issue.message}` : 'invalid';
      emit({ type: 'error', message: `Interaction ${interactionId} has a saved state this runtime cannot read (${where})` });
      return;
    }
    const envelope = parsed.data;
    if (envelope.owner !== undefined && envelope.owner !== options.owner) {
      // Put it back untouched: the rightful owner can still resume it.
      await ports.store.save(interactionId, stored);
      emit({ type: 'error', message: `Interaction ${interactionId} belongs to another user` });
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
    let earlyResult: AgentResult | undefined;
    if (state.kind === 'suspend') {
      const toolbox = createToolbox(buildFunctionGroups(options));
      const pending = await answerPendingCall(state, response, session, toolbox, ports, environment, (result) => {
        earlyResult ??= result;
      });
      const parts: Part[] = state.calls.map((call) =>
        toFunctionResponsePart(call, call.callId === state.pendingCallId ? pending : (call.response ?? {})),
      );
      session.contents.push({ role: 'user', parts });
    }
    if (earlyResult) {
      await finishRun({ kind: 'done', result: earlyResult }, session, ports, options, environment);
      return;
    }
    await continueRun(session, ports, options, environment);
  });
}

/** Turns the client's answer into the suspended call's function response (reference §8.5). */
async function answerPendingCall(
  state: InteractionState,
  response: JsonObject,
  session: LoopSession,
  toolbox: Toolbox,
  ports: AgentPorts,
  environment: Environment,
  terminate: (result: AgentResult) => void,
): Promise<JsonObject> {
  const call = state.calls.find((candidate) => candidate.callId === state.pendingCallId);
  if (!call) return response;
  const definition = toolbox.definitions.get(call.name);
  const context = createFunctionContext(session, { ports, signal: environment.signal, emit: environment.emit }, call.callId, terminate, {
    silent: true,
  });
  if (state.precondition) {
    if (response.consent !== true) return { error: 'User declined URL access consent' };
    session.consentsGranted.add(WEBPAGE_CONSENT);
    if (!definition) return { error: `Unknown function: ${call.name}` };
    try {
      const args = definition.parameters.parse(call.args);
      if (definition.precondition) await definition.precondition(args, context);
      return await definition.handler(args, context);
    } catch (error) {
      return { error: messageOf(error) };
    }
  }
  if (!definition?.resume) return response;
  try {
    return await definition.resume(response, context);
  } catch (error) {
    return { error: messageOf(error) };
  }
}

type Environment = { emit(event: AgentEvent): void; signal: AbortSignal };

/** Runs the loop for a prepared session and reports how it ended. */
async function continueRun(session: LoopSession, ports: AgentPorts, options: RunOptions, environment: Environment) {
  const toolbox = createToolbox(buildFunctionGroups(options));
  const outcome = await runAgentLoop(session, { ports, toolbox, signal: environment.signal, emit: environment.emit });
  await finishRun(outcome, session, ports, options, environment);
}

async function finishRun(
  outcome: LoopOutcome,
  session: LoopSession,
  ports: AgentPorts,
  options: RunOptions,
  { emit }: Environment,
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
      emit({ type: 'error', message: outcome.message });
      emit({ type: 'complete', result: { success: false } });
      return;
    case 'suspend': {
      const interactionId = crypto.randomUUID();
      const state = saveableState(session, 'suspend');
      state.calls = outcome.calls.map(({ call, outcome: callOutcome }) => {
        const saved: InteractionState['calls'][number] = { callId: call.callId, name: call.name, args: call.args };
        if (call.providerId !== undefined) saved.providerId = call.providerId;
        if (call !== outcome.pending && callOutcome.kind === 'response') saved.response = callOutcome.response;
        return saved;
      });
      state.pendingCallId = outcome.pending.callId;
      state.precondition = outcome.suspend.precondition;
      await ports.store.save(interactionId, envelope(state, options));
      emit({ ...outcome.suspend.event, interactionId } as AgentEvent);
      return;
    }
    case 'pause': {
      const interactionId = crypto.randomUUID();
      await ports.store.save(interactionId, envelope(saveableState(session, 'pause'), options));
      emit({
        type: 'error',
        message: `${outcome.error.message} (the run was saved; resume interaction ${interactionId} to retry)`,
        interactionId,
      });
      return;
    }
  }
}

function saveableState(session: LoopSession, kind: InteractionState['kind']): InteractionState {
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

function envelope(state: InteractionState, options: RunOptions): InteractionEnvelope {
  const value: InteractionEnvelope = {
    version: INTERACTION_STATE_VERSION,
    createdAt: (options.now?.() ?? new Date()).toISOString(),
    state,
  };
  if (options.owner !== undefined) value.owner = options.owner;
  return value;
}

/** The default groups (system, chat) with the caller's groups added or replacing same-named ones. */
let cachedDefaultGroups: readonly FunctionGroup[] | undefined;

/**
 * The default groups, built once per process: their definitions are stateless, and reusing them
 * keeps each function's JSON Schema declaration cached across runs.
 */
function defaultGroups(): readonly FunctionGroup[] {
  cachedDefaultGroups ??= [createSystemGroup(), createGenerateGroup(), createImageGroup(), createVideoGroup(), createAudioGroup(), createChatGroup()];
  return cachedDefaultGroups;
}

function buildFunctionGroups(options: RunOptions): FunctionGroup[] {
  const groups: FunctionGroup[] = options.defaultFunctionGroups === false ? [] : [...defaultGroups()];
  for (const extra of options.functionGroups ?? []) {
    const index = groups.findIndex((group) => group.name === extra.name);
    if (index >= 0) groups[index] = extra;
    else groups.push(extra);
  }
  return groups;
}

/**
 * Runs `body` as a background task that emits into a channel, and yields the channel. Leaving the
 * generator early (`return()`, a client gone) aborts the run's signal.
 */
async function* drive(
  options: RunOptions,
  body: (environment: Environment) => Promise<void>,
): AsyncGenerator<AgentEvent> {
  const channel = new EventChannel<AgentEvent>();
  const controller = new AbortController();
  const forwardAbort = (): void => controller.abort(options.signal?.reason);
  if (options.signal?.aborted) forwardAbort();
  else options.signal?.addEventListener('abort', forwardAbort, { once: true });
  const environment: Environment = { emit: (event) => channel.push(event), signal: controller.signal };
  void body(environment)
    .catch((error: unknown) => {
      const agentError = toAgentError(error);
      if (agentError.code !== 'ABORTED') channel.push({ type: 'error', message: agentError.message });
    })
    .finally(() => channel.close());
  try {
    yield* channel;
  } finally {
    options.signal?.removeEventListener('abort', forwardAbort);
    if (!channel.closed) controller.abort(new AgentError('ABORTED', 'Run was stopped'));
    channel.close();
  }
}

const MONTHS = [
  'January', 'February', 'March', 'April', 'May', 'June',
  'July', 'August', 'September', 'October', 'November', 'December',
] as const;

/** `November 22, 2026 9:41 AM`, the objective's date line (reference §4.1). */
export function formatObjectiveDate(date: Date): string {
  const hours = date.getHours();
  const hour12 = hours % 12 === 0 ? 12 : hours % 12;
  const minutes = String(date.getMinutes()).padStart(2, '0');
  return `${MONTHS[date.getMonth()]} ${date.getDate()}, ${date.getFullYear()} ${hour12}:${minutes} ${hours < 12 ? 'AM' : 'PM'}`;
}
