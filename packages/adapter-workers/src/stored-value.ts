import { AgentError, isAgentError } from '@org/core';

/**
 * The largest state a store in this package keeps by default (its `maxStateBytes`): 32 MiB of
 * UTF-8 JSON, the same as the agent handler's request body limit, and well inside a Worker
 * isolate's 128 MB of memory.
 */
export const DEFAULT_MAX_VALUE_BYTES = 32 * 1024 * 1024;

/** Interaction ids longer than this (in UTF-8 bytes) are refused before any storage call. */
export const MAX_ID_BYTES = 480;

const encoder = new TextEncoder();

/** The UTF-8 bytes of a state, refused with `PAYLOAD_TOO_LARGE` when over the store's limit. */
export function encodeState(id: string, state: string, maxStateBytes: number): Uint8Array {
  const bytes = encoder.encode(state);
  if (bytes.byteLength > maxStateBytes) throw tooLarge(id, bytes.byteLength, maxStateBytes);
  return bytes;
}

function tooLarge(id: string, size: number, limit: number): AgentError {
  return new AgentError('PAYLOAD_TOO_LARGE', `Interaction ${id} is ${size} bytes of JSON, more than this store's limit of ${limit} bytes`, {
    details: { interactionId: id, size, limit },
  });
}

/** Refuses an id that is empty or too long for the storage keys, naming it (shortened). */
export function checkId(id: string): void {
  if (typeof id !== 'string' || id.length === 0 || encoder.encode(id).byteLength > MAX_ID_BYTES) {
    throw new AgentError('BAD_REQUEST', `Interaction id "${String(id).slice(0, 64)}" must be 1 to ${MAX_ID_BYTES} bytes long`);
  }
}

/** Checks a store's `ttlMs` option: a positive number of milliseconds. */
export function checkTtl(factory: string, ttlMs: number): void {
  if (!(typeof ttlMs === 'number' && ttlMs > 0 && Number.isFinite(ttlMs))) {
    throw new AgentError('INTERNAL', `${factory}: ttlMs must be a positive number of milliseconds, got ${String(ttlMs)}`);
  }
}

/**
 * Splits `bytes` into pieces of at most `pieceBytes`. Each piece is a copy with its own buffer:
 * a view would drag its whole backing buffer into structured-clone storage.
 */
export function splitBytes(bytes: Uint8Array, pieceBytes: number): Uint8Array[] {
  const pieces: Uint8Array[] = [];
  for (let start = 0; start < bytes.byteLength; start += pieceBytes) {
    pieces.push(bytes.slice(start, start + pieceBytes));
  }
  return pieces;
}

/** Joins pieces into one array, checking they add up to the recorded length. */
export function joinBytes(id: string, pieces: readonly Uint8Array[], byteLength: number): Uint8Array {
  const total = pieces.reduce((sum, piece) => sum + piece.byteLength, 0);
  if (total !== byteLength) throw incomplete(id, byteLength);
  const joined = new Uint8Array(byteLength);
  let offset = 0;
  for (const piece of pieces) {
    joined.set(piece, offset);
    offset += piece.byteLength;
  }
  return joined;
}

/** The error for a record whose state pieces do not add up: never returned in part. */
export function incomplete(id: string, byteLength: number): AgentError {
  return new AgentError('STORE_ERROR', `Interaction ${id} is stored incompletely: expected ${byteLength} bytes of state`, {
    details: { interactionId: id, size: byteLength },
  });
}

/**
 * Wraps a failure of the underlying storage in a `STORE_ERROR` naming the interaction and a safe
 * word for what went wrong (see {@link failureReason}); the original error is kept as `cause`.
 */
export function storeError(id: string, action: string, error: unknown): AgentError {
  if (isAgentError(error)) return error;
  return new AgentError('STORE_ERROR', `Could not ${action} interaction ${id} (${failureReason(error)})`, {
    cause: error,
    details: { interactionId: id },
  });
}

/**
 * A short, safe word for a failure of the platform (storage, KV, RPC to an object): `overloaded`
 * or `retryable` as the Workers runtime flags its errors, a code such as `SQLITE_FULL` that leads
 * the message, or the error's class name. Never the message itself: these errors reach every
 * reader of a session and the caller, and a message may carry internal details (an object's
 * state, a storage path, a value).
 */
export function failureReason(error: unknown): string {
  if (error && typeof error === 'object') {
    const flags = error as { overloaded?: unknown; retryable?: unknown; code?: unknown; message?: unknown; name?: unknown };
    if (flags.overloaded === true) return 'overloaded';
    if (typeof flags.code === 'string' && /^[A-Za-z0-9_]{1,40}$/.test(flags.code)) return flags.code;
    const word = typeof flags.message === 'string' ? /^([A-Z][A-Z0-9_]{2,30})\b/.exec(flags.message)?.[1] : undefined;
    if (word) return word;
    if (flags.retryable === true) return 'retryable';
    if (typeof flags.name === 'string' && /^[A-Za-z]{1,40}$/.test(flags.name) && flags.name !== 'Error') return flags.name;
  }
  return 'error';
}
