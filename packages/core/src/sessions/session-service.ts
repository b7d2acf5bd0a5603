import { nextTurn, queuedReader } from '../channel/index.js';
import { AgentError } from '../errors/index.js';
import { claimInteraction, DEFAULT_LEASE_MS, readInteractionLabel, type InteractionClaim } from '../interactions/index.js';
import type { AgentPorts, EventBus, SessionInfo, SessionLog, SessionStatus } from '../ports/index.js';
import { isSuspendEvent } from '../protocol/events.js';
import type { StartRequest } from '../protocol/requests.js';
import type { ResumeResponse } from '../protocol/resume-responses.js';
import type { RunEvent } from '../protocol/run-events.js';
import type { GenerateContentRequest } from '../protocol/gemini.js';
import { toWireEventJson } from '../protocol/wire.js';
import { publicError } from '../http/redact.js';
import { createRequestSerializer } from '../model/request-json.js';
import { readInteractionState } from '../run/interaction-state.js';
import { resumeClaimed } from '../run/resume.js';
import type { RunOptions } from '../run/run-options.js';
import { run } from '../run/start.js';

/** What one request brings to a session: the caller's ports and who the caller is. */
export interface SessionContext {
  ports: AgentPorts;
  owner?: string;
  /** Run options (model, mode, groups, …) for the segment this request starts. */
  runOptions?: Omit<RunOptions, 'signal' | 'owner' | 'interactionId' | 'sessionId'>;
}

/** Options of {@link createSessionService}. */
export interface SessionServiceOptions {
  log: SessionLog;
  bus: EventBus;
  /**
   * The ports for a segment nobody asked for: a session whose instance died, picked up by this
   * one. There is no caller, so no caller's token.
   */
  pickUpContext?: () => SessionContext | Promise<SessionContext>;
  /** A reader that heard nothing from a running session for this long checks it is still alive. Default 15 000 ms. */
  livenessMs?: number;
  /** How often a running segment checks the log for a cancel it may have missed. Default 2 000 ms. */
  cancelCheckMs?: number;
  /**
   * Most segments this instance runs at once. Past it, a start or a resume is refused with
   * `RATE_LIMITED`, and a session whose instance died is left for another instance to pick up.
   * Default: no limit.
   */
  maxRunning?: number;
}

/** One event of a session: its index in the log and its wire JSON. */
export interface SessionEvent {
  index: number;
  json: string;
}

/** Why a session request was refused. */
export type SessionRefusal = AgentError;

/** Events a reader takes in one array at most: one log read, or one slice of a burst handed over. */
const BATCH = 500;

/** Events a segment writes to the log in one append at most. */
const JOURNAL_BATCH = 256;
/** Characters of handed-over events a reader may hold ahead of the log before it reads them from the log instead. */
const MAX_EARLY_CHARS = 8 * 1024 * 1024;
/** Bus messages a reader keeps unread before it folds them into the latest index and an end. */
const MAX_INBOX = 256;

/** Folds bus messages into the ones a reader acts on: the latest announced index and an end. */
function compactInbox(inbox: string[]): void {
  let latest = -1;
  let ended = false;
  for (const message of inbox) {
    if (message.startsWith('e:')) latest = Math.max(latest, Number(message.slice(2)));
    else if (message === 'end') ended = true;
  }
  inbox.length = 0;
  if (latest >= 0) inbox.push(`e:${latest}`);
  if (ended) inbox.push('end');
}

/** Waits before the segment's end writes again what a failing log left out. */
const LOG_RETRY_DELAYS_MS = [100, 500, 2000];

/** The channel of a session on the bus. */
const channelOf = (sessionId: string) => `session:${sessionId}`;

/**
 * The session protocol on a shared log and bus: sessions are started, resumed, cancelled and
 * read from any instance. The instance that runs a segment appends each event to the log first,
 * then announces it on the bus; readers subscribe first, replay the log, then follow the
 * announcements, reading the log again for anything they missed, so no event is lost or repeated.
 */
export interface SessionService {
  /**
   * Creates a session and starts its first segment here, in the background. The id is fresh
   * unless `options.sessionId` names one (a platform that routes by session id picks it first);
   * an id already taken is `CONFLICT`.
   */
  start(request: StartRequest, context: SessionContext, options?: { sessionId?: string }): Promise<string>;
  /**
   * Answers a suspended (or continues a paused) session and starts the next segment here. A
   * running session whose instance died is picked up. Refusals are thrown as `AgentError`s:
   * `NOT_FOUND`, `FORBIDDEN`, `CONFLICT` (not waiting for an answer), `INTERACTION_NOT_FOUND`.
   */
  resume(sessionId: string, response: ResumeResponse, context: SessionContext): Promise<void>;
  /** Stops a session from any instance. `NOT_FOUND`, `FORBIDDEN` (another owner's), or `CONFLICT` when it already ended. */
  cancel(sessionId: string, context: SessionContext): Promise<void>;
  /** The session's status and event count. `NOT_FOUND` when there is none. */
  status(sessionId: string): Promise<SessionInfo>;
  /**
   * The session's events after `after`: the log, then live ones until the session stops running
   * (it ends at once for a session that is not running). `NOT_FOUND` (thrown on the first
   * `next()`) when there is none, `BAD_REQUEST` when `after` is not an integer of -1 or more.
   */
  events(sessionId: string, after: number, signal?: AbortSignal): AsyncGenerator<SessionEvent>;
  /**
   * The same events as {@link SessionService.events}, in arrays of those that were ready together
   * (never empty): a transport that writes many events at once pays for one wait per array
   * instead of one per event.
   */
  eventBatches(sessionId: string, after: number, signal?: AbortSignal): AsyncGenerator<SessionEvent[]>;
  /** The session an interaction belongs to, if it was saved by a session. */
  sessionOf(interactionId: string, ports: AgentPorts): Promise<string | undefined>;
  /**
   * Stops the segment this instance runs for `sessionId` without cancelling the session: it stays
   * resumable from its last checkpoint (a legacy client that left).
   */
  interrupt(sessionId: string): void;
}

/**
 * Creates the session service over a log and a bus.
 *
 * @example
 * ```ts
 * const sessions = createSessionService({ log: createMemorySessionLog(), bus: createMemoryEventBus() });
 * const id = await sessions.start({ segments: [{ type: 'text', text: 'Hi' }] }, { ports });
 * for await (const { index, json } of sessions.events(id, -1)) console.log(index, json);
 * ```
 */
export function createSessionService(options: SessionServiceOptions): SessionService {
  const { log, bus } = options;
  const livenessMs = options.livenessMs ?? 15_000;
  const cancelCheckMs = options.cancelCheckMs ?? 2_000;
  /** Segments running in this process, with their local readers (fed without the bus). */
  const local = new Map<string, LocalSegment>();
  const maxRunning = options.maxRunning;
  if (maxRunning !== undefined && !(maxRunning >= 1)) throw new TypeError(`maxRunning must be a number of at least 1, got ${maxRunning}`);
  /** Segments about to start here: counted with the running ones until they are launched. */
  let starting = 0;
  /**
   * Holds a place for a segment that is about to start, or refuses with `RATE_LIMITED` when this
   * instance runs its most already. The place is given back (the returned function) once the
   * segment is launched, from when it counts as running, or did not start.
   */
  const reserve = (): (() => void) => {
    if (maxRunning !== undefined && local.size + starting >= maxRunning) {
      throw new AgentError('RATE_LIMITED', `This server is running its most sessions at once (${maxRunning}); try again shortly`, {
        details: { maxRunning },
      });
    }
    starting += 1;
    let held = true;
    return () => {
      if (held) starting -= 1;
      held = false;
    };
  };

  const launch = (
    sessionId: string,
    controller: AbortController,
    events: AsyncGenerator<RunEvent>,
    context: SessionContext,
    takenOver?: string,
  ): void => {
    const segment: LocalSegment = { controller, readers: new Set(), interrupted: false };
    if (takenOver !== undefined) segment.takenOver = takenOver;
    local.set(sessionId, segment);
    void runSegment(sessionId, segment, events, context).finally(() => {
      if (local.get(sessionId) === segment) local.delete(sessionId);
    });
  };

  /**
   * Appends a segment's events to the log and announces them, in batches: what the segment takes
   * from its run goes to local readers ahead of the log (a burst at once, a long one every
   * JOURNAL_BATCH events), then to the log in appends of JOURNAL_BATCH events at most, each
   * announced on the bus in one message. They are numbered here: while a segment runs, its
   * instance is the log's only writer.
   */
  const createEventJournal = (sessionId: string, channel: string, segment: LocalSegment) => {
    let nextIndex = 0;
    /** Events not yet in the log, in order; the first is event `pendingStart`. */
    let pending: string[] = [];
    let pendingStart = 0;
    /** Events not yet handed to local readers. */
    let handOver: SessionEvent[] = [];
    let chain: Promise<void> = Promise.resolve();
    /** Why the last write left events out of the log, while it still lacks them. */
    let failure: unknown;
    /**
     * Appends one slice that starts at event `start`. When the append fails, the log is read back
     * where the slice would be: what it holds of the slice (an append it applied, or began to, and
     * then reported as failed: a timeout after the write) counts as done, so a retry never writes
     * an event twice. How many events of the slice landed.
     */
    const append = async (batch: string[], start: number): Promise<number> => {
      try {
        const first = await log.append(sessionId, batch);
        await bus.publish(channel, `e:${first + batch.length - 1}`).catch(() => undefined);
        return batch.length;
      } catch (error) {
        const landed = await landedOf(batch, start);
        if (landed > 0) await bus.publish(channel, `e:${start + landed - 1}`).catch(() => undefined);
        if (landed === batch.length) return landed;
        failure = error;
        return landed;
      }
    };
    /** How many of `batch`'s events the log holds from event `start` on, the same texts in the same order. */
    const landedOf = async (batch: string[], start: number): Promise<number> => {
      let landed = 0;
      try {
        while (landed < batch.length) {
          const stored = await log.read(sessionId, start + landed - 1, batch.length - landed);
          if (stored.length === 0) break;
          for (const json of stored) {
            if (json !== batch[landed]) return landed;
            landed += 1;
          }
        }
      } catch {
        // The log cannot say: what it holds is taken to be none of it.
      }
      return landed;
    };
    const write = async (): Promise<void> => {
      const events = pending;
      const start = pendingStart;
      pending = [];
      pendingStart = start + events.length;
      // Slices go to the log one after another, so each announces a later index than the last.
      for (let from = 0; from < events.length; from += JOURNAL_BATCH) {
        const batch = events.length <= JOURNAL_BATCH ? events : events.slice(from, from + JOURNAL_BATCH);
        const landed = await append(batch, start + from);
        if (landed < batch.length) {
          // The log stays a prefix of the run's events, with no gap: what it lacks is written first
          // by the next write (the next burst, or the segment's end).
          pending = events.slice(from + landed).concat(pending);
          pendingStart = start + from + landed;
          return;
        }
      }
      failure = undefined;
    };
    const schedule = (): Promise<void> => {
      if (handOver.length > 0) {
        const events = handOver;
        handOver = [];
        for (const reader of segment.readers) reader(events);
      }
      chain = chain.then(write).catch((error: unknown) => {
        failure = error;
      });
      return chain;
    };
    return {
      async start() {
        nextIndex = (await log.get(sessionId))?.eventCount ?? 0;
        pendingStart = nextIndex;
      },
      add(json: string) {
        const index = nextIndex;
        nextIndex += 1;
        pending.push(json);
        handOver.push({ index, json });
        // A long burst goes out in slices.
        if (pending.length >= JOURNAL_BATCH) void schedule();
      },
      /** The burst is complete: what was added goes to local readers now, and to the log next. */
      release() {
        if (handOver.length > 0) void schedule();
      },
      /** Writes everything added; a log still failing after a few tries fails it. */
      async flush() {
        await schedule();
        for (const waitMs of LOG_RETRY_DELAYS_MS) {
          if (failure === undefined) return;
          await new Promise((resolve) => setTimeout(resolve, waitMs));
          await schedule();
        }
        if (failure !== undefined) {
          const error = failure;
          failure = undefined;
          throw error;
        }
      },
    };
  };

  const runSegment = async (sessionId: string, segment: LocalSegment, events: AsyncGenerator<RunEvent>, context: SessionContext) => {
    const channel = channelOf(sessionId);
    const subscription = await bus
      .subscribe(channel, (message) => {
        if (message === 'cancel') segment.controller.abort(new AgentError('ABORTED', 'Session was cancelled'));
      })
      .catch(() => undefined);
    // The bus is best effort: the log is the truth, checked now and then.
    const poll = setInterval(() => {
      void log.get(sessionId).then((info) => {
        if (info?.status === 'cancelled') segment.controller.abort(new AgentError('ABORTED', 'Session was cancelled'));
      }, () => undefined);
    }, cancelCheckMs);
    const serializeRequest = createRequestSerializer();
    const journal = createEventJournal(sessionId, channel, segment);
    let final: { status: SessionStatus; interactionId?: string } | undefined;
    let sawError = false;
    let lastInteraction: string | undefined;
    let superseded = false;
    try {
      await journal.start();
      const readQueued = queuedReader(events);
      for (;;) {
        // What the run has queued is taken at once; else its next event and, after a turn of the
        // event loop, the burst that came with it: one wait per burst, not one per event.
        let event = readQueued?.();
        if (event === undefined) {
          const next = await events.next();
          if (next.done) break;
          event = next.value;
          if (readQueued) await nextTurn();
        }
        do {
          if (event.type === 'error' && event.code === 'CONFLICT') {
            // Another instance took the run over after this one stalled past its lease: it writes from now on.
            superseded = true;
            continue;
          }
          // A request carries the whole history: each of its contents is serialised once per segment.
          const json =
            event.type === 'sendRequest'
              ? `{"sendRequest":{"model":${JSON.stringify(event.model)},"body":${serializeRequest(event.body as GenerateContentRequest)}}}`
              : toWireEventJson(event);
          if (isSuspendEvent(event)) {
            // The status changes before anyone can see the event, so an immediate resume is accepted.
            lastInteraction = event.interactionId;
            await journal.flush();
            await log.update(sessionId, { status: 'suspended', interactionId: event.interactionId }, ['running']);
            final = { status: 'suspended', interactionId: event.interactionId };
          } else if (event.type === 'error') {
            sawError = true;
            if (event.interactionId !== undefined) lastInteraction = event.interactionId;
          } else if (event.type === 'complete') {
            final = { status: event.result.success ? 'completed' : 'failed' };
          }
          journal.add(json);
        } while ((event = readQueued?.()) !== undefined);
        journal.release();
      }
      await journal.flush();
    } catch (error) {
      // The events are the run's; anything thrown here is the log or the bus failing (its words go
      // to every reader, without secrets or server paths).
      sawError = true;
      const failure = publicError(error);
      journal.add(JSON.stringify({ error: { message: failure.message, code: failure.code } }));
      await journal.flush().catch(() => undefined);
    } finally {
      clearInterval(poll);
      await subscription?.close().catch(() => undefined);
    }
    if (superseded) return;
    if (segment.controller.signal.aborted && !segment.interrupted) {
      // Cancelled: the run is over for good, including a question it saved while being cancelled.
      const info = await log.get(sessionId).catch(() => undefined);
      for (const id of new Set([info?.interactionId, lastInteraction])) {
        if (id !== undefined) await context.ports.store.delete(id).catch(() => undefined);
      }
    } else if (final?.status !== 'suspended') {
      const error = sawError && lastInteraction !== undefined && final?.status !== 'failed';
      let status: SessionStatus = final?.status ?? (error || segment.interrupted ? 'paused' : sawError ? 'failed' : 'completed');
      if (status === 'failed' && sawError && segment.takenOver !== undefined) {
        // A run taken over without its owner (their credentials stay with them) that failed here is
        // not the run's failure: while its saved state is there, the owner's `:resume` continues it.
        const saved = await readInteractionLabel(context.ports.store, segment.takenOver).catch(() => undefined);
        if (saved !== undefined) {
          status = 'paused';
          lastInteraction = segment.takenOver;
        }
      }
      await log
        .update(sessionId, status === 'paused' && lastInteraction !== undefined ? { status, interactionId: lastInteraction } : { status }, ['running'])
        .catch(() => undefined);
    }
    await bus.publish(channel, 'end').catch(() => undefined);
  };

  const info = async (sessionId: string): Promise<SessionInfo> => {
    const found = await log.get(sessionId);
    if (!found) throw new AgentError('NOT_FOUND', 'Session not found', { details: { sessionId } });
    return found;
  };

  const claimFor = async (sessionId: string, found: SessionInfo, context: SessionContext, leaseMs?: number): Promise<InteractionClaim> => {
    if (found.interactionId === undefined) throw new AgentError('CONFLICT', `Session ${sessionId} has nothing to resume`);
    const claimed = await claimInteraction(context.ports.store, found.interactionId, {
      ...(context.owner === undefined ? {} : { owner: context.owner }),
      ...(leaseMs === undefined ? {} : { leaseMs }),
    });
    if (claimed.status === 'claimed') return claimed.claim;
    if (claimed.status === 'forbidden') throw new AgentError('FORBIDDEN', `Session ${sessionId} belongs to another user`);
    if (claimed.status === 'missing') throw new AgentError('INTERACTION_NOT_FOUND', `Session ${sessionId} has no saved state to resume`);
    throw new AgentError('CONFLICT', `Session ${sessionId} is already running`);
  };

  const continueOn = (sessionId: string, claim: InteractionClaim, response: ResumeResponse, context: SessionContext, unasked = false): void => {
    const controller = new AbortController();
    const runOptions: RunOptions = { ...context.runOptions, signal: controller.signal, sessionId };
    if (context.owner !== undefined) runOptions.owner = context.owner;
    launch(sessionId, controller, resumeClaimed(claim, response, context.ports, runOptions), context, unasked ? claim.id : undefined);
  };

  /**
   * Takes over a running session whose instance died (its lease ran out); `true` when this instance
   * now runs it. With `caller` (its owner asked to resume it) the segment runs with the caller's
   * ports, token included, and answer, as any resume does (the answer counts only if the dead
   * instance had not recorded one yet); without, with the pick-up context and no answer.
   */
  const pickUp = async (sessionId: string, found: SessionInfo, caller?: { context: SessionContext; response: ResumeResponse }): Promise<boolean> => {
    if (found.status !== 'running' || local.has(sessionId)) return false;
    if (!caller && !options.pickUpContext) return false;
    // Full here: a caller hears so; a session nobody asked for is left to another instance.
    let release: () => void;
    try {
      release = reserve();
    } catch (error) {
      if (caller) throw error;
      return false;
    }
    try {
      const context = caller?.context ?? (await (options.pickUpContext as () => SessionContext | Promise<SessionContext>)());
      const claimContext: SessionContext = found.owner === undefined ? context : { ...context, owner: found.owner };
      let claim: InteractionClaim;
      try {
        claim = await claimFor(sessionId, found, claimContext, context.runOptions?.leaseMs ?? DEFAULT_LEASE_MS);
      } catch {
        return false;
      }
      if (caller === undefined && awaitsAnswer(claim)) {
        // Its instance died after taking the owner's answer and before saving it: only the owner can
        // give it again, so the session goes back to waiting for them.
        await claim.release().catch(() => undefined);
        await log.update(sessionId, { status: 'suspended', interactionId: claim.id }, ['running']).catch(() => undefined);
        await bus.publish(channelOf(sessionId), 'end').catch(() => undefined);
        return false;
      }
      continueOn(sessionId, claim, caller?.response ?? {}, claimContext, caller === undefined);
      return true;
    } finally {
      release();
    }
  };

  /** The reading behind `events` and `eventBatches`: each array holds what was ready together. */
  async function* batches(sessionId: string, after: number, signal?: AbortSignal): AsyncGenerator<SessionEvent[]> {
    // Events are numbered from the cursor on: any other cursor would number them wrongly.
    if (!Number.isSafeInteger(after) || after < -1) {
      throw new AgentError('BAD_REQUEST', `after: expected an event index (an integer of -1 or more), got ${String(after).slice(0, 40)}`, {
        details: { path: 'after' },
      });
    }
    await info(sessionId);
    let cursor = after;
    // Subscribe first, then read the log: an event appended in between is announced to us.
    const inbox: string[] = [];
    const early: SessionEvent[] = [];
    /** Characters of event JSON in `early`; past MAX_EARLY_CHARS they are dropped, and read from the log instead. */
    let earlyChars = 0;
    let droppedEarly = false;
    const takeEarly = (count: number): void => {
      for (let at = 0; at < count; at += 1) earlyChars -= (early[at] as SessionEvent).json.length;
      early.splice(0, count);
    };
    let wake: (() => void) | undefined;
    const rouse = () => {
      const resolve = wake;
      wake = undefined;
      resolve?.();
    };
    const subscription = await bus.subscribe(channelOf(sessionId), (message) => {
      // A reader that does not keep up hears many announcements: only the latest index and an end matter.
      if (inbox.length >= MAX_INBOX) compactInbox(inbox);
      inbox.push(message);
      rouse();
    });
    // A segment running in this process hands its events over directly, ahead of the log.
    const reader = (events: readonly SessionEvent[]) => {
      for (const event of events) {
        early.push(event);
        earlyChars += event.json.length;
      }
      if (earlyChars > MAX_EARLY_CHARS) {
        // A reader far behind a segment running here (a slow client) does not hold its events in
        // this process: the log has them, and is read once the reader asks for more.
        early.length = 0;
        earlyChars = 0;
        droppedEarly = true;
      }
      rouse();
    };
    signal?.addEventListener('abort', rouse, { once: true });
    let attached: LocalSegment | undefined;
    // A log may return fewer events than asked (a byte budget): only an empty read is the end.
    const drain = async function* (): AsyncGenerator<SessionEvent[]> {
      for (;;) {
        const read = await log.read(sessionId, cursor, BATCH);
        if (read.length === 0) return;
        const batch = new Array<SessionEvent>(read.length);
        for (let at = 0; at < read.length; at += 1) {
          cursor += 1;
          batch[at] = { index: cursor, json: read[at] as string };
        }
        yield batch;
      }
    };
    try {
      yield* drain();
      for (;;) {
        const current = await log.get(sessionId);
        if (!current || current.status !== 'running' || signal?.aborted) {
          // A segment that just ended may have appended after our last read.
          yield* drain();
          return;
        }
        const segment = local.get(sessionId);
        if (segment !== attached) {
          attached?.readers.delete(reader);
          segment?.readers.add(reader);
          attached = segment;
        }
        for (;;) {
          // Handed-over events the log already gave us are dropped; the ones right after the cursor go out together.
          let skip = 0;
          while (skip < early.length && (early[skip] as SessionEvent).index <= cursor) skip += 1;
          // A long burst goes out in slices of BATCH, as the log's are read.
          const most = skip + BATCH;
          let take = skip;
          while (take < early.length && take < most && (early[take] as SessionEvent).index === cursor + 1 + take - skip) take += 1;
          if (take > skip) {
            const batch = early.slice(skip, take);
            takeEarly(take);
            cursor = (batch[batch.length - 1] as SessionEvent).index;
            yield batch;
            if (take === most) continue;
          } else if (skip > 0) {
            takeEarly(skip);
          }
          let behind = early.length > 0 || droppedEarly;
          droppedEarly = false;
          let ended = false;
          for (const message of inbox.splice(0)) {
            if (message.startsWith('e:')) behind ||= Number(message.slice(2)) > cursor;
            else if (message === 'end') ended = true;
          }
          let stalled = false;
          if (behind) {
            // Events handed over ahead of the log with a gap before them: wait until the log has the gap.
            const before = cursor;
            yield* drain();
            stalled = cursor === before && early.length > 0;
          }
          if (ended || signal?.aborted) break;
          if ((early.length > 0 && !stalled) || inbox.length > 0) continue;
          const heard = await new Promise<boolean>((resolve) => {
            const timer = setTimeout(() => resolve(false), livenessMs);
            wake = () => {
              clearTimeout(timer);
              resolve(true);
            };
          });
          if (!heard) {
            // Quiet for a long time: if its instance died, this one takes it over.
            if (!local.has(sessionId)) await pickUp(sessionId, current);
            break;
          }
        }
      }
    } finally {
      attached?.readers.delete(reader);
      signal?.removeEventListener('abort', rouse);
      await subscription.close().catch(() => undefined);
    }
  }

  return {
    async start(request, context, startOptions) {
      const release = reserve();
      try {
        const sessionId = startOptions?.sessionId ?? crypto.randomUUID();
        const created = await log.create(sessionId, {
          interactionId: sessionId,
          ...(context.owner === undefined ? {} : { owner: context.owner }),
        });
        if (!created) throw new AgentError('CONFLICT', `Session ${sessionId} already exists`);
        const controller = new AbortController();
        const runOptions: RunOptions = { ...context.runOptions, signal: controller.signal, interactionId: sessionId, sessionId };
        if (context.owner !== undefined) runOptions.owner = context.owner;
        launch(sessionId, controller, run(request, context.ports, runOptions), context);
        return sessionId;
      } finally {
        release();
      }
    },

    async resume(sessionId, response, context) {
      const found = await info(sessionId);
      if (found.owner !== undefined && found.owner !== context.owner) {
        throw new AgentError('FORBIDDEN', `Session ${sessionId} belongs to another user`);
      }
      if (found.status === 'running') {
        if (await pickUp(sessionId, found, { context, response })) return;
        throw new AgentError('CONFLICT', `Session not in suspended status (current: ${found.status})`);
      }
      if (found.status !== 'suspended' && found.status !== 'paused') {
        throw new AgentError('CONFLICT', `Session not in suspended status (current: ${found.status})`);
      }
      const release = reserve();
      try {
        const claim = await claimFor(sessionId, found, context, context.runOptions?.leaseMs);
        // A log that fails here leaves the session waiting, and its record free to resume at once.
        const moved = await log.update(sessionId, { status: 'running' }, [found.status]).catch(async (error: unknown) => {
          await claim.release().catch(() => undefined);
          throw error;
        });
        if (!moved) {
          await claim.release().catch(() => undefined);
          throw new AgentError('CONFLICT', `Session ${sessionId} changed while resuming; try again`);
        }
        continueOn(sessionId, claim, response, context);
      } finally {
        release();
      }
    },

    async cancel(sessionId, context) {
      const found = await info(sessionId);
      // Cancelling ends the run and drops its saved state: only its owner may, as only they may resume it.
      if (found.owner !== undefined && found.owner !== context.owner) {
        throw new AgentError('FORBIDDEN', `Session ${sessionId} belongs to another user`);
      }
      const cancelled = await log.update(sessionId, { status: 'cancelled' }, ['running', 'suspended', 'paused']);
      if (!cancelled) {
        const current = (await log.get(sessionId))?.status ?? found.status;
        throw new AgentError('CONFLICT', `Session already in terminal state (${current})`);
      }
      local.get(sessionId)?.controller.abort(new AgentError('ABORTED', 'Session was cancelled'));
      await bus.publish(channelOf(sessionId), 'cancel').catch(() => undefined);
      // Its saved state goes now, whatever the phase: a running segment finds its record gone at its
      // next write and stops, and a segment whose instance died leaves nothing anyone could resume.
      if (found.interactionId !== undefined) await context.ports.store.delete(found.interactionId).catch(() => undefined);
    },

    status: info,

    async *events(sessionId, after, signal) {
      for await (const batch of batches(sessionId, after, signal)) yield* batch;
    },

    eventBatches: batches,

    async sessionOf(interactionId, ports) {
      const label = await readInteractionLabel(ports.store, interactionId);
      return label?.sessionId;
    },

    interrupt(sessionId) {
      const segment = local.get(sessionId);
      if (!segment) return;
      segment.interrupted = true;
      segment.controller.abort(new AgentError('ABORTED', 'The client left'));
    },
  };
}

/** Whether a claimed record is a question still waiting for the user's answer. */
function awaitsAnswer(claim: InteractionClaim): boolean {
  try {
    return readInteractionState(claim.id, claim.stateText).kind === 'suspend';
  } catch {
    return false;
  }
}

interface LocalSegment {
  controller: AbortController;
  /** The saved run this instance took over on its own (no caller asked): its interaction id. */
  takenOver?: string;
  readers: Set<(events: readonly SessionEvent[]) => void>;
  /** Stopped by `interrupt` (not a cancel): the session stays resumable. */
  interrupted: boolean;
}
