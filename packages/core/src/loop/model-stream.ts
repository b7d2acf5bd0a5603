import { AgentError, toAgentError } from '../errors/index.js';

/** How long the loop waits for a model, and how it retries a model that failed mid-answer. */
export interface ModelPolicy {
  /** No chunk for this long ends the request with `TIMEOUT`. Default 60 000 ms. */
  idleTimeoutMs?: number;
  /** A whole answer taking longer than this ends the request with `TIMEOUT`. Default 600 000 ms. */
  totalTimeoutMs?: number;
  /** Requests per turn in total when the model fails transiently, the first included. Default 3. */
  maxAttempts?: number;
  /** First wait before a retry; doubled each time, with jitter. Default 1 000 ms. */
  baseDelayMs?: number;
  /** Longest wait before a retry. Default 30 000 ms. */
  maxDelayMs?: number;
}

export const DEFAULT_MODEL_POLICY: Required<ModelPolicy> = {
  idleTimeoutMs: 60_000,
  totalTimeoutMs: 600_000,
  maxAttempts: 3,
  baseDelayMs: 1_000,
  maxDelayMs: 30_000,
};

/**
 * The messages of the `TypeError` a `fetch` rejects with when the network fails, not the code:
 * Node (undici: `fetch failed`, and `terminated` for a body cut mid-read), Chromium, Firefox and
 * Safari.
 */
const FETCH_NETWORK_FAILURES: ReadonlySet<string> = new Set([
  'fetch failed',
  'terminated',
  'Failed to fetch',
  'NetworkError when attempting to fetch resource.',
  'Load failed',
]);

/**
 * A model stream's failure as a coded error. A custom backend that lets its `fetch`'s network
 * failure through (a `TypeError`) gets the `MODEL_UNAVAILABLE` the built-in clients give, so the
 * request is asked again and the run pauses rather than failing; any other throw is `INTERNAL`.
 */
export function toModelFailure(error: unknown): AgentError {
  if (error instanceof TypeError && FETCH_NETWORK_FAILURES.has(error.message)) {
    return new AgentError('MODEL_UNAVAILABLE', `The model could not be reached (${error.message})`, { cause: error });
  }
  return toAgentError(error);
}

/** Codes of failures that may pass if the same request is sent again later. */
const TRANSIENT_CODES: ReadonlySet<string> = new Set(['RATE_LIMITED', 'MODEL_UNAVAILABLE', 'TIMEOUT']);

/** Whether a model failure is worth retrying or pausing on (rather than ending the run). */
export function isTransient(error: AgentError): boolean {
  return TRANSIENT_CODES.has(error.code);
}

/**
 * Whether the backend client already retried this failure itself (`details.attempts` above 1), or
 * marked it `retryable: false` (a daily quota, a wait longer than its retry budget): either way
 * the loop should not ask again, and a transient failure pauses the run resumably.
 */
export function retriedByBackend(error: AgentError): boolean {
  const attempts = error.details?.attempts;
  return (typeof attempts === 'number' && attempts > 1) || error.details?.retryable === false;
}

/**
 * Iterates a model stream under the policy's timeouts. One timer per request, re-armed only
 * when it fires, so a chunk costs a clock read. On a timeout `controller` is aborted (the
 * request stops) and the iteration throws `TIMEOUT`, even from a stream that ignores the abort.
 * A plain iterator rather than a generator: each chunk is one small promise, nothing more.
 */
export function guardModelStream<T>(
  stream: AsyncIterable<T>,
  controller: AbortController,
  policy: Required<ModelPolicy>,
): AsyncIterableIterator<T> {
  const iterator = stream[Symbol.asyncIterator]();
  const started = Date.now();
  let lastChunk = started;
  let timeout: AgentError | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let finished = false;
  // The wait for the next chunk in progress, failed at once when the timer fires.
  let failWaiting: ((error: unknown) => void) | undefined;
  const fire = (error: AgentError): void => {
    timeout = error;
    controller.abort(error);
    failWaiting?.(error);
  };
  const arm = (): void => {
    const now = Date.now();
    const idleLeft = lastChunk + policy.idleTimeoutMs - now;
    const totalLeft = started + policy.totalTimeoutMs - now;
    if (totalLeft <= 0) fire(new AgentError('TIMEOUT', `The model did not finish its answer within ${policy.totalTimeoutMs} ms`));
    else if (idleLeft <= 0) fire(new AgentError('TIMEOUT', `The model sent nothing for ${policy.idleTimeoutMs} ms`));
    else timer = setTimeout(arm, Math.min(idleLeft, totalLeft));
  };
  /** Stops the timer; a stream left before its end (a timeout, an error, the consumer left) releases its request. */
  const finish = (releaseStream: boolean): void => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    if (releaseStream) void Promise.resolve(iterator.return?.()).catch(() => undefined);
  };
  arm();
  return {
    next(): Promise<IteratorResult<T>> {
      if (finished) return Promise.resolve({ done: true, value: undefined });
      return new Promise<IteratorResult<T>>((resolve, reject) => {
        const fail = (error: unknown): void => {
          failWaiting = undefined;
          finish(true);
          reject(timeout ?? toModelFailure(error));
        };
        if (timeout) {
          fail(timeout);
          return;
        }
        failWaiting = fail;
        iterator.next().then((next) => {
          // Already failed by the timer: the late chunk is dropped.
          if (failWaiting !== fail) return;
          failWaiting = undefined;
          if (next.done) finish(false);
          else lastChunk = Date.now();
          resolve(next);
        }, fail);
      });
    },
    return(): Promise<IteratorResult<T>> {
      finish(true);
      return Promise.resolve({ done: true, value: undefined });
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

/** The wait before retry `attempt` (1-based): exponential with jitter, capped. */
export function retryDelayMs(attempt: number, policy: Required<ModelPolicy>): number {
  const backoff = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  return backoff * (0.5 + Math.random() * 0.5);
}

/** Sleeps `ms`, or rejects with `ABORTED` when `signal` aborts first. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(stopError(signal));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(stopError(signal));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * The error a stopped run ends with: the reason it was stopped with when that is an
 * {@link AgentError} (a lost claim, a cancelled session), else `ABORTED`. Every wait the stop
 * ends rejects with this one error, so stopping a run builds at most one.
 */
export function stopError(signal: AbortSignal): AgentError {
  const reason: unknown = signal.reason;
  return reason instanceof AgentError ? reason : new AgentError('ABORTED', 'Run was stopped', { cause: reason });
}
