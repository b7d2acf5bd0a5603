import type { JsonObject } from '../protocol/content.js';
import type { AgentResult } from '../protocol/events.js';
import type { CallOutcome, CallRecord } from './function-caller.js';
import type { LoopSession } from './agent-loop.js';

/**
 * Where the loop records its progress so a crashed run can go on from its last turn. The loop
 * awaits `turnReceived` before any side-effecting call starts and `turnEnded` before the next
 * model request; `callSettled` may record lazily.
 */
export interface TurnJournal {
  /** A model request is about to go out (its `sendRequest` event is out); the history is at a turn boundary. */
  requestStarting(session: LoopSession): Promise<void>;
  /** The model's turn is in the history and these calls are about to run. */
  turnReceived(session: LoopSession, calls: readonly CallRecord[]): Promise<void>;
  /** One call of the current turn settled (a termination function also reports its result). */
  callSettled(session: LoopSession, call: CallRecord, outcome: CallOutcome, result: AgentResult | undefined): void;
  /** The turn's function responses are in the history. */
  turnEnded(session: LoopSession): Promise<void>;
}

/** A call of a turn that was in flight when its run stopped, as the journal kept it. */
export interface JournalledCall extends CallRecord {
  /** Set once the call finished. */
  response?: JsonObject;
  /** Set when a side-effecting call was allowed to start. */
  started?: boolean;
}

/** A turn in flight as the journal keeps it, and as a recovered run goes on with it: its calls and what is known of them. */
export interface RecoveredTurn {
  calls: JournalledCall[];
  /** The result a termination function of the turn already reported. */
  result?: AgentResult;
}

/** What a side-effecting call that was running when the run stopped answers the model. */
export function interruptedResponse(call: CallRecord): JsonObject {
  return {
    error: `${call.name} was running when the run stopped and was not run again, because it has side effects. Check whether it took effect before calling it again.`,
  };
}
