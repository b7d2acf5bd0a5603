import { isSuspendEvent, type AgentEvent } from '../protocol/events.js';
import type { ResumeResponse } from '../protocol/resume-responses.js';
import type { StartRequest } from '../protocol/requests.js';
import type { SseEvent } from '../sse/index.js';
import type { RunTransport } from './agent-run.js';
import { AgentClientError } from './errors.js';
import { retryAfterOf, type ServerConnection } from './server-connection.js';

/** How a sessions run gets back to its event stream when the connection drops. */
export interface ReconnectOptions {
  /**
   * Reconnects in a row that may fail before the run fails with the last error (kind `network`,
   * with the last answer's `status` and `code` when the server refused). Default 8; 0 never
   * reconnects. It also bounds how often a `sessions/new` the server refused with 429 or 503 is
   * sent again (it made no session), after which the run fails with that `http` error.
   */
  maxAttempts?: number;
  /**
   * The wait before the first reconnect; each next one waits twice as long, with jitter. Default
   * 500 ms. A `Retry-After` the server sent with a 429 or 5xx is waited out when longer (up to a minute).
   * A `retry:` field on the session's stream sets the first wait after a drop instead (shorter or
   * longer, up to `maxDelayMs`), and the least wait of the reconnects after it, as in EventSource.
   */
  initialDelayMs?: number;
  /** The longest wait between two reconnects. Default 15 000 ms. */
  maxDelayMs?: number;
  /**
   * A stream that sends nothing, not even a keep-alive comment, for this long (from the request
   * on, so a server that never answers counts too) is dropped and reconnected; on the legacy
   * protocol, which cannot reconnect, the run fails with a `network` error with code `TIMEOUT`.
   * A sessions status or answer (`:resume`) that gets no answer for this long is given up on too:
   * an answer is sent again, a status fails the run. Default 45 000 ms (the server sends a comment
   * every 15 s); 0 waits forever, except for the `:cancel` of an aborted run, which nothing awaits:
   * it is given up on after this long, or after the default when 0.
   */
  idleTimeoutMs?: number;
}

/** How long a silent stream is waited on by default: three of the server's keep-alive periods. */
export const DEFAULT_IDLE_TIMEOUT_MS = 45_000;

/** Where a sessions run begins. */
export type SessionRunStart =
  | { start: StartRequest }
  | { resume: { sessionId: string; response: ResumeResponse } }
  | { attach: { sessionId: string; after: number } };

const SESSIONS = '/v1beta1/sessions/';

/**
 * A run over the sessions protocol: `sessions/new`, then the session's stream followed from a
 * cursor (reconnecting after the last event received when it drops, events de-duplicated by
 * index), `:resume` with each answer, `:cancel` on abort.
 */
export function createSessionTransport(connection: ServerConnection, begin: SessionRunStart, reconnect: ReconnectOptions = {}): RunTransport {
  const maxAttempts = reconnect.maxAttempts ?? 8;
  const initialDelayMs = reconnect.initialDelayMs ?? 500;
  const maxDelayMs = reconnect.maxDelayMs ?? 15_000;
  const idleTimeoutMs = reconnect.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  const session: { sessionId: string | undefined; cursor: number | undefined; indexes: WeakMap<AgentEvent, number> } = {
    sessionId: 'start' in begin ? undefined : 'resume' in begin ? begin.resume.sessionId : begin.attach.sessionId,
    // A resumed session's cursor is read from its status before the answer goes in.
    cursor: 'attach' in begin ? begin.attach.after : 'start' in begin ? -1 : undefined,
    indexes: new WeakMap(),
  };
  const path = (suffix: string) => `${SESSIONS}${encodeURIComponent(session.sessionId ?? '')}${suffix}`;

  /**
   * The reconnection time the session's stream asked for with `retry:` (WHATWG SSE), clamped to
   * `[0, maxDelayMs]` (and a minute): the wait before the first reconnect after a drop, and the
   * least wait before the next ones. It outlasts the connection that sent it, as in EventSource.
   */
  let reconnectTimeMs: number | undefined;

  /**
   * Counts failures in a row; waits before the next try, or throws once they are used up. A
   * stream's backoff (`streamed`) also waits the server's reconnection time.
   */
  const createBackoff = (signal: AbortSignal, streamed = false) => {
    let failures = 0;
    return {
      reset: () => {
        failures = 0;
      },
      async failed(error: AgentClientError): Promise<void> {
        failures += 1;
        if (signal.aborted) throw error;
        if (failures > maxAttempts) {
          if (maxAttempts === 0) throw error;
          const tries = maxAttempts === 1 ? 'once' : `${maxAttempts} times`;
          // Whatever the last failure was, the run failed because the connection could not be had back.
          throw new AgentClientError('network', `${error.message} (reconnected ${tries}, giving up)`, {
            ...(error.status === undefined ? {} : { status: error.status }),
            ...(error.code === undefined ? {} : { code: error.code }),
            cause: error,
          });
        }
        await sleep(delayAfter(failures, error, streamed ? reconnectTimeMs : undefined), signal);
        if (signal.aborted) throw error;
      },
    };
  };

  /**
   * The wait after the `failures`-th failure in a row: doubling, with jitter, or the server's
   * `Retry-After` when longer. A stream's `retry:` replaces the first wait (shorter or longer) and
   * is the least of the next ones, so a `retry: 0` does not use up the attempts at once.
   */
  const delayAfter = (failures: number, error: AgentClientError, reconnectTime?: number): number => {
    let backoff: number;
    if (reconnectTime !== undefined && failures === 1) backoff = reconnectTime;
    else backoff = Math.max(reconnectTime ?? 0, Math.min(maxDelayMs, initialDelayMs * 2 ** (failures - 1)) * (0.5 + Math.random() / 2));
    return Math.max(backoff, retryAfterOf(error) ?? 0);
  };

  /** Sends `sessions/new`, again after a 429 or 503: a refusal made no session, so asking again cannot make two. */
  const create = async (start: StartRequest, signal: AbortSignal): Promise<Response> => {
    for (let refusals = 0; ; refusals += 1) {
      try {
        // Not aborted midway: a session the server created must be known, to be cancelled.
        return await connection.send('POST', `${SESSIONS}new`, { body: start });
      } catch (error) {
        const refused = error instanceof AgentClientError && error.kind === 'http' && (error.status === 429 || error.status === 503);
        if (!refused || refusals >= maxAttempts || signal.aborted) throw error;
        await sleep(delayAfter(refusals + 1, error), signal);
        if (signal.aborted) throw error;
      }
    }
  };

  /**
   * A call that answers at once (status, resume): given up on, and its request aborted, when no
   * answer comes within the idle timeout, so a server that never answers cannot hold the run.
   */
  const sendWithin = async (method: 'GET' | 'POST', target: string, request: { body?: object; signal: AbortSignal }): Promise<Response> => {
    if (!(idleTimeoutMs > 0)) return connection.send(method, target, request);
    const call = new AbortController();
    const stop = (): void => call.abort();
    if (request.signal.aborted) stop();
    else request.signal.addEventListener('abort', stop, { once: true });
    try {
      return await connection.send(method, target, { ...request, signal: call.signal, timeoutMs: idleTimeoutMs });
    } catch (error) {
      stop();
      throw error;
    } finally {
      request.signal.removeEventListener('abort', stop);
    }
  };

  const status = async (signal: AbortSignal): Promise<{ status: string; eventCount: number }> => {
    const body = await connection.json(await sendWithin('GET', path('/status'), { signal }));
    if (typeof body.status !== 'string' || !Number.isSafeInteger(body.eventCount)) {
      throw new AgentClientError('protocol', `The status of session ${session.sessionId} has no status and eventCount`);
    }
    return body as { status: string; eventCount: number };
  };

  const resume = async (response: ResumeResponse, signal: AbortSignal): Promise<void> => {
    const backoff = createBackoff(signal);
    let retried = false;
    for (;;) {
      try {
        await sendWithin('POST', path(':resume'), { body: response, signal });
        return;
      } catch (error) {
        // The earlier try reached the server before its answer was lost: the session runs already.
        if (retried && error instanceof AgentClientError && error.code === 'CONFLICT') return;
        if (!isTransient(error)) throw error;
        await backoff.failed(error);
        retried = true;
      }
    }
  };

  /** Waiting events (questions, pauses) the session went on from: a replay shows them, nobody answers them. */
  const history = new WeakSet<AgentEvent>();

  /** An attached run looks once at where the session stands when its stream stays quiet from the start. */
  let unprobed = 'attach' in begin;

  /** The highest index this run delivered: an event the session repeats is not delivered again. */
  let delivered = -1;

  /** The session's events after the cursor until its segment ends, reconnecting when the stream drops. */
  const follow = async function* (signal: AbortSignal): AsyncGenerator<AgentEvent> {
    const backoff = createBackoff(signal, true);
    let replayedEnd = false;
    // A waiting event is where the session stands only when nothing follows it: it is held until
    // the next message says whether it was answered (another event) or is waiting (the end, or
    // a quiet stream while the session's status says it waits there: some servers keep the stream
    // of a waiting session open).
    let held: AgentEvent | undefined;
    const deliver = (event: AgentEvent): AgentEvent => {
      delivered = Math.max(delivered, session.indexes.get(event) ?? delivered);
      return event;
    };
    for (;;) {
      let done = false;
      let again = false;
      // Its own signal, so that leaving while a read is pending (a held question handed over)
      // releases the connection at once.
      const stream = new AbortController();
      const stop = (): void => stream.abort();
      signal.addEventListener('abort', stop, { once: true });
      let messages: AsyncIterator<SseEvent> | undefined;
      let next: Promise<IteratorResult<SseEvent>> | undefined;
      try {
        const cursor = session.cursor ?? -1;
        const response = await connection.send('GET', path(`?alt=sse${cursor >= 0 ? `&after=${cursor}` : ''}`), {
          signal: stream.signal,
          stream: true,
          ...(idleTimeoutMs > 0 ? { timeoutMs: idleTimeoutMs } : {}),
        });
        messages = connection
          .messages(response, {
            // An id only counts on the event that carries one; a stream cut mid-event is a drop.
            carryId: false,
            discardIncompleteEvent: true,
            ...(idleTimeoutMs > 0 ? { idleTimeoutMs } : {}),
          })
          [Symbol.asyncIterator]();
        let quietMs = SETTLE_MS;
        for (;;) {
          next ??= messages.next();
          if (!held && unprobed && !(await settlesWithin(next, quietMs))) {
            // An attached run whose cursor is at the question the session waits on gets an idle
            // stream on servers that keep it open: read that last event again so the app can answer it.
            unprobed = false;
            const current = await status(signal);
            const last = current.eventCount - 1;
            if (last >= 0 && (session.cursor ?? -1) >= last && (current.status === 'suspended' || current.status === 'paused')) {
              session.cursor = last - 1;
              again = true;
              break;
            }
            continue;
          }
          if (held && !(await settlesWithin(next, quietMs))) {
            // Nothing follows the waiting event for now: ask the session whether it waits there.
            const current = await status(signal);
            if (current.status === 'cancelled') throw new AgentClientError('run', `Session ${session.sessionId} was cancelled`, { code: 'ABORTED' });
            const last = current.eventCount - 1;
            const heldIndex = session.indexes.get(held) ?? -1;
            if (last === heldIndex && current.status !== 'running') {
              yield deliver(held);
              return;
            }
            if (last > heldIndex) {
              history.add(held);
              yield deliver(held);
              held = undefined;
            } else {
              // Running with nothing after it: just suspended, or just answered. Ask again later.
              quietMs = Math.min(quietMs * 2, MAX_SETTLE_MS);
            }
            continue;
          }
          const result = await next;
          next = undefined;
          if (result.done) break;
          const message = result.value;
          if (message.retry !== undefined) reconnectTimeMs = Math.min(message.retry, maxDelayMs, MAX_RECONNECT_TIME_MS);
          if (message.event === 'done') {
            done = true;
            break;
          }
          if (message.event === 'start' || message.data.length === 0 || isEnvelope(message.data)) continue;
          const index = message.id === undefined || message.id === '' ? undefined : Number(message.id);
          if (index !== undefined) {
            if (!/^\d+$/.test(message.id as string) || !Number.isSafeInteger(index)) {
              throw new AgentClientError('protocol', `The session sent an event with id "${message.id}", not an index`);
            }
            if (index <= (session.cursor ?? -1)) continue;
            if (index > (session.cursor ?? -1) + 1) throw new AgentClientError('network', `The session stream skipped to event ${index}`);
          }
          const event = connection.parse(message.data);
          // Without ids, each agent event is the next index after the cursor.
          session.cursor = index ?? (session.cursor ?? -1) + 1;
          backoff.reset();
          unprobed = false;
          quietMs = SETTLE_MS;
          if (held) {
            history.add(held);
            yield deliver(held);
            held = undefined;
          }
          // A newer server's event of a type this client does not know keeps its place in the count, unseen.
          if (event === undefined) continue;
          session.indexes.set(event, session.cursor);
          if (waits(event)) held = event;
          else {
            yield deliver(event);
            if (event.type === 'complete' || event.type === 'error') return;
          }
        }
      } catch (error) {
        if (signal.aborted) return;
        if (!isTransient(error)) throw error;
        await backoff.failed(error);
        continue;
      } finally {
        signal.removeEventListener('abort', stop);
        // Whatever is still in flight (a read, or a request given up on) is let go of.
        stream.abort();
        if (next) await next.catch(() => undefined);
        await messages?.return?.().catch(() => undefined);
      }
      if (signal.aborted) return;
      if (again) continue;
      if (done && held) {
        yield deliver(held);
        return;
      }
      try {
        if (!done) throw new AgentClientError('network', `The event stream of session ${session.sessionId} ended before its segment did`);
        // The server ended the stream where the session stops, but this follower saw no end: it
        // attached at or after it. Its last event says how it stopped (the question it waits on,
        // the result): read it again so the run can answer or settle, unless this run delivered
        // it already and it said nothing of the kind.
        const current = await status(signal);
        if (current.status === 'cancelled') throw new AgentClientError('run', `Session ${session.sessionId} was cancelled`, { code: 'ABORTED' });
        const last = current.eventCount - 1;
        if (current.status === 'running' || (session.cursor ?? -1) < last) {
          throw new AgentClientError('network', `The event stream of session ${session.sessionId} ended while it runs`);
        }
        if (replayedEnd || last < 0 || delivered >= last) throw new AgentClientError('protocol', `Session ${session.sessionId} is ${current.status}, but its events do not say why`);
        replayedEnd = true;
        session.cursor = last - 1;
      } catch (error) {
        if (signal.aborted) return;
        if (!isTransient(error)) throw error;
        await backoff.failed(error);
      }
    }
  };

  /**
   * Best effort, awaited by nobody: a server that never answers is given up on after the idle
   * timeout (the default one when the idle timeout is off), its request aborted, so the connection
   * (and, in Node, the process) is not held.
   */
  const cancel = (): void => {
    if (session.sessionId === undefined) return;
    const call = new AbortController();
    const timeoutMs = idleTimeoutMs > 0 && Number.isFinite(idleTimeoutMs) ? idleTimeoutMs : DEFAULT_IDLE_TIMEOUT_MS;
    void connection.send('POST', path(':cancel'), { signal: call.signal, timeoutMs }).catch(() => call.abort());
  };

  return {
    session,
    history,
    first: 'start' in begin ? begin : 'resume' in begin ? { resume: { interactionId: begin.resume.sessionId, response: begin.resume.response } } : undefined,
    interactionId: undefined,
    async *open(request, signal) {
      if (request && 'start' in request) {
        const body = await connection.json(await create(request.start, signal));
        if (typeof body.sessionId !== 'string' || body.sessionId.length === 0) {
          throw new AgentClientError('protocol', 'sessions/new answered without a sessionId');
        }
        session.sessionId = body.sessionId;
        if (signal.aborted) {
          cancel();
          return;
        }
      } else if (request) {
        session.cursor ??= (await status(signal)).eventCount - 1;
        await resume(request.resume.response, signal);
      }
      yield* follow(signal);
    },
    cancel,
  };
}

/** How long a stream may stay quiet after a waiting event before the session's status is asked. */
const SETTLE_MS = 200;
/** The longest reconnection time a stream's `retry:` can ask for; longer is read as this. */
const MAX_RECONNECT_TIME_MS = 60_000;
const MAX_SETTLE_MS = 5_000;

/** Waits `ms`, or less when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}

/** Whether `promise` settles within `ms`. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const quiet = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true, () => true), quiet]);
  } finally {
    clearTimeout(timer);
  }
}

/** `{}` and `{"sessionId": ...}` frame the stream: they are not agent events and are not counted. */
function isEnvelope(data: string): boolean {
  if (data.length > 1024) return false;
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return false;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  return keys.length === 0 || (keys.length === 1 && keys[0] === 'sessionId');
}

/** Events a session can wait at: a question, a pause, an error it was saved after. */
function waits(event: AgentEvent): boolean {
  return isSuspendEvent(event) || event.type === 'paused' || (event.type === 'error' && event.interactionId !== undefined);
}

/** A dropped connection, or a server or proxy that is restarting. */
function isTransient(error: unknown): error is AgentClientError {
  return error instanceof AgentClientError && (error.kind === 'network' || (error.kind === 'http' && (error.status === 429 || (error.status ?? 0) >= 500)));
}
