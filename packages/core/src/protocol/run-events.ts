import type { ErrorCode } from '../errors/agent-error.js';
import type { AgentEvent, AgentEventOf, SuspendEvent } from './events.js';

/** A suspend event as `run()` and `resume()` yield it: it always carries the id to resume with. */
export type RunSuspendEvent = SuspendEvent extends infer E ? (E extends SuspendEvent ? E & { interactionId: string } : never) : never;

/** An `error` event as `run()` and `resume()` yield it: it always carries its code. */
export type RunErrorEvent = AgentEventOf<'error'> & { code: ErrorCode };

/**
 * An event of a run in this process. The same union as {@link AgentEvent}, with the guarantees
 * the runtime gives: suspend events carry `interactionId`, `error` events carry `code` (and
 * `interactionId` when the run was saved and can be resumed).
 */
export type RunEvent = Exclude<AgentEvent, SuspendEvent | AgentEventOf<'error'>> | RunSuspendEvent | RunErrorEvent;
