/**
 * `run()` and `resume()`: a run's segments as async generators of events, and the saved state of
 * a suspended or running run.
 */
export { INTERACTION_STATE_VERSION, readInteractionState, type InteractionState, type SavedCall } from './interaction-state.js';
export { resume } from './resume.js';
export type { RunErrorEvent, RunEvent, RunSuspendEvent } from '../protocol/run-events.js';
export { DEFAULT_MAX_TURNS, DEFAULT_MODEL, type RunOptions } from './run-options.js';
export { formatObjectiveDate, run } from './start.js';
