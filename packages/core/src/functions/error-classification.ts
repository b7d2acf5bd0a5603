import type { JsonObject } from '../protocol/content.js';

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
  return failure.metadata ? { error: failure.error, metadata: failure.metadata } : { error: failure.error };
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
