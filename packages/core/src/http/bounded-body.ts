import type { AgentError } from '../errors/index.js';

/** Options of {@link readBoundedBody}. */
export interface BoundedBodyOptions {
  /** The error a body past the limit (declared or streamed) is refused with. */
  tooLarge: () => AgentError;
  /** Keep the first `limit` bytes of a longer body instead of refusing it (an error body, say). */
  truncate?: boolean;
  /** Told of each piece as it arrives (to re-arm a silence timer). */
  onRead?: () => void;
}

/**
 * An answer's bytes, at most `limit` of them: a body that declares or streams more is refused with
 * `tooLarge()` (or cut, with `truncate`) without the rest being read. A body that breaks off
 * rejects as its reader did.
 */
export async function readBoundedBody(response: Response, limit: number, options: BoundedBodyOptions): Promise<Uint8Array> {
  const declared = Number(response.headers.get('content-length') ?? Number.NaN);
  if (!options.truncate && Number.isFinite(declared) && declared > limit) {
    await response.body?.cancel().catch(() => undefined);
    throw options.tooLarge();
  }
  if (!response.body) return new Uint8Array(0);
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      options.onRead?.();
      if (total + value.byteLength > limit) {
        if (!options.truncate) throw options.tooLarge();
        chunks.push(value.subarray(0, limit - total));
        total = limit;
        break;
      }
      chunks.push(value);
      total += value.byteLength;
    }
  } catch (error) {
    void reader.cancel().catch(() => undefined);
    throw error;
  }
  if (total === limit) void reader.cancel().catch(() => undefined);
  return joinBytes(chunks, total);
}

/** The chunks as one array of `total` bytes. */
function joinBytes(chunks: Uint8Array[], total: number): Uint8Array {
  if (chunks.length === 1 && (chunks[0] as Uint8Array).byteLength === total) return chunks[0] as Uint8Array;
  const out = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}
