import { AgentError } from '../errors/index.js';
import type { JsonObject, LLMContent, Part } from '../protocol/content.js';
import type { GenerateContentResponse, UsageMetadata } from '../protocol/gemini.js';

/** A function call of a model turn, with the id the runtime tracks it by. */
export interface ParsedFunctionCall {
  /** A fresh UUID, unique in the run: the id of the call's events. It is never sent to the provider. */
  callId: string;
  /** The provider's own id, when it sent one: the call's response carries it back. */
  providerId?: string;
  name: string;
  args: JsonObject;
  /** The part as it sits in the turn's content (signature and unknown fields included). */
  part: Part;
}

/** What one chunk added, so the loop can emit events at once. */
export interface ModelTurnDelta {
  /** Non-empty thought texts, in order. */
  thoughts: string[];
  /** Calls first seen in this chunk, in order. */
  functionCalls: ParsedFunctionCall[];
}

/** One whole model turn. */
export interface ModelTurn {
  /** The merged content, role `model`, ready to go back into the history. */
  content: LLMContent;
  functionCalls: ParsedFunctionCall[];
  usageMetadata?: UsageMetadata;
  finishReason?: string;
  /** Candidate-level metadata (grounding, URL context, citations, safety ratings), last value seen. */
  candidateMetadata: JsonObject;
  promptFeedback?: JsonObject;
  modelVersion?: string;
  responseId?: string;
}

const PLAIN_TEXT_KEYS = new Set(['text', 'thought']);

/** A call whose arguments are still streaming (`functionCall.willContinue`), joined as its fragments arrive. */
interface OpenCall {
  call: ParsedFunctionCall;
  /** The `jsonPath` of a string argument whose last fragment said more of it follows. */
  growing: string | undefined;
}

/**
 * Folds the streamed chunks of one `streamGenerateContent` call into one model content.
 *
 * Merging rule: a text part is appended to the previous part only when both are plain text
 * (`text` and optionally `thought`, nothing else) with the same `thought` flag. A part that carries
 * a `thoughtSignature` or any other field is never merged in either direction, so a signature
 * stays on the exact part, and the exact text, it arrived with.
 *
 * Only the first candidate (`index` 0, or none) is read. A function call comes whole in one part,
 * or, on Vertex AI with streamed arguments, as a part with its name and `willContinue: true`
 * followed by nameless fragments (`partialArgs`) up to one without `willContinue`: such a call is
 * joined into one part and announced once it is complete. Two calls with one id are two calls. A
 * part the turn cannot use as it is (a call without a name, arguments that are not an object, a
 * part that is not an object) is a `MODEL_ERROR` naming the field, never a call run with made-up
 * arguments.
 */
export class ModelTurnAccumulator {
  readonly #parts: Part[] = [];
  readonly #calls: ParsedFunctionCall[] = [];
  #open: OpenCall | undefined;
  #lastMergeable = false;
  #sawCandidate = false;
  #usageMetadata: UsageMetadata | undefined;
  #finishReason: string | undefined;
  #candidateMetadata: JsonObject = {};
  #promptFeedback: JsonObject | undefined;
  #modelVersion: string | undefined;
  #responseId: string | undefined;

  /** Whether a chunk so far carried a candidate (a stream without one has no turn to finish). */
  get sawCandidate(): boolean {
    return this.#sawCandidate;
  }

  /** Adds one chunk; returns what is new in it. Throws when the prompt was blocked or the chunk is malformed. */
  push(chunk: GenerateContentResponse): ModelTurnDelta {
    if (typeof chunk !== 'object' || chunk === null || Array.isArray(chunk)) {
      throw malformed('response chunk', `expected a JSON object, got ${kindOf(chunk)}`);
    }
    const delta: ModelTurnDelta = { thoughts: [], functionCalls: [] };
    const record = chunk as GenerateContentResponse & Record<string, unknown>;
    if (chunk.usageMetadata) this.#usageMetadata = chunk.usageMetadata;
    if (typeof record.modelVersion === 'string') this.#modelVersion = record.modelVersion;
    if (typeof record.responseId === 'string') this.#responseId = record.responseId;
    const feedback = record.promptFeedback as JsonObject | undefined;
    if (feedback) this.#promptFeedback = feedback;
    const candidates: unknown = chunk.candidates;
    let position = -1;
    if (candidates !== undefined && candidates !== null) {
      if (!Array.isArray(candidates)) throw malformed('candidates', `expected an array, got ${kindOf(candidates)}`);
      position = firstCandidate(candidates);
    }
    if (position === -1) {
      if (feedback && typeof feedback.blockReason === 'string') {
        throw new AgentError('MODEL_ERROR', `The model refused the prompt (blockReason ${feedback.blockReason})`, {
          details: { promptFeedback: feedback },
        });
      }
      return delta;
    }
    const candidate = (candidates as Array<Record<string, unknown>>)[position] as Record<string, unknown>;
    this.#sawCandidate = true;
    for (const key in candidate) {
      if (key === 'content' || key === 'index') continue;
      if (key === 'finishReason') this.#finishReason = candidate.finishReason as string;
      else this.#candidateMetadata[key] = candidate[key];
    }
    const content = candidate.content as { parts?: unknown } | null | undefined;
    if (content !== undefined && content !== null) {
      if (typeof content !== 'object' || Array.isArray(content)) {
        throw malformed(`candidates[${position}].content`, `expected an object, got ${kindOf(content)}`);
      }
      const parts = content.parts;
      if (parts !== undefined && parts !== null) {
        if (!Array.isArray(parts)) throw malformed(`candidates[${position}].content.parts`, `expected an array, got ${kindOf(parts)}`);
        for (let index = 0; index < parts.length; index += 1) this.#add(parts[index], delta, position, index);
      }
    }
    // The model finished: a call still streaming has all the arguments it will get.
    if (this.#open !== undefined && candidate.finishReason !== undefined) this.#close(delta);
    return delta;
  }

  /** The whole turn. Throws when the stream carried no candidate at all, or ended inside a streamed call. */
  finish(): ModelTurn {
    if (!this.#sawCandidate) {
      throw new AgentError('MODEL_ERROR', 'Agent unable to proceed: no candidates in Gemini response');
    }
    if (this.#open !== undefined) {
      throw malformed(
        'functionCall.willContinue',
        `the answer ended while function call ${this.#open.call.name} was still streaming its arguments`,
      );
    }
    const turn: ModelTurn = {
      content: { role: 'model', parts: this.#parts },
      functionCalls: this.#calls,
      candidateMetadata: this.#candidateMetadata,
    };
    if (this.#usageMetadata) turn.usageMetadata = this.#usageMetadata;
    if (this.#finishReason !== undefined) turn.finishReason = this.#finishReason;
    if (this.#promptFeedback) turn.promptFeedback = this.#promptFeedback;
    if (this.#modelVersion !== undefined) turn.modelVersion = this.#modelVersion;
    if (this.#responseId !== undefined) turn.responseId = this.#responseId;
    return turn;
  }

  #add(value: unknown, delta: ModelTurnDelta, position: number, index: number): void {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw malformed(partPath(position, index), `expected an object, got ${kindOf(value)}`);
    }
    const part = value as Part;
    // A field sent as null (a mock that writes every field) is a field not sent.
    if (part.functionCall !== undefined && part.functionCall !== null) {
      this.#addCall(part, delta, position, index);
      return;
    }
    if (this.#open !== undefined) this.#close(delta);
    const text: unknown = part.text;
    if (text !== undefined && text !== null && typeof text !== 'string') {
      throw malformed(`${partPath(position, index)}.text`, `expected a string, got ${kindOf(text)}`);
    }
    const plain = typeof text === 'string' && isPlainText(part);
    if (part.thought === true && typeof text === 'string' && text.length > 0) delta.thoughts.push(text);
    const last = this.#parts[this.#parts.length - 1];
    if (plain && this.#lastMergeable && last && (last.thought === true) === (part.thought === true)) {
      last.text = (last.text ?? '') + text;
      return;
    }
    this.#parts.push({ ...part });
    this.#lastMergeable = plain;
  }

  #addCall(part: Part, delta: ModelTurnDelta, position: number, index: number): void {
    const call = part.functionCall as unknown as Record<string, unknown>;
    if (typeof call !== 'object' || call === null || Array.isArray(call)) {
      throw malformed(`${partPath(position, index)}.functionCall`, `expected an object, got ${kindOf(call)}`);
    }
    this.#lastMergeable = false;
    const name = call.name;
    const open = this.#open;
    if (open !== undefined) {
      // A nameless fragment continues the call being streamed; a named one starts the next call.
      if (name === undefined) {
        this.#continue(open, part, call, delta, position, index);
        return;
      }
      this.#close(delta);
    }
    if (typeof name !== 'string' || name.length === 0) {
      const problem = name === undefined ? 'missing (a function call needs the name of the function)' : `expected a non-empty string, got ${kindOf(name)}`;
      throw malformed(`${partPath(position, index)}.functionCall.name`, problem);
    }
    // A call comes whole in one part: a second part with the id of an earlier one is a call of its
    // own (a mock model that numbers every call `call_0`), never more arguments for the first.
    const providerId = typeof call.id === 'string' && call.id.length > 0 ? call.id : undefined;
    const args = argsOf(call.args, position, index);
    const streamed = call.willContinue === true || (call.partialArgs !== undefined && call.partialArgs !== null);
    let functionCall: Record<string, unknown>;
    if (streamed) {
      // Streaming fields describe the wire, not the call: the history gets the joined call.
      const { willContinue: _willContinue, partialArgs: _partialArgs, ...rest } = call;
      functionCall = { ...rest, args };
    } else {
      functionCall = { ...call, args };
    }
    const own = { ...part, functionCall } as Part;
    // Our id is always fresh: a provider's id may come again in a later turn (mock models count
    // from `call_0` each turn), and events must never name two calls alike. The provider's own
    // id goes back with the call's response.
    const parsed: ParsedFunctionCall =
      providerId === undefined
        ? { callId: crypto.randomUUID(), name, args, part: own }
        : { callId: crypto.randomUUID(), providerId, name, args, part: own };
    this.#parts.push(own);
    if (!streamed) {
      this.#calls.push(parsed);
      delta.functionCalls.push(parsed);
      return;
    }
    const opened: OpenCall = { call: parsed, growing: undefined };
    this.#open = opened;
    if (call.partialArgs !== undefined && call.partialArgs !== null) {
      applyPartialArgs(opened, call.partialArgs, `${partPath(position, index)}.functionCall.partialArgs`);
    }
    if (call.willContinue !== true) this.#close(delta);
  }

  /** Adds a nameless fragment to the call being streamed; one without `willContinue` completes it. */
  #continue(open: OpenCall, part: Part, call: Record<string, unknown>, delta: ModelTurnDelta, position: number, index: number): void {
    if (call.partialArgs !== undefined && call.partialArgs !== null) {
      applyPartialArgs(open, call.partialArgs, `${partPath(position, index)}.functionCall.partialArgs`);
    }
    if (call.args !== undefined && call.args !== null) Object.assign(open.call.args, argsOf(call.args, position, index));
    if (typeof part.thoughtSignature === 'string' && open.call.part.thoughtSignature === undefined) {
      open.call.part.thoughtSignature = part.thoughtSignature;
    }
    if (call.willContinue !== true) this.#close(delta);
  }

  #close(delta: ModelTurnDelta): void {
    const open = this.#open;
    if (open === undefined) return;
    this.#open = undefined;
    this.#calls.push(open.call);
    delta.functionCalls.push(open.call);
  }
}

function isPlainText(part: Part): boolean {
  for (const key in part) if (!PLAIN_TEXT_KEYS.has(key)) return false;
  return true;
}

/**
 * The position of the candidate a turn is made of: `index` 0, which proto3 JSON leaves out, so
 * the first candidate without an index; `-1` when the chunk carries only other candidates.
 */
function firstCandidate(candidates: unknown[]): number {
  for (let position = 0; position < candidates.length; position += 1) {
    const candidate = candidates[position];
    if (typeof candidate !== 'object' || candidate === null || Array.isArray(candidate)) {
      throw malformed(`candidates[${position}]`, `expected an object, got ${kindOf(candidate)}`);
    }
    const index = (candidate as { index?: unknown }).index;
    if (index === undefined || index === 0) return position;
  }
  return -1;
}

/** A call's own arguments: a copy of its `args` object, `{}` when it has none. */
function argsOf(args: unknown, position: number, index: number): JsonObject {
  if (args === undefined || args === null) return {};
  if (typeof args !== 'object' || Array.isArray(args)) {
    throw malformed(`${partPath(position, index)}.functionCall.args`, `expected an object, got ${kindOf(args)}`);
  }
  return { ...(args as JsonObject) };
}

/**
 * Sets each streamed argument (`{jsonPath: "$.a[0].b", stringValue | numberValue | boolValue |
 * nullValue, willContinue?}`) in the call's arguments. A string whose fragment said
 * `willContinue` grows by the next fragment for the same path.
 */
function applyPartialArgs(open: OpenCall, list: unknown, where: string): void {
  if (!Array.isArray(list)) throw malformed(where, `expected an array, got ${kindOf(list)}`);
  for (let position = 0; position < list.length; position += 1) {
    const at = `${where}[${position}]`;
    const arg = list[position] as Record<string, unknown> | null;
    if (typeof arg !== 'object' || arg === null || Array.isArray(arg)) throw malformed(at, `expected an object, got ${kindOf(arg)}`);
    const jsonPath = arg.jsonPath;
    if (typeof jsonPath !== 'string') throw malformed(`${at}.jsonPath`, `expected a string, got ${kindOf(jsonPath)}`);
    let value: unknown;
    if (typeof arg.stringValue === 'string') value = arg.stringValue;
    else if (typeof arg.numberValue === 'number') value = arg.numberValue;
    else if (typeof arg.boolValue === 'boolean') value = arg.boolValue;
    else if ('nullValue' in arg) value = null;
    else throw malformed(at, 'expected a stringValue, numberValue, boolValue or nullValue');
    setAtPath(open.call.args, jsonPath, value, typeof value === 'string' && open.growing === jsonPath, `${at}.jsonPath`);
    open.growing = typeof value === 'string' && arg.willContinue === true ? jsonPath : undefined;
  }
}

/** Sets `value` at `jsonPath` under `root`, making the objects and arrays on the way; `append` adds to a string there. */
function setAtPath(root: JsonObject, jsonPath: string, value: unknown, append: boolean, where: string): void {
  const steps = stepsOf(jsonPath, where);
  let target: unknown = root;
  for (let position = 0; position < steps.length; position += 1) {
    const step = steps[position] as string | number;
    const container = target as Record<string | number, unknown>;
    if (typeof step === 'number') {
      if (!Array.isArray(target)) throw malformed(where, `${quote(jsonPath)} indexes a value that is not an array`);
      // No holes: an index past the end would leave `null`s the model never sent.
      if (step > target.length) throw malformed(where, `${quote(jsonPath)} skips elements of an array`);
    } else if (typeof target !== 'object' || target === null || Array.isArray(target)) {
      throw malformed(where, `${quote(jsonPath)} names a field of a value that is not an object`);
    }
    const present = typeof step === 'number' || Object.hasOwn(container, step) ? container[step] : undefined;
    if (position === steps.length - 1) {
      const next = append && typeof present === 'string' ? present + (value as string) : value;
      if (step === '__proto__') Object.defineProperty(container, step, { value: next, enumerable: true, writable: true, configurable: true });
      else container[step] = next;
      return;
    }
    if (present === undefined) {
      const created = typeof steps[position + 1] === 'number' ? [] : {};
      if (step === '__proto__') Object.defineProperty(container, step, { value: created, enumerable: true, writable: true, configurable: true });
      else container[step] = created;
      target = created;
    } else {
      target = present;
    }
  }
}

/** The steps of a JSON path as Vertex AI writes them: `$`, then `.name`, `['name']` or `[index]`. */
function stepsOf(jsonPath: string, where: string): Array<string | number> {
  const fail = (): never => {
    throw malformed(where, `cannot read ${quote(jsonPath)} (expected $ followed by .name, ['name'] or [index] steps)`);
  };
  if (jsonPath.charCodeAt(0) !== 36 /* $ */) fail();
  const steps: Array<string | number> = [];
  let index = 1;
  while (index < jsonPath.length) {
    const char = jsonPath[index];
    if (char === '.') {
      let end = index + 1;
      while (end < jsonPath.length && jsonPath[end] !== '.' && jsonPath[end] !== '[') end += 1;
      if (end === index + 1) fail();
      steps.push(jsonPath.slice(index + 1, end));
      index = end;
    } else if (char === '[') {
      const quoteChar = jsonPath[index + 1];
      if (quoteChar === "'" || quoteChar === '"') {
        const close = jsonPath.indexOf(`${quoteChar}]`, index + 2);
        if (close === -1) fail();
        steps.push(jsonPath.slice(index + 2, close));
        index = close + 2;
      } else {
        const close = jsonPath.indexOf(']', index + 1);
        const digits = close === -1 ? '' : jsonPath.slice(index + 1, close);
        if (!/^\d{1,9}$/.test(digits)) fail();
        steps.push(Number(digits));
        index = close + 1;
      }
    } else {
      fail();
    }
  }
  if (steps.length === 0) fail();
  return steps;
}

function partPath(position: number, index: number): string {
  return `candidates[${position}].content.parts[${index}]`;
}

/** A malformed answer: `where` names the field, as a path into the response chunk. */
function malformed(where: string, problem: string): AgentError {
  return new AgentError('MODEL_ERROR', `The model sent a malformed answer: ${where}: ${problem}`, { details: { field: where } });
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  const type = typeof value;
  return type === 'object' ? 'an object' : type === 'undefined' ? 'nothing' : `a ${type}`;
}

/** A value of the model's, quoted for a message and cut short. */
function quote(value: string): string {
  return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}...` : value);
}
