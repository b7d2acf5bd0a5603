import { EventChannel } from '../channel/event-channel.js';
import { messageOf } from '../errors/message-of.js';
import { isSuspendEvent, type AgentEvent, type AgentResult, type SuspendEvent } from '../protocol/events.js';
import type { ResumeResponse } from '../protocol/resume-responses.js';
import type { StartRequest } from '../protocol/requests.js';
import { AgentClientError } from './errors.js';

/** One request of a run: the start, or the answer to a suspend. */
export type RunSegmentRequest =
  | { start: StartRequest }
  | { resume: { interactionId: string; response: ResumeResponse } };

/**
 * Opens one segment of a run and yields its events until the stream ends (on a suspend, a pause,
 * or the end of the run). The remote client POSTs to the server; a local run calls core directly.
 */
export type RunSegmentOpener = (request: RunSegmentRequest, signal: AbortSignal) => AsyncIterable<AgentEvent>;

/** Answers a suspend event (`waitForInput` → `{input}`, `waitForChoice` → `{selected: {ids}}`, `queryConsent` → `{consent}`). */
export type SuspendHandler = (event: SuspendEvent, run: AgentRun) => ResumeResponse | Promise<ResumeResponse>;

/** Options of one run. */
export interface AgentRunOptions {
  /**
   * Answers suspends. Without it, the run waits at each suspend until `run.respond()` is called,
   * which suits UIs that render the suspend event from `run.events` and answer from a form.
   */
  onSuspend?: SuspendHandler;
  /** Stops the run, like `run.abort()`. */
  signal?: AbortSignal;
}

/**
 * A run in progress, remote or local alike. Suspends do not end it: the handle answers them and
 * continues from the next stream, so `events` is one uninterrupted sequence for the app.
 */
export interface AgentRun {
  /**
   * Every event in order, suspend events included (render them, then `respond()`). Single
   * consumer. Ends after `complete`, `error` or `paused`; throws an {@link AgentClientError} when
   * the transport fails. A reader 1,000 events behind holds the run: the server's stream is read
   * no further until it has caught up by half (nothing is dropped). A run whose `events` nobody
   * reads, or a reader that left (`break`), holds nothing back.
   */
  readonly events: AsyncIterable<AgentEvent>;
  /**
   * The run's result on `complete`. Rejects with an {@link AgentClientError}: `run` for an
   * `error` event, `paused` (with `interactionId`), `aborted`, `network`, `http`, `protocol`.
   */
  readonly result: Promise<AgentResult>;
  /** The suspend event waiting for an answer, if any. */
  readonly pending: SuspendEvent | undefined;
  /** The last interaction id the run was saved under (changes at every suspend or pause). */
  readonly interactionId: string | undefined;
  /**
   * The server session the run lives in (protocol `sessions`), once the server created it: follow
   * it again later, e.g. after a reload, with `client.attachRun(sessionId, { after: lastEventIndex })`.
   */
  readonly sessionId: string | undefined;
  /**
   * The session index of the last event the app took from `events` (`-1` before the first, the
   * `after` of an attached run); `undefined` outside a session.
   */
  readonly lastEventIndex: number | undefined;
  /** Answers the pending suspend. Throws when nothing is pending. */
  respond(response: ResumeResponse): void;
  /**
   * Stops the run; `result` rejects with kind `aborted` ("Run was stopped"). A server session the
   * run has not seen end is cancelled too (best effort, `sessions/{id}:cancel`).
   */
  abort(): void;
}

/**
 * Drives a run segment by segment through `open`, answering suspends in between.
 *
 * @example
 * ```ts
 * const run = createAgentRun(openSegment, { start: { segments: [{ type: 'text', text: 'Hi' }] } });
 * for await (const event of run.events) console.log(event.type);
 * ```
 */
export function createAgentRun(open: RunSegmentOpener, first: RunSegmentRequest, options: AgentRunOptions = {}): AgentRun {
  return driveRun({ open: (request, signal) => open(request ?? first, signal), first, interactionId: 'resume' in first ? first.resume.interactionId : undefined }, options);
}

/** Where a run's segments come from, for {@link driveRun}. */
export interface RunTransport {
  /** Opens a segment; `undefined` follows the run where it is (attaching to a session). */
  open(request: RunSegmentRequest | undefined, signal: AbortSignal): AsyncIterable<AgentEvent>;
  first: RunSegmentRequest | undefined;
  interactionId: string | undefined;
  /** The session, its cursor, and the index of each event, for a run that lives in a server session. */
  session?: { readonly sessionId: string | undefined; readonly cursor: number | undefined; readonly indexes: WeakMap<AgentEvent, number> };
  /** Waiting events the run already went on from (a replayed session): shown, never answered. */
  history?: WeakSet<AgentEvent>;
  /** Stops the run on the server, best effort, when the app aborts before it ended. */
  cancel?(): void;
}

/** The run handle over any transport: answers suspends between segments, one event sequence for the app. */
export function driveRun(transport: RunTransport, options: AgentRunOptions = {}): AgentRun {
  const channel = new EventChannel<AgentEvent>();
  const controller = new AbortController();
  let pending: SuspendEvent | undefined;
  let interactionId = transport.interactionId;
  // The index of the last event the app took from `events`: the client may have read further.
  let lastEventIndex = transport.session?.cursor;
  const session = transport.session;
  // The answer to the pending suspend: delivered to `answer`, or kept in `early` when the app
  // answers before the segment's stream has closed.
  let answer: ((response: ResumeResponse) => void) | undefined;
  let early: ResumeResponse | undefined;
  let answered = false;
  let settled = false;
  let resolveResult!: (result: AgentResult) => void;
  let rejectResult!: (error: AgentClientError) => void;
  const result = new Promise<AgentResult>((resolve, reject) => {
    resolveResult = resolve;
    rejectResult = reject;
  });
  // The app may only read `events`; an unobserved rejection must not crash it.
  result.catch(() => undefined);

  // Backpressure: the events pushed and not yet taken by the app. While the app reads `events`
  // and is this far behind, the run stops reading the server's stream (the server, or TCP,
  // waits) until the app has caught up by half. An app that does not read `events` (it awaits
  // `result` with `onSuspend`) is not waited for: what it leaves unread is kept, as before.
  let unread = 0;
  let readers = 0;
  let caughtUp: (() => void) | undefined;
  const wake = (): void => {
    const resolve = caughtUp;
    caughtUp = undefined;
    resolve?.();
  };
  const push = (event: AgentEvent): void => {
    if (channel.closed) return;
    unread += 1;
    channel.push(event);
  };
  /** Waits, when the app reads `events` and is `MAX_UNREAD_EVENTS` behind, until it catches up, leaves, or the run stops. */
  const paced = async (): Promise<void> => {
    while (readers > 0 && unread >= MAX_UNREAD_EVENTS && !controller.signal.aborted) {
      await new Promise<void>((resolve) => {
        caughtUp = resolve;
      });
    }
  };
  const events: AsyncIterable<AgentEvent> = {
    [Symbol.asyncIterator]() {
      const iterator = channel[Symbol.asyncIterator]();
      let left = false;
      readers += 1;
      const take = (next: IteratorResult<AgentEvent, undefined>): IteratorResult<AgentEvent, undefined> => {
        if (next.done) return next;
        unread -= 1;
        if (caughtUp && unread <= MAX_UNREAD_EVENTS / 2) wake();
        if (session) lastEventIndex = session.indexes.get(next.value) ?? lastEventIndex;
        return next;
      };
      return {
        next: () => iterator.next().then(take),
        return: () => {
          // A reader that left is waited for no more (another may come and take what is left).
          if (!left) {
            left = true;
            readers -= 1;
            wake();
          }
          return iterator.return ? iterator.return() : Promise.resolve({ done: true, value: undefined });
        },
      };
    },
  };

  const stopped = new Promise<never>((_, reject) => {
    controller.signal.addEventListener('abort', () => reject(aborted()), { once: true });
  });
  stopped.catch(() => undefined);

  const succeed = (value: AgentResult): void => {
    if (settled) return;
    settled = true;
    resolveResult(value);
  };
  const fail = (error: AgentClientError, closeWith?: AgentClientError): void => {
    if (settled) return;
    settled = true;
    rejectResult(error);
    channel.close(closeWith);
  };

  const handle: AgentRun = {
    events,
    result,
    get pending() {
      return pending;
    },
    get interactionId() {
      return interactionId;
    },
    get sessionId() {
      return transport.session?.sessionId;
    },
    get lastEventIndex() {
      return lastEventIndex;
    },
    respond(response) {
      if (!pending || answered) throw new Error('respond(): the run is not waiting for an answer');
      answered = true;
      if (answer) answer(response);
      else early = response;
    },
    abort() {
      if (controller.signal.aborted) return;
      controller.abort();
      wake();
      if (!settled) transport.cancel?.();
      fail(aborted());
      channel.close();
    },
  };

  const signal = options.signal;
  if (signal) {
    if (signal.aborted) handle.abort();
    else {
      const onAbort = (): void => handle.abort();
      signal.addEventListener('abort', onAbort, { once: true });
      // A signal shared by many runs (one per page) keeps no ended run alive, and collects no listeners.
      const release = (): void => signal.removeEventListener('abort', onAbort);
      void result.then(release, release);
    }
  }

  const drive = async (): Promise<void> => {
    let request = transport.first;
    for (;;) {
      let suspend: SuspendEvent | undefined;
      for await (const event of transport.open(request, controller.signal)) {
        if (controller.signal.aborted) return;
        if (transport.history?.has(event)) {
          push(event);
          if (unread >= MAX_UNREAD_EVENTS) await paced();
          continue;
        }
        if (isSuspendEvent(event)) {
          // Set before the app sees the event, so a handler can read `pending` and `respond()`.
          pending = event;
          answered = false;
          early = undefined;
          if (event.interactionId !== undefined) interactionId = event.interactionId;
        }
        push(event);
        if (event.type === 'complete') {
          succeed(event.result);
          channel.close();
          return;
        }
        if (event.type === 'error') {
          // An error that names an interaction was saved first (a transient model failure).
          if (event.interactionId !== undefined) interactionId = event.interactionId;
          const kind = event.interactionId === undefined ? 'run' : 'paused';
          fail(new AgentClientError(kind, event.message, { ...withId(event.interactionId), ...withCode(event.code) }));
          channel.close();
          return;
        }
        if (event.type === 'paused') {
          if (event.interactionId !== undefined) interactionId = event.interactionId;
          fail(new AgentClientError('paused', event.message, { ...withId(event.interactionId), status: event.statusCode }));
          channel.close();
          return;
        }
        if (isSuspendEvent(event)) {
          suspend = event;
          break;
        }
        // The stream is read no further while the app is far behind.
        if (unread >= MAX_UNREAD_EVENTS) {
          await paced();
          if (controller.signal.aborted) return;
        }
      }
      if (controller.signal.aborted) return;
      if (!suspend) throw new AgentClientError('protocol', 'The stream ended without a result, an error or a suspend');
      if (suspend.interactionId === undefined) {
        throw new AgentClientError('protocol', `The ${suspend.type} event carries no interactionId to resume with`);
      }
      const id = suspend.interactionId;
      const response = await Promise.race([waitForAnswer(suspend), stopped]);
      pending = undefined;
      request = { resume: { interactionId: id, response } };
    }
  };

  const waitForAnswer = (event: SuspendEvent): Promise<ResumeResponse> => {
    const onSuspend = options.onSuspend;
    if (onSuspend) {
      return (async () => {
        try {
          return await onSuspend(event, handle);
        } catch (error) {
          throw new AgentClientError('aborted', `The suspend handler failed: ${messageOf(error)}`, { code: 'ABORTED', cause: error });
        }
      })();
    }
    if (early !== undefined) {
      const response = early;
      early = undefined;
      return Promise.resolve(response);
    }
    return new Promise<ResumeResponse>((resolve) => {
      answer = (response) => {
        answer = undefined;
        resolve(response);
      };
    });
  };

  drive().catch((error: unknown) => {
    if (controller.signal.aborted) return;
    const failure = error instanceof AgentClientError ? error : new AgentClientError('network', messageOf(error), { cause: error });
    fail(failure, failure);
  });
  return handle;
}

/** How many events the app may leave unread in `run.events` before the run stops reading the server's stream. */
export const MAX_UNREAD_EVENTS = 1000;

function aborted(): AgentClientError {
  return new AgentClientError('aborted', 'Run was stopped', { code: 'ABORTED' });
}

function withId(interactionId: string | undefined): { interactionId?: string } {
  return interactionId === undefined ? {} : { interactionId };
}

function withCode(code: string | undefined): { code?: string } {
  return code === undefined ? {} : { code };
}
