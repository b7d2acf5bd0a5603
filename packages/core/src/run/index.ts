/**
 * `run()` and `resume()`: a run's segments as async generators of events, and the saved state of
 * a suspended or paused run.
 */
export { INTERACTION_STATE_VERSION, InteractionEnvelopeSchema, type InteractionEnvelope, type InteractionState } from './interaction-state.js';
export { resume } from './resume.js';
export type { RunErrorEvent, RunEvent, RunSuspendEvent } from './run-events.js';
export { DEFAULT_MAX_TURNS, DEFAULT_MODEL, type RunOptions } from './run-options.js';
export { formatObjectiveDate, run } from './start.js';
