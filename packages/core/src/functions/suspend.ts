import type { SuspendEvent } from '../protocol/events.js';

/** A suspend event before the runtime gives it an `interactionId`. */
export type SuspendEventInput = SuspendEvent extends infer E ? (E extends SuspendEvent ? Omit<E, 'interactionId'> : never) : never;

/**
 * Thrown by a handler (or a precondition) that needs the client: the run is saved and the stream
 * ends with `event`; the client's answer comes back through `resume()`.
 */
export class Suspend extends Error {
  override readonly name = 'Suspend';
  readonly event: SuspendEventInput;
  /** Raised by a precondition (consent): the model never sees the round trip. */
  readonly precondition: boolean;

  constructor(event: SuspendEventInput, options: { precondition?: boolean } = {}) {
    super(`Suspend: ${event.type}`);
    this.event = event;
    this.precondition = options.precondition ?? false;
  }
}

/** Whether `value` is a {@link Suspend}. */
export function isSuspend(value: unknown): value is Suspend {
  return value instanceof Suspend;
}
