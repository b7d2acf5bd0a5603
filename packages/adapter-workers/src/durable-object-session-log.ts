import { AgentError, DEFAULT_INTERACTION_TTL_MS, isAgentError, type SessionInfo, type SessionLog } from '@org/core';
import type { SessionObject } from './session-object.js';
import { checkTtl, DEFAULT_MAX_VALUE_BYTES, failureReason } from './stored-value.js';

/** Session ids longer than this (in UTF-8 bytes) are refused before any call to an object. */
const MAX_SESSION_ID_BYTES = 480;

/** Appends up to this many bytes travel to the object as arrays; bigger ones as a byte stream. */
export const INLINE_TRANSFER_BYTES = 1024 * 1024;

/** One reply of the object to a read carries up to this many bytes (Workers RPC refuses more than 32 MiB). */
export const READ_BUDGET_BYTES = 8 * 1024 * 1024;

/** Options of {@link createDurableObjectSessionLog}. */
export interface DurableObjectSessionLogOptions {
  /** Sessions not written for this long read as absent, and an alarm in their object removes them. Default 7 days. */
  ttlMs?: number;
  /** The largest event kept, in UTF-8 bytes; a bigger one is refused with `PAYLOAD_TOO_LARGE`. Default 32 MiB. */
  maxEventBytes?: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * A `SessionLog` on Durable Objects: each session lives in its own {@link SessionObject}
 * (`namespace.idFromName(sessionId)`), which keeps the events in its storage and runs every
 * operation on the session alone, so appends get distinct indexes in order and status updates
 * are atomic, from any number of Workers and objects at once.
 *
 * Events are stored whole (split across storage keys when big, never truncated) and travel as a
 * byte stream above 1 MiB. A read returns one reply of at most 8 MiB (or one bigger event alone),
 * fewer events than asked when they are big, as the port allows: a replay of any length stays
 * within the RPC limit and within the reader's memory.
 *
 * @example
 * ```ts
 * const log = createDurableObjectSessionLog(env.SESSIONS);
 * await log.create('s-1', { interactionId: 's-1' });
 * await log.append('s-1', ['{"thought":{"text":"hm"}}']); // 0
 * ```
 */
export function createDurableObjectSessionLog(
  namespace: DurableObjectNamespace<SessionObject>,
  options: DurableObjectSessionLogOptions = {},
): SessionLog {
  const ttlMs = options.ttlMs ?? DEFAULT_INTERACTION_TTL_MS;
  const maxEventBytes = options.maxEventBytes ?? DEFAULT_MAX_VALUE_BYTES;
  checkTtl('createDurableObjectSessionLog', ttlMs);
  const objectFor = (id: string) => {
    checkSessionId(id);
    return namespace.get(namespace.idFromName(id));
  };
  return {
    async create(id, info) {
      const object = objectFor(id);
      const created: { interactionId: string; owner?: string } = { interactionId: info.interactionId };
      if (info.owner !== undefined) created.owner = info.owner;
      return attempt(id, 'create', () => object.logCreate(id, created, ttlMs));
    },
    async get(id) {
      const object = objectFor(id);
      const found = await attempt(id, 'read', () => object.logGet(id));
      return found ?? undefined;
    },
    async append(id, events) {
      const object = objectFor(id);
      const encoded = encodeEvents(id, events, maxEventBytes);
      const first = await attempt(id, 'append to', () => object.logAppend(id, ttlMs, encoded.lengths, encoded.payload()));
      if (first === null) throw new AgentError('NOT_FOUND', `Session ${id} not found`, { details: { sessionId: id } });
      return first;
    },
    async read(id, after, limit) {
      const object = objectFor(id);
      // One reply per call, as the port allows: the events that fit in its budget, or one bigger
      // event alone. Filling up to `limit` instead would hold `limit` events of any size at once
      // (500 for a reader's replay), far past the 128 MB of an isolate.
      return attempt(id, 'read', async () => {
        const reply = await object.logRead(id, after, limit, READ_BUDGET_BYTES);
        if (!reply.largeNext) return reply.events.map((bytes) => decoder.decode(bytes));
        const stream = await object.logReadEvent(id, after + 1);
        return stream ? [await new Response(stream).text()] : [];
      });
    },
    async update(id, change, from) {
      const object = objectFor(id);
      const sent: { status: SessionInfo['status']; interactionId?: string | null } = { status: change.status };
      if (change.interactionId !== undefined) sent.interactionId = change.interactionId;
      return attempt(id, 'update', () => object.logUpdate(id, sent, from ? [...from] : null, ttlMs));
    },
  };
}

/** Events as UTF-8, checked against the size limit, with the payload that carries them to the object. */
export function encodeEvents(
  id: string,
  events: readonly string[],
  maxEventBytes: number,
): { lengths: number[]; bytes: Uint8Array[]; payload(): Uint8Array[] | ReadableStream<Uint8Array> } {
  const bytes = events.map((event) => encoder.encode(event));
  let total = 0;
  for (const event of bytes) {
    if (event.byteLength > maxEventBytes) {
      throw new AgentError('PAYLOAD_TOO_LARGE', `Session ${id}: an event of ${event.byteLength} bytes is more than this log's limit of ${maxEventBytes} bytes`, {
        details: { sessionId: id, size: event.byteLength, limit: maxEventBytes },
      });
    }
    total += event.byteLength;
  }
  return {
    lengths: bytes.map((event) => event.byteLength),
    bytes,
    payload: () => (total <= INLINE_TRANSFER_BYTES ? bytes : new Blob(bytes).stream()),
  };
}

/** Splits the bytes of an append's payload back into its events. */
export async function decodePayload(lengths: readonly number[], payload: Uint8Array[] | ReadableStream<Uint8Array>): Promise<Uint8Array[]> {
  if (!Array.isArray(lengths) || !lengths.every((length) => Number.isSafeInteger(length) && length >= 0)) {
    throw new Error('the lengths of the events are not byte counts');
  }
  if (Array.isArray(payload)) {
    if (payload.length !== lengths.length || payload.some((event, index) => event.byteLength !== lengths[index])) {
      throw new Error('the events received do not match their lengths');
    }
    return payload;
  }
  const joined = new Uint8Array(await new Response(payload).arrayBuffer());
  const total = lengths.reduce((sum, length) => sum + length, 0);
  if (joined.byteLength !== total) throw new Error(`received ${joined.byteLength} of ${total} bytes of events`);
  const events: Uint8Array[] = [];
  let offset = 0;
  for (const length of lengths) {
    events.push(joined.slice(offset, offset + length));
    offset += length;
  }
  return events;
}

/** Refuses a session id that is empty or too long for an object name, naming it (shortened). */
export function checkSessionId(id: string): void {
  if (typeof id !== 'string' || id.length === 0 || encoder.encode(id).byteLength > MAX_SESSION_ID_BYTES) {
    throw new AgentError('BAD_REQUEST', `Session id "${String(id).slice(0, 64)}" must be 1 to ${MAX_SESSION_ID_BYTES} bytes long`);
  }
}

async function attempt<T>(id: string, action: string, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (error) {
    if (isAgentError(error)) throw error;
    // The reason, never the message: it goes to every reader of the session (see failureReason).
    throw new AgentError('STORE_ERROR', `Could not ${action} session ${id} (${failureReason(error)})`, {
      cause: error,
      details: { sessionId: id },
    });
  }
}
