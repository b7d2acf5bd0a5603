import { ERROR_CODES, type ErrorCode } from '../errors/agent-error.js';

/** Why a run handle failed. */
export type AgentClientErrorKind =
  /** The server could not be reached, or the connection broke mid-stream. */
  | 'network'
  /** The server answered with a non-2xx status; `status` and `code` say which. */
  | 'http'
  /** The run ended with an `error` event; the message is the server's. */
  | 'run'
  /** The run stopped on a transient model failure and was saved; resume it with `interactionId`. */
  | 'paused'
  /** The run was stopped by `abort()` or the caller's signal. */
  | 'aborted'
  /** The server sent something that is not the agent protocol. */
  | 'protocol';

/** Options of {@link AgentClientError}. */
export interface AgentClientErrorOptions {
  status?: number;
  /** The server's code; anything outside the closed table is dropped. */
  code?: string;
  interactionId?: string;
  cause?: unknown;
}

/**
 * A failure seen by the client: the rejection of `run.result`, and what `run.events` throws when
 * the stream cannot go on.
 *
 * @example
 * ```ts
 * try {
 *   await run.result;
 * } catch (error) {
 *   if (error instanceof AgentClientError && error.kind === 'paused') saveForLater(error.interactionId);
 * }
 * ```
 */
export class AgentClientError extends Error {
  override readonly name = 'AgentClientError';
  readonly kind: AgentClientErrorKind;
  /** HTTP status, for `http` errors. */
  readonly status: number | undefined;
  /**
   * The error code from the closed table (e.g. `INTERACTION_NOT_FOUND`, `FORBIDDEN`,
   * `RATE_LIMITED`): the server's for `http`, `run` and `paused` errors, or for a refusal without
   * one the code of its status (404 `NOT_FOUND`); `ABORTED` for `aborted` errors; `TIMEOUT` for a
   * `network` error about a server that went silent; `PAYLOAD_TOO_LARGE` for a `protocol` error
   * about an event over `limits.maxEventBytes`. Other `network` and `protocol` errors have none.
   */
  readonly code: ErrorCode | undefined;
  /** Where the run was saved, for `paused` errors: resume it with `client.resumeRun()`. */
  readonly interactionId: string | undefined;

  constructor(kind: AgentClientErrorKind, message: string, options: AgentClientErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.kind = kind;
    this.status = options.status;
    this.code = toErrorCode(options.code);
    this.interactionId = options.interactionId;
  }
}

function toErrorCode(code: string | undefined): ErrorCode | undefined {
  return code !== undefined && (ERROR_CODES as readonly string[]).includes(code) ? (code as ErrorCode) : undefined;
}
