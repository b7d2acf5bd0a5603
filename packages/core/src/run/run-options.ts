import type { FunctionGroup } from '../functions/index.js';
import type { LoopMode } from '../loop/agent-loop.js';
import type { ModelPolicy } from '../loop/model-stream.js';

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
  /** After this many model turns, one last tool-free turn is requested and the run ends; a call the model makes in it anyway is not run. */
  maxTurns?: number;
  /** Extra function groups; a group named like a built-in one (`system`, `chat`, ...) replaces it. */
  functionGroups?: FunctionGroup[];
  /** `false` leaves out the built-in groups: the model sees only `functionGroups`. */
  defaultFunctionGroups?: boolean;
  /** Who started the run; a resume by anyone else is refused with `FORBIDDEN`. */
  owner?: string;
  /** Clock for the objective's date line and saved states. */
  now?: () => Date;
  /** Model timeouts (idle, total) and retries of a model that failed mid-answer. */
  modelPolicy?: ModelPolicy;
  /**
   * How long a claim on a saved run lasts without renewal (default 60 000 ms). A resumed run
   * renews it while it runs; if the process dies, the run can be resumed again once it ran out.
   */
  leaseMs?: number;
  /**
   * Keeps checkpoints of this run from its first turn under this id (created, and held by this
   * process): if the process dies, `resume(interactionId, {})` goes on from the last turn. Without
   * it, a run is saved only when it suspends or pauses.
   */
  interactionId?: string;
  /** The session this run belongs to; kept with every saved state, so a resume by interaction id finds it. */
  sessionId?: string;
}
