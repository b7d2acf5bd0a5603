import { AgentError } from '../errors/index.js';
import type { LLMContent, Part } from '../protocol/content.js';

/**
 * Checks a history before it is sent, so a bug of ours surfaces as a clear error rather than a
 * 400 from the model: a model turn whose signed batch lost the signature of its first call, a
 * function response without a matching call, a call id used twice in one turn, and a user turn whose number
 * of responses differs from the calls of the model turn before it.
 */
export function validateHistory(contents: readonly LLMContent[]): void {
  new HistoryValidator().check(contents);
}

/**
 * {@link validateHistory} for a history that grows by appending: each `check` looks only at the
 * contents appended since the last one, so a run of `n` turns costs `O(n)` in all instead of
 * `O(n²)`. The history of a run only ever grows at its end (corrections and function responses
 * are contents of their own; no content is edited once it is in). A history that is not the last
 * one checked plus new contents at its end (shorter, or another array) is checked whole again.
 */
export class HistoryValidator {
  #checked = 0;
  #last: LLMContent | undefined;

  /** Throws `INVALID_HISTORY`, naming the content, for the first problem among the new contents. */
  check(contents: readonly LLMContent[]): void {
    if (contents.length < this.#checked || (this.#checked > 0 && contents[this.#checked - 1] !== this.#last)) this.#reset();
    try {
      for (let index = this.#checked; index < contents.length; index += 1) checkContent(contents, index);
    } catch (error) {
      this.#reset();
      throw error;
    }
    this.#checked = contents.length;
    this.#last = contents[contents.length - 1];
  }

  #reset(): void {
    this.#checked = 0;
    this.#last = undefined;
  }
}

function callsOf(content: LLMContent | undefined): Part[] {
  const calls: Part[] = [];
  if (content?.role !== 'model') return calls;
  for (const part of content.parts) if (part.functionCall) calls.push(part);
  return calls;
}

function checkContent(contents: readonly LLMContent[], index: number): void {
  const content = contents[index] as LLMContent;
  const calls = callsOf(content);
  if (calls.length > 0) {
    const signed = calls.some((part) => typeof part.thoughtSignature === 'string');
    if (signed && typeof calls[0]?.thoughtSignature !== 'string') {
      throw invalid(index, `the first function call (${calls[0]?.functionCall?.name}) lost its thoughtSignature`);
    }
    // An id pairs a call with its response in the next content: it must be unique in its turn. A
    // later turn may use it again (mock models count from `call_0` each turn).
    let ids: Set<string> | undefined;
    for (const part of calls) {
      const id = part.functionCall?.id;
      if (id === undefined) continue;
      ids ??= new Set();
      if (ids.has(id)) throw invalid(index, `function call id "${id}" is used twice in one turn`);
      ids.add(id);
    }
  }
  const responses = content.parts.filter((part) => part.functionResponse);
  if (responses.length === 0) return;
  const previousCalls = callsOf(contents[index - 1]);
  if (previousCalls.length === 0) {
    throw invalid(index, `function response "${responses[0]?.functionResponse?.name}" has no function call before it`);
  }
  if (previousCalls.length !== responses.length) {
    throw invalid(index, `${responses.length} function responses answer ${previousCalls.length} function calls`);
  }
  responses.forEach((part, position) => {
    const response = part.functionResponse;
    const call = previousCalls[position]?.functionCall;
    if (!response || !call) return;
    if (response.id !== undefined ? response.id !== call.id : response.name !== call.name) {
      throw invalid(index, `function response ${position} (${response.name}) does not match call ${position} (${call.name})`);
    }
  });
}

function invalid(index: number, problem: string): AgentError {
  return new AgentError('INVALID_HISTORY', `contents[${index}]: ${problem}`, { details: { index } });
}
