import { toAgentError, type AgentError } from '../errors/index.js';
import type { FunctionDefinition } from '../functions/index.js';
import type { CheckpointRetry, InteractionClaim } from '../interactions/index.js';
import type { LoopSession } from '../loop/agent-loop.js';
import type { CallOutcome, CallRecord } from '../loop/function-caller.js';
import type { RecoveredTurn, TurnJournal } from '../loop/turn-journal.js';
import type { AgentResult } from '../protocol/events.js';
import { toSavedState } from './persistence.js';
import type { RunOptions } from './run-options.js';

/**
 * The waits before a failed checkpoint is written again (ms): three attempts in all, so a store
 * that fails one write (a blip, a timeout) does not end the run.
 */
export const CHECKPOINT_RETRY_DELAYS_MS: readonly number[] = [100, 400];

/**
 * A {@link TurnJournal} that writes checkpoints into a claimed record: the turn and its calls
 * when the model's answer is in (awaited, before side-effecting calls start), each call's result
 * as it settles while others still run (written in the background, coalesced), and the turn
 * boundary (awaited, before the next model request). A crash loses at most the turn in flight.
 * An awaited write the store fails is tried again ({@link CHECKPOINT_RETRY_DELAYS_MS}); one that
 * still fails is kept in {@link failure} and ends the loop.
 */
export class CheckpointJournal implements TurnJournal {
  readonly #claim: InteractionClaim;
  readonly #definitions: ReadonlyMap<string, FunctionDefinition>;
  readonly #options: RunOptions;
  #turn: RecoveredTurn | undefined;
  #session: LoopSession | undefined;
  #writing: Promise<void> | undefined;
  #dirty = false;
  #checkpointBeforeRequest: boolean;
  readonly #retry: CheckpointRetry;
  #failure: AgentError | undefined;
  /** Calls that settled before the model's turn was received (they start as the answer streams). */
  #settledEarly: Array<{ call: CallRecord; outcome: CallOutcome; result: AgentResult | undefined }> = [];

  /**
   * `checkpointBeforeRequest`: the session changed since the record was written (a client's
   * answer was applied); it is written before the first model request, after its event is out.
   * `signal`: the run's; a stopped run tries no write again.
   */
  constructor(
    claim: InteractionClaim,
    definitions: ReadonlyMap<string, FunctionDefinition>,
    options: RunOptions,
    signal: AbortSignal,
    checkpointBeforeRequest = false,
  ) {
    this.#claim = claim;
    this.#definitions = definitions;
    this.#options = options;
    this.#retry = { delaysMs: CHECKPOINT_RETRY_DELAYS_MS, signal };
    this.#checkpointBeforeRequest = checkpointBeforeRequest;
  }

  /** The awaited write that failed for good (the loop stopped on it), if one did. */
  get failure(): AgentError | undefined {
    return this.#failure;
  }

  /**
   * Whether the record still holds what the segment was resumed from, not the answer applied to
   * it: the answer's checkpoint was never written.
   */
  get answerUnsaved(): boolean {
    return this.#checkpointBeforeRequest;
  }

  async requestStarting(session: LoopSession): Promise<void> {
    // Each request's calls start afresh: what calls of an earlier answer said (one that broke off,
    // or a recovered turn's) belongs to none of them, even where the model reuses their ids.
    this.#settledEarly = [];
    if (!this.#checkpointBeforeRequest) return;
    await this.checkpoint(session);
    this.#checkpointBeforeRequest = false;
  }

  /** Writes the session as it is now, at a point where no turn is in flight. */
  async checkpoint(session: LoopSession): Promise<void> {
    this.#turn = undefined;
    await this.#settleWrites();
    await this.#write(toSavedState(session, 'checkpoint', this.#options));
  }

  async turnReceived(session: LoopSession, calls: readonly CallRecord[]): Promise<void> {
    const turn: RecoveredTurn = {
      calls: calls.map((call) => (this.#definitions.get(call.name)?.sideEffects === true ? { ...call, started: true } : { ...call })),
    };
    this.#turn = turn;
    // Calls that answered while the model was still streaming are recorded with this write.
    for (const early of this.#settledEarly.splice(0)) this.#record(turn, early.call, early.outcome, early.result);
    // Every call has answered: the turn's end is written next, before anything else can happen.
    if (allAnswered(turn)) return;
    await this.#settleWrites();
    await this.#write(this.#state(session));
  }

  callSettled(session: LoopSession, call: CallRecord, outcome: CallOutcome, result: AgentResult | undefined): void {
    if (!this.#turn) {
      // The model's answer is not in yet: the call is recorded with the turn.
      this.#settledEarly.push({ call, outcome, result });
      return;
    }
    if (!this.#record(this.#turn, call, outcome, result)) return;
    this.#session = session;
    // The last call of the turn to answer: the loop writes the turn's end (or ends the run) next,
    // with every response in, so this write would be overwritten before anything else happens.
    if (allAnswered(this.#turn)) return;
    if (this.#writing) {
      this.#dirty = true;
      return;
    }
    // Nobody awaits a background write: a failure is left to the next awaited write, which
    // writes the whole state again (and fails the same way if the store is still failing).
    this.#writing = this.#drain().catch(() => undefined);
  }

  turnEnded(session: LoopSession): Promise<void> {
    return this.checkpoint(session);
  }

  /** Puts a settled call's response (and the result it reported) into the turn; `false` when it is not one of the turn's calls. */
  #record(turn: RecoveredTurn, call: CallRecord, outcome: CallOutcome, result: AgentResult | undefined): boolean {
    const entry = turn.calls.find((candidate) => candidate.callId === call.callId);
    if (!entry) return false;
    if (outcome.kind === 'response') entry.response = outcome.response;
    if (result && !turn.result) turn.result = result;
    return true;
  }

  /** An awaited write, tried again when the store fails it; a failure that stays is kept. */
  async #write(state: unknown): Promise<void> {
    try {
      await this.#claim.checkpoint(state, this.#retry);
    } catch (error) {
      this.#failure = toAgentError(error);
      throw error;
    }
  }

  #state(session: LoopSession) {
    const state = toSavedState(session, 'checkpoint', this.#options);
    if (this.#turn) state.turn = this.#turn;
    return state;
  }

  async #drain(): Promise<void> {
    try {
      do {
        this.#dirty = false;
        if (this.#turn && this.#session) await this.#claim.checkpoint(this.#state(this.#session));
      } while (this.#dirty);
    } finally {
      this.#writing = undefined;
    }
  }

  async #settleWrites(): Promise<void> {
    // A background write still in flight would land after this one; wait for it (its failure
    // surfaces through the claim's next write).
    if (this.#writing) await this.#writing.catch(() => undefined);
  }
}

/** Whether every call of the turn has its response. */
function allAnswered(turn: RecoveredTurn): boolean {
  return turn.calls.every((call) => call.response !== undefined);
}
