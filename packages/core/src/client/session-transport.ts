import { isSuspendEvent, type AgentEvent } from '../protocol/events.js';
import type { ResumeResponse } from '../protocol/resume-responses.js';
import type { StartRequest } from '../protocol/requests.js';
import type { RunTransport } from './agent-run.js';
import { AgentClientError } from './errors.js';
import { parseEvent, type ServerConnection } from './server-connection.js';

/** How a sessions run gets back to its event stream when the connection drops. */
export interface ReconnectOptions {
  /** Reconnects in a row that may fail before the run fails with the last error (kind `network`). Default 8; 0 never reconnects. */
  maxAttempts?: number;
  /** The wait before the first reconnect; each next one waits twice as long, with jitter. Default 500 ms. */
  initialDelayMs?: number;
  /** The longest wait between two reconnects. Default 15 000 ms. */
  maxDelayMs?: number;
}

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
  const session: { sessionId: string | undefined; cursor: number | undefined; indexes: WeakMap<AgentEvent, number> } = {
    sessionId: 'start' in begin ? undefined : 'resume' in begin ? begin.resume.sessionId : begin.attach.sessionId,
    // A resumed session's cursor is read from its status before the answer goes in.
    cursor: 'attach' in begin ? begin.attach.after : 'start' in begin ? -1 : undefined,
    indexes: new WeakMap(),
  };
  const path = (suffix: string) => `${SESSIONS}${encodeURIComponent(session.sessionId ?? '')}${suffix}`;

  /** Counts failures in a row; waits before the next try, or throws once they are used up. */
  const createBackoff = (signal: AbortSignal) => {
    let failures = 0;
    return {
      reset: () => {
        failures = 0;
      },
      async failed(error: AgentClientError): Promise<void> {
        failures += 1;
        if (signal.aborted) throw error;
        if (failures > maxAttempts) {
          const tries = maxAttempts === 1 ? 'once' : `${maxAttempts} times`;
          throw new AgentClientError(error.kind, maxAttempts === 0 ? error.message : `${error.message} (reconnected ${tries}, giving up)`, {
            ...(error.status === undefined ? {} : { status: error.status }),
            ...(error.code === undefined ? {} : { code: error.code }),
            cause: error,
          });
        }
        const delay = Math.min(maxDelayMs, initialDelayMs * 2 ** (failures - 1)) * (0.5 + Math.random() / 2);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, delay);
          signal.addEventListener('abort', done, { once: true });
          function done() {
            clearTimeout(timer);
            signal.removeEventListener('abort', done);
            resolve();
          }
        });
        if (signal.aborted) throw error;
      },
    };
  };

  const status = async (signal: AbortSignal): Promise<{ status: string; eventCount: number }> => {
    const body = await connection.json(await connection.send('GET', path('/status'), { signal }));
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
        await connection.send('POST', path(':resume'), { body: response, signal });
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

  /** The session's events after the cursor until its segment ends, reconnecting when the stream drops. */
  const follow = async function* (signal: AbortSignal): AsyncGenerator<AgentEvent> {
    const backoff = createBackoff(signal);
    let replayedEnd = false;
    // A waiting event is where the session stands only when nothing follows it: it is held until
    // the next message says whether it was answered (another event) or is waiting (the end).
    let held: AgentEvent | undefined;
    for (;;) {
      let done = false;
      try {
        const cursor = session.cursor ?? -1;
        const response = await connection.send('GET', path(`?alt=sse${cursor >= 0 ? `&after=${cursor}` : ''}`), { signal, stream: true });
        // The parser repeats the last id on an event that has none: an id equal to the previous one is no id.
        let previousId: string | undefined;
        for await (const message of connection.messages(response)) {
          if (message.event === 'done') {
            done = true;
            break;
          }
          if (message.event === 'start' || message.data.length === 0) continue;
          const numbered = message.id !== undefined && message.id !== previousId;
          previousId = message.id;
          const index = numbered ? Number(message.id) : undefined;
          if (index !== undefined) {
            if (!Number.isSafeInteger(index)) throw new AgentClientError('protocol', `The session sent an event with id "${message.id}", not an index`);
            if (index <= (session.cursor ?? -1)) continue;
            if (index > (session.cursor ?? -1) + 1) throw new AgentClientError('network', `The session stream skipped to event ${index}`);
          }
          const event = parseEvent(message.data);
          if (index !== undefined) {
            session.cursor = index;
            session.indexes.set(event, index);
          }
          backoff.reset();
          if (held) {
            history.add(held);
            yield held;
            held = undefined;
          }
          if (waits(event)) held = event;
          else {
            yield event;
            if (event.type === 'complete' || event.type === 'error') return;
          }
        }
      } catch (error) {
        if (signal.aborted) return;
        if (!isTransient(error)) throw error;
        await backoff.failed(error);
        continue;
      }
      if (signal.aborted) return;
      if (done && held) {
        yield held;
        return;
      }
      try {
        if (!done) throw new AgentClientError('network', `The event stream of session ${session.sessionId} ended before its segment did`);
        // The server ended the stream where the session stops, but this follower saw no end: it
        // attached at or after it. Its last event says how it stopped (the question it waits on,
        // the result): read it again so the run can answer or settle.
        const current = await status(signal);
        if (current.status === 'cancelled') throw new AgentClientError('run', `Session ${session.sessionId} was cancelled`, { code: 'ABORTED' });
        const last = current.eventCount - 1;
        if (current.status === 'running' || (session.cursor ?? -1) < last) {
          throw new AgentClientError('network', `The event stream of session ${session.sessionId} ended while it runs`);
        }
        if (replayedEnd || last < 0) throw new AgentClientError('protocol', `Session ${session.sessionId} is ${current.status}, but its events do not say why`);
        replayedEnd = true;
        session.cursor = last - 1;
      } catch (error) {
        if (signal.aborted) return;
        if (!isTransient(error)) throw error;
        await backoff.failed(error);
      }
    }
  };

  const cancel = (): void => {
    if (session.sessionId !== undefined) void connection.send('POST', path(':cancel')).catch(() => undefined);
  };

  return {
    session,
    history,
    first: 'start' in begin ? begin : 'resume' in begin ? { resume: { interactionId: begin.resume.sessionId, response: begin.resume.response } } : undefined,
    interactionId: undefined,
    async *open(request, signal) {
      if (request && 'start' in request) {
        // Not aborted midway: a session the server created must be known, to be cancelled.
        const body = await connection.json(await connection.send('POST', `${SESSIONS}new`, { body: request.start }));
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

/** Events a session can wait at: a question, a pause, an error it was saved after. */
function waits(event: AgentEvent): boolean {
  return isSuspendEvent(event) || event.type === 'paused' || (event.type === 'error' && event.interactionId !== undefined);
}

/** A dropped connection, or a server or proxy that is restarting. */
function isTransient(error: unknown): error is AgentClientError {
  return error instanceof AgentClientError && (error.kind === 'network' || (error.kind === 'http' && (error.status === 429 || (error.status ?? 0) >= 500)));
}
