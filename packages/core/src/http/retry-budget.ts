import { AgentError } from '../errors/index.js';

/**
 * `error` with the number of attempts made (the loop reads it and does not ask again what a
 * client already retried), optionally reworded and marked `retryable: false`.
 */
export function withAttempts(error: AgentError, attempts: number, change?: { message: string; retryable: false }): AgentError {
  const details: Record<string, unknown> = { ...error.details, attempts };
  if (change) details.retryable = change.retryable;
  return new AgentError(error.code, change?.message ?? error.message, { cause: error.cause, details });
}

/**
 * The error a client gives up with when waiting `delayMs` more would pass its retry budget:
 * waiting on would look like a silent model to the loop's idle timeout, so the run pauses at once
 * and can be resumed later.
 */
export function pastRetryBudget(error: AgentError, attempts: number, delayMs: number, maxTotalDelayMs: number): AgentError {
  return withAttempts(error, attempts, {
    message: `${error.message} (not retried: waiting ${seconds(delayMs)} s more would pass the retry budget of ${seconds(maxTotalDelayMs)} s)`,
    retryable: false,
  });
}

function seconds(ms: number): number {
  return Math.round(ms / 100) / 10;
}
