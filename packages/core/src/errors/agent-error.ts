/**
 * The closed set of error codes. Every failure the runtime reports carries one of these; callers
 * branch on `code`, never on message text.
 */
export const ERROR_CODES = [
  'BAD_REQUEST',
  'UNAUTHENTICATED',
  'FORBIDDEN',
  'NOT_FOUND',
  'METHOD_NOT_ALLOWED',
  'INTERACTION_NOT_FOUND',
  'CONFLICT',
  'PAYLOAD_TOO_LARGE',
  'UNSUPPORTED_MEDIA_TYPE',
  'RATE_LIMITED',
  'MODEL_ERROR',
  'MODEL_UNAVAILABLE',
  'UPSTREAM_ERROR',
  'INVALID_HISTORY',
  'STORE_ERROR',
  'ABORTED',
  'TIMEOUT',
  'INTERNAL',
  'NOT_IMPLEMENTED',
] as const;

/** One of {@link ERROR_CODES}. */
export type ErrorCode = (typeof ERROR_CODES)[number];

/** HTTP status for each code; adapters never invent statuses of their own. */
export const HTTP_STATUS_BY_CODE: Readonly<Record<ErrorCode, number>> = {
  BAD_REQUEST: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  INTERACTION_NOT_FOUND: 404,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  MODEL_ERROR: 502,
  MODEL_UNAVAILABLE: 503,
  UPSTREAM_ERROR: 502,
  INVALID_HISTORY: 500,
  STORE_ERROR: 500,
  ABORTED: 499,
  TIMEOUT: 504,
  INTERNAL: 500,
  NOT_IMPLEMENTED: 501,
};

/** The JSON body of an error response: `{"error": {"code", "message", "details"?}}`. */
export interface ErrorBody {
  error: { code: ErrorCode; message: string; status: number; details?: Record<string, unknown> };
}

/** Options of {@link AgentError}. */
export interface AgentErrorOptions {
  cause?: unknown;
  /** Extra machine-readable facts, e.g. `{ path: "start.segments[2]" }` or a provider status. */
  details?: Record<string, unknown>;
}

/**
 * The one error class of the runtime.
 *
 * @example
 * ```ts
 * throw new AgentError('BAD_REQUEST', 'start.segments: required', { details: { path: 'start.segments' } });
 * ```
 */
export class AgentError extends Error {
  override readonly name = 'AgentError';
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, options: AgentErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options.details;
  }

  /** The HTTP status this error maps to. */
  get status(): number {
    return HTTP_STATUS_BY_CODE[this.code];
  }

  /** The wire JSON shape of this error. */
  toJSON(): ErrorBody {
    return {
      error: {
        code: this.code,
        message: this.message,
        status: this.status,
        ...(this.details ? { details: this.details } : {}),
      },
    };
  }
}

/** Whether `value` is an {@link AgentError} (also across package copies). */
export function isAgentError(value: unknown): value is AgentError {
  return value instanceof AgentError || (value instanceof Error && value.name === 'AgentError' && 'code' in value);
}

/**
 * Normalises anything thrown into an {@link AgentError}, keeping the original as `cause`.
 * An abort becomes `ABORTED`; everything unknown becomes `INTERNAL`.
 */
export function toAgentError(value: unknown): AgentError {
  if (isAgentError(value)) return value;
  if (value instanceof Error && (value.name === 'AbortError' || value.name === 'TimeoutError')) {
    return new AgentError(value.name === 'TimeoutError' ? 'TIMEOUT' : 'ABORTED', value.message || 'Aborted', { cause: value });
  }
  const message = value instanceof Error ? value.message : String(value);
  return new AgentError('INTERNAL', message, { cause: value });
}
