import { done, EventChannel, READ_QUEUED, type QueuedItems } from '../channel/index.js';
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
  /**
   * Whether the reader left (`return()`, `throw()`): what the run emits from now on reaches nobody.
   * A reader that only aborted the signal still reads what the run says last.
   */
  readerLeft(): boolean;
}

/**
 * Runs `body` as a background task that emits events, and returns a generator of those events, in
 * order. Like an async generator function, nothing starts before the first `next()`. Leaving early
 * (`return()`, `throw()`, a client gone) aborts the run's signal and ends every pending `next()`;
 * anything `body` throws becomes one coded `error` event.
 *
 * Written by hand rather than as an async generator over the channel: an event the reader is
 * already waiting for goes straight to its pending `next()`, with no generator steps between.
 */
export function driveRun(
  options: RunOptions,
  body: (environment: RunEnvironment) => Promise<void>,
): AsyncGenerator<RunEvent, void, undefined> {
  const channel = new EventChannel<RunEvent>();
  const controller = new AbortController();
  const forwardAbort = (): void => controller.abort(options.signal?.reason);
  let started = false;

  const start = (): void => {
    started = true;
    if (options.signal?.aborted) forwardAbort();
    else options.signal?.addEventListener('abort', forwardAbort, { once: true });
    const environment: RunEnvironment = {
      emit: (event) => channel.push(event),
      signal: controller.signal,
      abort: (reason) => controller.abort(reason),
      // The channel closes only once the body ends, or when the reader leaves.
      readerLeft: () => channel.closed,
    };
    void body(environment)
      .catch((error: unknown) => {
        const agentError = toAgentError(error);
        if (agentError.code !== 'ABORTED') channel.push({ type: 'error', message: agentError.message, code: agentError.code });
      })
      .finally(() => {
        options.signal?.removeEventListener('abort', forwardAbort);
        channel.close();
      });
  };
  /** The reader left: a run still going is stopped, and what it emitted is dropped. */
  const leave = (): void => {
    // The channel closes when the body ends, so an open one is a run still going.
    if (started && !channel.closed) controller.abort(new AgentError('ABORTED', 'Run was stopped'));
    options.signal?.removeEventListener('abort', forwardAbort);
    channel.discard();
  };

  const generator: AsyncGenerator<RunEvent, void, undefined> & QueuedItems<RunEvent> = {
    next() {
      if (!started && !channel.closed) start();
      return channel.next();
    },
    [READ_QUEUED]: () => channel.readQueued(),
    return() {
      leave();
      return Promise.resolve(done());
    },
    throw(error: unknown) {
      leave();
      return Promise.reject(error);
    },
    [Symbol.asyncIterator]() {
      return generator;
    },
  };
  return generator;
}
