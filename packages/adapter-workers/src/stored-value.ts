import { AgentError, isAgentError } from '@org/core';

/**
 * The largest value a store in this package accepts by default: 32 MiB of JSON, the same as the
 * agent handler's request body limit, and well inside a Worker isolate's 128 MB of memory.
 */
export const DEFAULT_MAX_VALUE_BYTES = 32 * 1024 * 1024;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Serialises a store value to UTF-8 JSON bytes, refusing what JSON cannot hold or what is too big. */
export function encodeStoredValue(id: string, value: unknown, maxValueBytes: number): Uint8Array {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new AgentError('STORE_ERROR', `Interaction ${id} cannot be stored: its value is not JSON (${messageOf(error)})`, {
      cause: error,
      details: { interactionId: id },
    });
  }
  if (text === undefined) {
    throw new AgentError('STORE_ERROR', `Interaction ${id} cannot be stored: its value is not JSON (${typeof value})`, {
      details: { interactionId: id },
    });
  }
  const bytes = encoder.encode(text);
  if (bytes.byteLength > maxValueBytes) {
    throw new AgentError(
      'PAYLOAD_TOO_LARGE',
      `Interaction ${id} is ${bytes.byteLength} bytes of JSON, more than this store's limit of ${maxValueBytes} bytes`,
      { details: { interactionId: id, size: bytes.byteLength, limit: maxValueBytes } },
    );
  }
  return bytes;
}

/** Parses UTF-8 JSON bytes (or text) back into the stored value. */
export function decodeStoredValue(id: string, data: Uint8Array | string): unknown {
  const text = typeof data === 'string' ? data : decoder.decode(data);
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new AgentError('STORE_ERROR', `Interaction ${id} has a stored value that is not valid JSON (${text.length} characters)`, {
      cause: error,
      details: { interactionId: id },
    });
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
  const joined = new Uint8Array(byteLength);
  let offset = 0;
  for (const piece of pieces) {
    if (offset + piece.byteLength > byteLength) break;
    joined.set(piece, offset);
    offset += piece.byteLength;
  }
  if (offset !== byteLength || pieces.reduce((sum, piece) => sum + piece.byteLength, 0) !== byteLength) {
    throw new AgentError('STORE_ERROR', `Interaction ${id} is stored incompletely: expected ${byteLength} bytes`, {
      details: { interactionId: id, size: byteLength },
    });
  }
  return joined;
}

/** Wraps a failure of the underlying storage in a `STORE_ERROR` naming the interaction. */
export function storeError(id: string, action: string, error: unknown): AgentError {
  if (isAgentError(error)) return error;
  return new AgentError('STORE_ERROR', `Could not ${action} interaction ${id}: ${messageOf(error)}`, {
    cause: error,
    details: { interactionId: id },
  });
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
