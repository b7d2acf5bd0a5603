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

/**
 * Folds the streamed chunks of one `streamGenerateContent` call into one model content.
 *
 * Merging rule: a text part is appended to the previous part only when both are plain text
 * (`text` and optionally `thought`, nothing else) with the same `thought` flag. A part that carries
 * a `thoughtSignature` or any other field is never merged in either direction, so a signature
 * stays on the exact part, and the exact text, it arrived with.
 */
export class ModelTurnAccumulator {
  readonly #parts: Part[] = [];
  readonly #calls: ParsedFunctionCall[] = [];
  readonly #callsByProviderId = new Map<string, ParsedFunctionCall>();
  #lastMergeable = false;
  #sawCandidate = false;
  #usageMetadata: UsageMetadata | undefined;
  #finishReason: string | undefined;
  #candidateMetadata: JsonObject = {};
  #promptFeedback: JsonObject | undefined;
  #modelVersion: string | undefined;
  #responseId: string | undefined;

  /** Adds one chunk; returns what is new in it. Throws when the prompt was blocked. */
  push(chunk: GenerateContentResponse): ModelTurnDelta {
    const delta: ModelTurnDelta = { thoughts: [], functionCalls: [] };
    const record = chunk as GenerateContentResponse & Record<string, unknown>;
    if (chunk.usageMetadata) this.#usageMetadata = chunk.usageMetadata;
    if (typeof record.modelVersion === 'string') this.#modelVersion = record.modelVersion;
    if (typeof record.responseId === 'string') this.#responseId = record.responseId;
    const feedback = record.promptFeedback as JsonObject | undefined;
    if (feedback) this.#promptFeedback = feedback;
    const candidate = chunk.candidates?.[0] as (Record<string, unknown> & { content?: LLMContent }) | undefined;
    if (!candidate) {
      if (feedback && typeof feedback.blockReason === 'string') {
        throw new AgentError('MODEL_ERROR', `The model refused the prompt (blockReason ${feedback.blockReason})`, {
          details: { promptFeedback: feedback },
        });
      }
      return delta;
    }
    this.#sawCandidate = true;
    for (const key in candidate) {
      if (key === 'content' || key === 'index') continue;
      if (key === 'finishReason') this.#finishReason = candidate.finishReason as string;
      else this.#candidateMetadata[key] = candidate[key];
    }
    const parts = candidate.content?.parts;
    if (!parts) return delta;
    for (const part of parts) this.#add(part, delta);
    return delta;
  }

  /** The whole turn. Throws when the stream carried no candidate at all. */
  finish(): ModelTurn {
    if (!this.#sawCandidate) {
      throw new AgentError('MODEL_ERROR', 'Agent unable to proceed: no candidates in Gemini response');
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

  #add(part: Part, delta: ModelTurnDelta): void {
    const call = part.functionCall;
    if (call) {
      this.#lastMergeable = false;
      const providerId = typeof call.id === 'string' && call.id.length > 0 ? call.id : undefined;
      const earlier = providerId === undefined ? undefined : this.#callsByProviderId.get(providerId);
      if (earlier) {
        // A later fragment of the same call: merge its arguments into the part we already hold.
        Object.assign(earlier.args, call.args ?? {});
        return;
      }
      const args: JsonObject = { ...(call.args ?? {}) };
      const own: Part = { ...part, functionCall: { ...call, args } };
      // Our id is always fresh: a provider's id may come again in a later turn (mock models count
      // from `call_0` each turn), and events must never name two calls alike. The provider's own
      // id goes back with the call's response.
      const parsed: ParsedFunctionCall =
        providerId === undefined
          ? { callId: crypto.randomUUID(), name: call.name, args, part: own }
          : { callId: crypto.randomUUID(), providerId, name: call.name, args, part: own };
      this.#parts.push(own);
      this.#calls.push(parsed);
      if (providerId !== undefined) this.#callsByProviderId.set(providerId, parsed);
      delta.functionCalls.push(parsed);
      return;
    }
    const plain = typeof part.text === 'string' && isPlainText(part);
    if (part.thought === true && typeof part.text === 'string' && part.text.length > 0) delta.thoughts.push(part.text);
    const last = this.#parts[this.#parts.length - 1];
    if (plain && this.#lastMergeable && last && (last.thought === true) === (part.thought === true)) {
      last.text = (last.text ?? '') + part.text;
      return;
    }
    this.#parts.push({ ...part });
    this.#lastMergeable = plain;
  }
}

function isPlainText(part: Part): boolean {
  for (const key in part) if (!PLAIN_TEXT_KEYS.has(key)) return false;
  return true;
}
