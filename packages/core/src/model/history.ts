import { AgentError } from '../errors/index.js';
import type { LLMContent } from '../protocol/content.js';

/**
 * Checks a history before it is sent, so a bug of ours surfaces as a clear error rather than a
 * 400 from the model: a model turn whose signed batch lost the signature of its first call, a
 * function response without a matching call, a call id used twice, and a user turn whose number
 * of responses differs from the calls of the model turn before it.
 */
export function validateHistory(contents: readonly LLMContent[]): void {
  const seenIds = new Set<string>();
  for (let index = 0; index < contents.length; index += 1) {
    const content = contents[index] as LLMContent;
    const calls = content.parts.filter((part) => part.functionCall);
    if (content.role === 'model' && calls.length > 0) {
      const signed = calls.some((part) => typeof part.thoughtSignature === 'string');
      if (signed && typeof calls[0]?.thoughtSignature !== 'string') {
        throw invalid(index, `the first function call (${calls[0]?.functionCall?.name}) lost its thoughtSignature`);
      }
      for (const part of calls) {
        const id = part.functionCall?.id;
        if (id === undefined) continue;
        if (seenIds.has(id)) throw invalid(index, `function call id "${id}" is used twice`);
        seenIds.add(id);
      }
    }
    const responses = content.parts.filter((part) => part.functionResponse);
    if (responses.length === 0) continue;
    const previous = contents[index - 1];
    const previousCalls = previous?.role === 'model' ? previous.parts.filter((part) => part.functionCall) : [];
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
}

function invalid(index: number, problem: string): AgentError {
  return new AgentError('INVALID_HISTORY', `contents[${index}]: ${problem}`, { details: { index } });
}
