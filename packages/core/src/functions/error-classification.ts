import { isAgentError, messageOf } from '../errors/index.js';
import { redactSecrets, redactServerMessage } from '../http/redact.js';
import type { JsonObject } from '../protocol/content.js';

/**
 * The most characters of an error the model is told (4000): the start and the end of a longer one,
 * where a traceback keeps its cause. Every later request carries the error again.
 */
const MAX_ERROR_LENGTH = 4000;

/** What kind of failure an error message describes. */
export type ErrorKind =
  | 'free-quota-exhausted'
  | 'free-quota-exhausted-can-pay'
  | 'paid-quota-exhausted'
  | 'capacity'
  | 'safety'
  | 'recitation';

/** Kinds that end the run: retrying cannot help until the user's quota changes. */
const FATAL_KINDS: ReadonlySet<string> = new Set(['free-quota-exhausted', 'free-quota-exhausted-can-pay', 'paid-quota-exhausted']);

/**
 * Classifies a failure message: a structured `RESOURCE_EXHAUSTED` error by its reason, otherwise
 * by the words it contains. `undefined` when nothing is recognised.
 */
export function classifyError(message: string): ErrorKind | undefined {
  const structured = parseObject(message);
  if (structured && structured.code === 'RESOURCE_EXHAUSTED') {
    const reason = structured.error_reason ?? structured.errorReason;
    if (reason === 'PAID_QUOTA_EXHAUSTED') return 'paid-quota-exhausted';
    if (reason === 'FREE_QUOTA_EXHAUSTED') return 'free-quota-exhausted';
    return 'capacity';
  }
  const lower = message.toLowerCase();
  if (lower.includes('safety')) return 'safety';
  if (lower.includes('quota')) return 'capacity';
  if (lower.includes('recitation')) return 'recitation';
  return undefined;
}

/**
 * Decides what a failed generation becomes: exhausted quota is fatal (`{"$error": ...}`, the run
 * ends), anything else goes back to the model as `{"error": ...}` so it can adapt.
 *
 * @example
 * ```ts
 * toErrorOrResponse({ error: 'Image was blocked by safety filters' }); // { error: '...' }
 * toErrorOrResponse({ error: '{"code":"RESOURCE_EXHAUSTED","error_reason":"FREE_QUOTA_EXHAUSTED"}' }); // { $error: '...' }
 * ```
 */
export function toErrorOrResponse(failure: { error: string; metadata?: JsonObject }): JsonObject {
  const declared = failure.metadata?.kind;
  const kind = typeof declared === 'string' ? declared : classifyError(failure.error);
  if (kind !== undefined && FATAL_KINDS.has(kind)) {
    // Exhausted quota: retrying cannot help, so the run ends with a rate-limit code.
    return failure.metadata
      ? { $error: failure.error, code: 'RATE_LIMITED', metadata: failure.metadata }
      : { $error: failure.error, code: 'RATE_LIMITED' };
  }
  const error = boundError(failure.error);
  return failure.metadata ? { error, metadata: failure.metadata } : { error };
}

/**
 * What the model may be told of a failure from a backend, Drive or any code it did not write:
 * credentials redacted, and for anything but an `AgentError` (whose messages are made to be shown)
 * server file paths too. Not cut: classify it first, then {@link boundError}.
 */
export function describeFailure(error: unknown): string {
  return isAgentError(error) ? redactSecrets(error.message) : redactServerMessage(messageOf(error));
}

/** An error text cut to its first and last characters when it is longer than the model should reread each turn. */
export function boundError(text: string): string {
  if (text.length <= MAX_ERROR_LENGTH) return text;
  const head = text.slice(0, (MAX_ERROR_LENGTH * 3) / 4);
  const tail = text.slice(text.length - MAX_ERROR_LENGTH / 4);
  return `${head}\n… ${text.length - head.length - tail.length} characters left out …\n${tail}`;
}

/**
 * The `{"error"}` result for a failure: {@link describeFailure}, cut by {@link boundError}, and,
 * when it came from an argument (an `AgentError` whose `details.field` `fields` maps to a
 * parameter), prefixed with that parameter's name.
 */
export function errorResult(error: unknown, fields: Readonly<Record<string, string>> = {}): { error: string } {
  const field = isAgentError(error) && typeof error.details?.field === 'string' ? fields[error.details.field] : undefined;
  const message = describeFailure(error);
  return { error: boundError(field === undefined ? message : `${field}: ${message}`) };
}

function parseObject(text: string): JsonObject | undefined {
  if (!text.startsWith('{')) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as JsonObject) : undefined;
  } catch {
    return undefined;
  }
}
