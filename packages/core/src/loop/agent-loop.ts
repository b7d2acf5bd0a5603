import type { AgentFileSystem, TaskTreeManager } from '../agent-fs/index.js';
import { AgentError, ERROR_CODES, toAgentError, type ErrorCode } from '../errors/index.js';
import {
  toFunctionDeclaration,
  type FunctionContext,
  type FunctionDefinition,
  type FunctionGroup,
  type Suspend,
} from '../functions/index.js';
import { conformBody, ModelTurnAccumulator, validateHistory } from '../model/index.js';
import type { AgentPorts } from '../ports/index.js';
import type { JsonObject, LLMContent, Part } from '../protocol/content.js';
import type { AgentEvent, AgentResult } from '../protocol/events.js';
import type { GenerateContentRequest, Tool } from '../protocol/gemini.js';
import { FunctionCaller, toFunctionResponsePart, type CallRecord, type SettledCall } from './function-caller.js';

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
}

/** How a loop ended. */
export type LoopOutcome =
  | { kind: 'done'; result: AgentResult }
  | { kind: 'fatal'; message: string; code: ErrorCode }
  | { kind: 'suspend'; suspend: Suspend; pending: CallRecord; calls: SettledCall[] }
  | { kind: 'pause'; error: AgentError };

/** The tools, declarations and instruction assembled once from the function groups of a run. */
export interface Toolbox {
  definitions: ReadonlyMap<string, FunctionDefinition>;
  tools: Tool[];
  systemInstruction: string;
}

/** Assembles groups into a toolbox; a later group's function replaces an earlier one of the same name. */
export function createToolbox(groups: readonly FunctionGroup[], builtinTools: readonly Tool[] = []): Toolbox {
  const definitions = new Map<string, FunctionDefinition>();
  for (const group of groups) for (const definition of group.functions) definitions.set(definition.name, definition);
  const functionDeclarations = [...definitions.values()].map((definition) => toFunctionDeclaration(definition));
  const tools: Tool[] = functionDeclarations.length > 0 ? [{ functionDeclarations }, ...builtinTools] : [...builtinTools];
  const systemInstruction = groups
    .map((group) => group.instruction ?? '')
    .filter((text) => text.length > 0)
    .join('\n\n');
  return { definitions, tools, systemInstruction };
}

const GENERATION_CONFIG = {
  temperature: 1,
  topP: 1,
  thinkingConfig: { includeThoughts: true, thinkingBudget: -1 },
} as const;

/** What the loop needs from its surroundings. */
export interface LoopEnvironment {
  ports: AgentPorts;
  toolbox: Toolbox;
  signal: AbortSignal;
  emit(event: AgentEvent): void;
  /** Metadata handlers reported for their calls, emitted with each `functionResult`. */
  resultMetadata?: Map<string, JsonObject>;
}

/**
 * Runs model turns until the session ends, suspends, or fails. Events go out through `emit` as
 * they happen; the outcome says how it ended. Cancellation (the signal) rejects with an
 * `ABORTED` error.
 */
export async function runAgentLoop(session: LoopSession, environment: LoopEnvironment): Promise<LoopOutcome> {
  const { ports, toolbox, signal, emit } = environment;
  let result: AgentResult | undefined;
  const terminate = (value: AgentResult): void => {
    result ??= value;
  };
  const resultMetadata = new Map<string, JsonObject>();
  const withMetadata = { ...environment, resultMetadata };
  const createContext = (call: CallRecord): FunctionContext =>
    createFunctionContext(session, withMetadata, call.callId, terminate);
  const emitResult = (call: CallRecord, response: JsonObject): void => {
    const metadata = resultMetadata.get(call.callId);
    resultMetadata.delete(call.callId);
    const content = { parts: [{ functionResponse: { name: call.name, response } }] };
    emit(metadata ? { type: 'functionResult', callId: call.callId, content, metadata } : { type: 'functionResult', callId: call.callId, content });
  };

  try {
    for (;;) {
      throwIfAborted(signal);
      const capped = session.turnCount >= session.maxTurns;
      if (capped) {
        emit({
          type: 'thought',
          text: `Turn limit reached (${session.maxTurns} turns): asking the model for a final answer without tools.`,
        });
      }
      const body = buildRequestBody(session, toolbox, capped);
      emit({ type: 'sendRequest', model: session.model, body });
      validateHistory(session.contents);
      session.turnCount += 1;
      const sendable = await conformBody(body, ports.backend, signal);

      const accumulator = new ModelTurnAccumulator();
      const caller = new FunctionCaller(toolbox.definitions, createContext);
      for await (const chunk of ports.backend.streamGenerateContent(session.model, sendable, signal)) {
        const delta = accumulator.push(chunk);
        for (const text of delta.thoughts) emit({ type: 'thought', text });
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
      }
      const turn = accumulator.finish();
      if (turn.usageMetadata) emit({ type: 'usageMetadata', metadata: turn.usageMetadata });
      if (turn.content.parts.length > 0) session.contents.push(turn.content);
      saveDeliverables(session, turn.content);

      if (capped) {
        return { kind: 'done', result: { success: false, outcomes: answerOf(turn.content) } };
      }
      if (caller.size === 0) {
        const refusal = refusalOf(turn.finishReason);
        if (refusal) return { kind: 'fatal', message: refusal, code: 'MODEL_ERROR' };
        const finishMessage = turn.candidateMetadata.finishMessage;
        const correction = correctionFor(turn.finishReason, typeof finishMessage === 'string' ? finishMessage : undefined);
        if (correction) {
          // Tell the model what went wrong instead of sending the same request again.
          addUserText(session, correction);
          continue;
        }
        if (session.mode === 'chat') return { kind: 'done', result: { success: true, outcomes: answerOf(turn.content) } };
        continue;
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
    }
  } catch (error) {
    if (signal.aborted) throw new AgentError('ABORTED', 'Run was stopped', { cause: error });
    const agentError = toAgentError(error);
    if (agentError.code === 'RATE_LIMITED' || agentError.code === 'MODEL_UNAVAILABLE') {
      return { kind: 'pause', error: agentError };
    }
    return { kind: 'fatal', message: `Agent error: ${agentError.message}`, code: agentError.code };
  }
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
  if (toolbox.systemInstruction.length > 0) {
    body.systemInstruction = { parts: [{ text: toolbox.systemInstruction }], role: 'user' };
  }
  if (!capped && toolbox.tools.length > 0) {
    body.tools = toolbox.tools;
    if (session.mode === 'objective') body.toolConfig = { functionCallingConfig: { mode: 'ANY' } };
  }
  return body;
}

/** Finish reasons that mean the model will not answer this conversation: the run ends. */
const REFUSALS: Record<string, string> = {
  SAFETY: 'the response was blocked by safety filters',
  PROHIBITED_CONTENT: 'the response was blocked for prohibited content',
  BLOCKLIST: 'the response was blocked by a blocklist',
  SPII: 'the response was blocked for sensitive personal information',
  RECITATION: 'the response was blocked for reciting protected material',
};

function refusalOf(finishReason: string | undefined): string | undefined {
  const reason = finishReason === undefined ? undefined : REFUSALS[finishReason];
  return reason === undefined ? undefined : `Agent error: ${reason} (finishReason ${finishReason})`;
}

/** What to tell the model after a turn that produced no usable call. */
function correctionFor(finishReason: string | undefined, finishMessage: string | undefined): string | undefined {
  const detail = finishMessage ? ` (${finishMessage})` : '';
  if (finishReason === 'MALFORMED_FUNCTION_CALL') {
    return `Your last function call was malformed and was not run${detail}. Call the function again with valid JSON arguments that match its declaration.`;
  }
  if (finishReason === 'UNEXPECTED_TOOL_CALL') {
    return `Your last turn called a tool that is not available${detail}. Use only the declared functions.`;
  }
  return undefined;
}

/** Adds a text part to the last user content, or a new user content after a model turn. */
function addUserText(session: LoopSession, text: string): void {
  const last = session.contents.at(-1);
  if (last?.role === 'user') last.parts.push({ text });
  else session.contents.push({ role: 'user', parts: [{ text }] });
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
  if (signal.aborted) throw new AgentError('ABORTED', 'Run was stopped', { cause: signal.reason });
}

function withOptional<T extends object, O extends Record<string, unknown>>(base: T, optional: O): T & Partial<O> {
  const target = base as Record<string, unknown>;
  for (const key of Object.keys(optional)) if (optional[key] !== undefined) target[key] = optional[key];
  return target as T & Partial<O>;
}
