import type { FunctionDefinition } from '../functions/index.js';
import type { InteractionClaim } from '../interactions/index.js';
import type { LoopSession } from '../loop/agent-loop.js';
import type { CallOutcome, CallRecord } from '../loop/function-caller.js';
import type { JournalledCall, TurnJournal } from '../loop/turn-journal.js';
import type { AgentResult } from '../protocol/events.js';
import { toSavedState } from './persistence.js';
import type { RunOptions } from './run-options.js';

/**
 * A {@link TurnJournal} that writes checkpoints into a claimed record: the turn and its calls
 * when the model's answer is in (awaited, before side-effecting calls start), each call's result
 * as it settles (written in the background, coalesced), and the turn boundary (awaited, before
 * the next model request). A crash loses at most the turn in flight.
 */
export class CheckpointJournal implements TurnJournal {
  readonly #claim: InteractionClaim;
  readonly #definitions: ReadonlyMap<string, FunctionDefinition>;
  readonly #options: RunOptions;
  #turn: { calls: JournalledCall[]; result?: AgentResult } | undefined;
  #session: LoopSession | undefined;
  #writing: Promise<void> | undefined;
  #dirty = false;
  #checkpointBeforeRequest: boolean;

  /**
   * `checkpointBeforeRequest`: the session changed since the record was written (a client's
   * answer was applied); it is written before the first model request, after its event is out.
   */
  constructor(
    claim: InteractionClaim,
    definitions: ReadonlyMap<string, FunctionDefinition>,
    options: RunOptions,
    checkpointBeforeRequest = false,
  ) {
    this.#claim = claim;
    this.#definitions = definitions;
    this.#options = options;
    this.#checkpointBeforeRequest = checkpointBeforeRequest;
  }

  async requestStarting(session: LoopSession): Promise<void> {
    if (!this.#checkpointBeforeRequest) return;
    this.#checkpointBeforeRequest = false;
    await this.checkpoint(session);
  }

  /** Writes the session as it is now, at a point where no turn is in flight. */
  async checkpoint(session: LoopSession): Promise<void> {
    this.#turn = undefined;
    await this.#settleWrites();
    await this.#claim.checkpoint(toSavedState(session, 'checkpoint', this.#options));
  }

  async turnReceived(session: LoopSession, calls: readonly CallRecord[]): Promise<void> {
    this.#turn = {
      calls: calls.map((call) => (this.#definitions.get(call.name)?.sideEffects === true ? { ...call, started: true } : { ...call })),
    };
    await this.#settleWrites();
    await this.#claim.checkpoint(this.#state(session));
  }

  callSettled(session: LoopSession, call: CallRecord, outcome: CallOutcome, result: AgentResult | undefined): void {
    const entry = this.#turn?.calls.find((candidate) => candidate.callId === call.callId);
    if (!this.#turn || !entry) return;
    if (outcome.kind === 'response') entry.response = outcome.response;
    if (result && !this.#turn.result) this.#turn.result = result;
    this.#session = session;
    if (this.#writing) {
      this.#dirty = true;
      return;
    }
    this.#writing = this.#drain();
  }

  turnEnded(session: LoopSession): Promise<void> {
    return this.checkpoint(session);
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
