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

const done = (): IteratorReturnResult<undefined> => ({ done: true, value: undefined });

/** Read events a queue drops from its front once they are at least half of it. */
const COMPACT_AFTER = 1024;

/**
 * Runs `body` as a background task that emits events, and returns a generator of those events, in
 * order. Like an async generator function, nothing starts before the first `next()`. Leaving early
 * (`return()`, `throw()`, a client gone) aborts the run's signal and ends every pending `next()`;
 * anything `body` throws becomes one coded `error` event.
 *
 * Written by hand rather than as an async generator over a queue: an event the consumer is
 * already waiting for goes straight to its pending `next()`, with no generator steps between.
 */
export function driveRun(
  options: RunOptions,
  body: (environment: RunEnvironment) => Promise<void>,
): AsyncGenerator<RunEvent, void, undefined> {
  const controller = new AbortController();
  const forwardAbort = (): void => controller.abort(options.signal?.reason);
  /** Emitted and not yet read, from `readAt` on. */
  let queue: RunEvent[] = [];
  let readAt = 0;
  /** The consumer's `next()` calls waiting for an event; only while `queue` is empty. */
  const waiting: Array<(result: IteratorResult<RunEvent, void>) => void> = [];
  let started = false;
  /** The body settled: nothing more is emitted. */
  let ended = false;
  /** The generator is done: cleaned up, every later `next()` is done. */
  let finished = false;

  const finish = (): void => {
    if (finished) return;
    finished = true;
    if (started) {
      options.signal?.removeEventListener('abort', forwardAbort);
      if (!ended) controller.abort(new AgentError('ABORTED', 'Run was stopped'));
    }
    ended = true;
    queue = [];
    readAt = 0;
    for (const resolve of waiting.splice(0)) resolve(done());
  };
  const emit = (event: RunEvent): void => {
    if (ended) return;
    const resolve = waiting.shift();
    if (resolve) resolve({ done: false, value: event });
    else queue.push(event);
  };
  const start = (): void => {
    started = true;
    if (options.signal?.aborted) forwardAbort();
    else options.signal?.addEventListener('abort', forwardAbort, { once: true });
    const environment: RunEnvironment = { emit, signal: controller.signal, abort: (reason) => controller.abort(reason) };
    void body(environment)
      .catch((error: unknown) => {
        const agentError = toAgentError(error);
        if (agentError.code !== 'ABORTED') emit({ type: 'error', message: agentError.message, code: agentError.code });
      })
      .finally(() => {
        ended = true;
        // Waiting consumers have read everything: the run is over for them.
        if (waiting.length > 0) finish();
      });
  };

  const generator: AsyncGenerator<RunEvent, void, undefined> = {
    next() {
      if (!started && !finished) start();
      if (readAt < queue.length) {
        const event = queue[readAt] as RunEvent;
        readAt += 1;
        if (readAt === queue.length) {
          queue = [];
          readAt = 0;
        } else if (readAt >= COMPACT_AFTER && readAt * 2 >= queue.length) {
          // A reader that never catches up must not keep what it has read alive.
          queue = queue.slice(readAt);
          readAt = 0;
        }
        return Promise.resolve({ done: false, value: event });
      }
      if (ended) {
        finish();
        return Promise.resolve(done());
      }
      return new Promise((resolve) => waiting.push(resolve));
    },
    return() {
      finish();
      return Promise.resolve(done());
    },
    throw(error: unknown) {
      finish();
      return Promise.reject(error);
    },
    [Symbol.asyncIterator]() {
      return generator;
    },
  };
  return generator;
}
