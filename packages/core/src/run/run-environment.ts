import { EventChannel } from '../channel/index.js';
import { AgentError, toAgentError } from '../errors/index.js';
import type { RunEvent } from '../protocol/run-events.js';
import type { RunOptions } from './run-options.js';

/** What the body of a run uses to talk to its consumer. */
export interface RunEnvironment {
  emit(event: RunEvent): void;
  /** Aborts when the caller's signal aborts, the consumer stops reading, or `abort` is called. */
  signal: AbortSignal;
  /** Stops the run; an `AgentError` reason other than `ABORTED` reaches the consumer as an `error` event. */
  abort(reason: unknown): void;
}

/**
 * Runs `body` as a background task that emits into a channel, and yields the channel. Leaving the
 * generator early (`return()`, a client gone) aborts the run's signal; anything `body` throws
 * becomes one coded `error` event.
 */
export async function* driveRun(
  options: RunOptions,
  body: (environment: RunEnvironment) => Promise<void>,
): AsyncGenerator<RunEvent> {
  const channel = new EventChannel<RunEvent>();
  const controller = new AbortController();
  const forwardAbort = (): void => controller.abort(options.signal?.reason);
  if (options.signal?.aborted) forwardAbort();
  else options.signal?.addEventListener('abort', forwardAbort, { once: true });
  const environment: RunEnvironment = {
    emit: (event) => channel.push(event),
    signal: controller.signal,
    abort: (reason) => controller.abort(reason),
  };
  void body(environment)
    .catch((error: unknown) => {
      const agentError = toAgentError(error);
      if (agentError.code !== 'ABORTED') channel.push({ type: 'error', message: agentError.message, code: agentError.code });
    })
    .finally(() => channel.close());
  try {
    // A burst at a time from the channel: one wait per burst, not per event.
    for await (const events of channel.bursts()) for (const event of events) yield event;
  } finally {
    options.signal?.removeEventListener('abort', forwardAbort);
    if (!channel.closed) controller.abort(new AgentError('ABORTED', 'Run was stopped'));
    channel.close();
  }
}
