import { AgentError, DEFAULT_INTERACTION_TTL_MS, isAgentError, SESSION_STATUSES } from '@org/core';

/**
 * Refuses with `STORE_ERROR` a session a store read back in a form no store writes: an unknown
 * status, an event count that is not a whole number, an interaction or owner that is not a text.
 * A record edited by hand (or by something else sharing the database) must not pass for a session
 * the runtime would then act on; a `NaN` count, say, would number the next events `NaN`.
 */
export function checkStoredSession(id: string, fields: { status: unknown; eventCount?: number; interactionId?: unknown; owner?: unknown }): void {
  const { status, eventCount, interactionId, owner } = fields;
  if (
    !(SESSION_STATUSES as readonly unknown[]).includes(status) ||
    (eventCount !== undefined && !(Number.isSafeInteger(eventCount) && eventCount >= 0)) ||
    (interactionId !== undefined && typeof interactionId !== 'string') ||
    (owner !== undefined && typeof owner !== 'string')
  ) {
    throw new AgentError('STORE_ERROR', `Session ${id} has a damaged record`);
  }
}

/**
 * A short, safe word for what went wrong: a system error code (`ECONNREFUSED`), a database error
 * code (`NOSCRIPT`, SQLSTATE `53300`) or the error's class name. Never the message, which may hold
 * a host, a query or a value.
 */
export function failureReason(error: unknown, depth = 0): string {
  if (error && typeof error === 'object') {
    // Wrappers (node-redis's ReconnectStrategyError, AggregateError of a dual-stack connect)
    // carry the telling error inside.
    const inner = (error as { socketError?: unknown; originalError?: unknown }).socketError ?? (error as { originalError?: unknown }).originalError;
    const first = inner ?? (error as { errors?: unknown[] }).errors?.[0];
    if (first && depth < 3) return failureReason(first, depth + 1);
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string' && /^[A-Za-z0-9_]{1,40}$/.test(code)) return code;
    const message = (error as { message?: unknown }).message;
    const word = typeof message === 'string' ? /^([A-Z][A-Z_]{2,30})\b/.exec(message)?.[1] : undefined;
    if (word) return word;
    const name = (error as { name?: unknown }).name;
    if (typeof name === 'string' && /^[A-Za-z]{1,40}$/.test(name) && name !== 'Error') return name;
    // Some clients' errors keep the name `Error` but have a class of their own
    // (node-redis's SocketClosedUnexpectedlyError when a connection breaks mid-command).
    const className = (error as { constructor?: { name?: unknown } }).constructor?.name;
    if (typeof className === 'string' && /^[A-Za-z]{1,60}$/.test(className) && className !== 'Error' && className !== 'Object') return className;
  }
  return 'error';
}

/**
 * A `STORE_ERROR` naming the action, the record and the database, with a safe reason word; an
 * `AgentError` passes through unchanged. The original error is kept as `cause` for server logs.
 */
export function storeFailure(database: string, action: string, error: unknown): AgentError {
  if (isAgentError(error)) return error;
  return new AgentError('STORE_ERROR', `Could not ${action} (${database}: ${failureReason(error)})`, { cause: error });
}

/** Checks a time to live given to a factory. */
export function checkTtl(ttlMs: number | undefined, factory: string): number {
  const value = ttlMs ?? DEFAULT_INTERACTION_TTL_MS;
  if (!Number.isSafeInteger(value) || value <= 0) throw new TypeError(`${factory}: \`ttlMs\` must be a positive whole number of milliseconds`);
  return value;
}

/** The error a database call that got no answer in time fails with; its reason word is `TIMEOUT`. */
export class StoreTimeoutError extends Error {
  readonly code = 'TIMEOUT';
  constructor(database: string, timeoutMs: number) {
    super(`TIMEOUT: no answer from ${database} within ${timeoutMs} ms`);
    this.name = 'StoreTimeoutError';
  }
}

/**
 * `task`, or a {@link StoreTimeoutError} after `timeoutMs` (`onTimeout` runs first): a database
 * that stops answering mid-call (a frozen server, a half-open connection) never holds a run.
 */
export async function within<T>(task: Promise<T>, database: string, timeoutMs: number, onTimeout: () => void = () => undefined): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onTimeout();
      reject(new StoreTimeoutError(database, timeoutMs));
    }, timeoutMs);
  });
  try {
    return await Promise.race([task, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
