import { ModelTurnAccumulator, type ModelTurn, type ModelTurnDelta } from '../model/index.js';
import type { LLMContent } from '../protocol/content.js';
import type { GenerateContentResponse, UsageMetadata } from '../protocol/gemini.js';
import { stopError } from './model-stream.js';

/** How many times a turn with nothing usable is requested again, unchanged, before it counts. */
export const QUIET_RETRIES = 2;

/** How many corrections a run of malformed calls gets before the run fails. */
const MAX_CORRECTIONS = 1;

/** Upper bound of the first backoff; each later one doubles it. Full jitter: any delay below it. */
const BACKOFF_BASE_MS = 250;

/** Why a turn gave the loop nothing to act on. */
type Problem =
  | { kind: 'no-candidates' }
  | { kind: 'empty'; finishReason: string | undefined }
  | { kind: 'malformed-call'; detail: string }
  | { kind: 'unexpected-tool-call'; detail: string }
  | { kind: 'refused'; message: string };

/** Finish reasons that mean the model will not answer this conversation: asking again is pointless. */
const REFUSALS: Readonly<Record<string, string>> = {
  SAFETY: 'the response was blocked by safety filters',
  PROHIBITED_CONTENT: 'the response was blocked for prohibited content',
  BLOCKLIST: 'the response was blocked by a blocklist',
  SPII: 'the response was blocked for sensitive personal information',
  RECITATION: 'the response was blocked for reciting protected material',
  IMAGE_SAFETY: 'the image was blocked by safety filters',
  IMAGE_PROHIBITED_CONTENT: 'the image was blocked for prohibited content',
  IMAGE_RECITATION: 'the image was blocked for reciting protected material',
  MODEL_ARMOR: 'the response was blocked by Model Armor',
};

/** What {@link UnusableTurnGuard.streamTurn} made of a model turn. */
export type GuardedTurn =
  /** A turn with calls or an answer (or, for the final turn, whatever came). */
  | { kind: 'turn'; turn: ModelTurn }
  /** Retries ran out on malformed calls: append `content` (a user content of its own) and ask again. */
  | { kind: 'correction'; content: LLMContent }
  /** The run ends with this error. */
  | { kind: 'fatal'; message: string; code: 'MODEL_ERROR' };

/** One model turn as the loop asks for it. */
export interface GuardedTurnRequest {
  /** Starts the model request; each retry calls it again with the same body. */
  request(): AsyncIterable<GenerateContentResponse>;
  /** What each chunk added (thoughts, calls), as it streams. */
  onDelta(delta: ModelTurnDelta): void;
  /** The usage of the attempt the turn ends with; discarded attempts report none. */
  onUsage(usage: UsageMetadata): void;
  /** The tool-free turn at the turn cap: no retries, whatever comes is the answer. */
  final?: boolean;
}

/**
 * Handles model turns that give nothing to act on: no candidates, no content (or only thoughts),
 * a malformed call, or a call of an unknown tool. Such a turn is requested again quietly, at most
 * {@link QUIET_RETRIES} times with a short jittered backoff that the run's signal cuts short.
 * A quiet retry sends the very same body, so it emits no new `sendRequest`, and only the attempt
 * the turn ends with reports its usage: one `sendRequest` / `usageMetadata` pair per turn, in the
 * usual order. When the retries run out on malformed calls, the model gets one correction, as a
 * user content of its own (the objective and earlier contents are never edited), and a new turn;
 * after that, or at once for an empty turn, the run fails with `MODEL_ERROR` naming what the
 * model did. A refusal (safety, recitation, ...) fails at once. One guard serves one loop: it
 * counts consecutive unusable turns in chat and objective mode alike.
 */
export class UnusableTurnGuard {
  readonly #signal: AbortSignal;
  readonly #random: () => number;
  #corrections = 0;
  #unusableInARow = 0;

  constructor(signal: AbortSignal, random: () => number = Math.random) {
    this.#signal = signal;
    this.#random = random;
  }

  /** Streams one turn, retrying it while it is unusable, and says what the loop should do next. */
  async streamTurn(turnRequest: GuardedTurnRequest): Promise<GuardedTurn> {
    for (let attempt = 0; ; attempt += 1) {
      const accumulator = new ModelTurnAccumulator();
      for await (const chunk of turnRequest.request()) turnRequest.onDelta(accumulator.push(chunk));
      const turn = accumulator.sawCandidate ? accumulator.finish() : undefined;
      const problem = problemOf(turn);
      if (!problem || (turnRequest.final && turn)) {
        this.#corrections = 0;
        this.#unusableInARow = 0;
        return this.#settle(turnRequest, turn as ModelTurn, { kind: 'turn', turn: turn as ModelTurn });
      }
      this.#unusableInARow += 1;
      if (problem.kind === 'refused') return this.#settle(turnRequest, turn, fatal(problem.message));
      if (!turnRequest.final && attempt < QUIET_RETRIES) {
        await this.#backoff(attempt);
        continue;
      }
      if ((problem.kind === 'malformed-call' || problem.kind === 'unexpected-tool-call') && !turnRequest.final && this.#corrections < MAX_CORRECTIONS) {
        this.#corrections += 1;
        return this.#settle(turnRequest, turn, { kind: 'correction', content: { role: 'user', parts: [{ text: correctionFor(problem) }] } });
      }
      return this.#settle(turnRequest, turn, fatal(failureMessage(problem, this.#unusableInARow)));
    }
  }

  #settle(turnRequest: GuardedTurnRequest, turn: ModelTurn | undefined, outcome: GuardedTurn): GuardedTurn {
    if (turn?.usageMetadata) turnRequest.onUsage(turn.usageMetadata);
    return outcome;
  }

  #backoff(attempt: number): Promise<void> {
    const signal = this.#signal;
    const ms = this.#random() * BACKOFF_BASE_MS * 2 ** attempt;
    return new Promise((resolve, reject) => {
      const stopped = (): void => {
        clearTimeout(timer);
        reject(stopError(signal));
      };
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', stopped);
        resolve();
      }, ms);
      if (signal.aborted) stopped();
      else signal.addEventListener('abort', stopped, { once: true });
    });
  }
}

/** What is wrong with a turn, or `undefined` when it has calls or something to show. */
function problemOf(turn: ModelTurn | undefined): Problem | undefined {
  if (!turn) return { kind: 'no-candidates' };
  if (turn.functionCalls.length > 0) return undefined;
  const reason = turn.finishReason;
  const refusal = reason !== undefined && Object.hasOwn(REFUSALS, reason) ? REFUSALS[reason] : undefined;
  if (refusal) return { kind: 'refused', message: `Agent error: ${refusal} (finishReason ${reason})` };
  const finishMessage = turn.candidateMetadata.finishMessage;
  const detail = typeof finishMessage === 'string' ? finishMessage : '';
  if (reason === 'MALFORMED_FUNCTION_CALL') return { kind: 'malformed-call', detail };
  if (reason === 'UNEXPECTED_TOOL_CALL') return { kind: 'unexpected-tool-call', detail };
  const visible = turn.content.parts.some((part) => part.thought !== true && (typeof part.text === 'string' ? part.text.length > 0 : true));
  return visible ? undefined : { kind: 'empty', finishReason: reason };
}

function correctionFor(problem: Extract<Problem, { detail: string }>): string {
  const detail = problem.detail ? ` (${problem.detail})` : '';
  return problem.kind === 'malformed-call'
    ? `Your last function call was malformed and was not run${detail}. Call the function again with valid JSON arguments that match its declaration.`
    : `Your last turn called a tool that is not available${detail}. Use only the declared functions.`;
}

function failureMessage(problem: Exclude<Problem, { kind: 'refused' }>, times: number): string {
  const inARow = times > 1 ? ` ${times} times in a row` : '';
  switch (problem.kind) {
    case 'no-candidates':
      return `Agent unable to proceed: no candidates in Gemini response${inARow}`;
    case 'empty': {
      // A reason other than STOP says why (MAX_TOKENS: the whole output budget went on thoughts).
      const why = problem.finishReason === undefined || problem.finishReason === 'STOP' ? '' : ` (finishReason ${problem.finishReason})`;
      return `Agent unable to proceed: the model returned a turn with no content${inARow}${why}`;
    }
    case 'malformed-call':
      return `Agent unable to proceed: the model made a malformed function call${inARow}${problem.detail ? ` (${problem.detail})` : ''}`;
    case 'unexpected-tool-call':
      return `Agent unable to proceed: the model called a tool that is not available${inARow}${problem.detail ? ` (${problem.detail})` : ''}`;
  }
}

function fatal(message: string): GuardedTurn {
  return { kind: 'fatal', message, code: 'MODEL_ERROR' };
}
