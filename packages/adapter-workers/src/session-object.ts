import { DurableObject } from 'cloudflare:workers';
import { AgentError, DEFAULT_INTERACTION_TTL_MS, parseSseStream, type EventBus, type SessionInfo, type SessionLog, type SessionStatus, type SseEvent } from '@org/core';
import { createAgentHandler, errorResponse } from '@org/core/http';
import { agentHandlerOptionsFor, createStoreFor } from './agent-handler-options.js';
import type { AgentWorkerEnv, WorkerHandlerOptions } from './create-handler.js';
import { createDurableObjectEventBus, objectNameOfChannel, sessionOfChannel } from './durable-object-event-bus.js';
import { createDurableObjectSessionLog, decodePayload, encodeEvents, READ_BUDGET_BYTES } from './durable-object-session-log.js';
import { EventHub } from './event-hub.js';
import { SessionLogStorage, type SessionLogReadResult } from './session-log-storage.js';
import { checkTtl, DEFAULT_MAX_VALUE_BYTES } from './stored-value.js';

/** Options of {@link createSessionObject}: the ports and limits of the agent handler it serves, and its timings. */
export interface SessionObjectOptions<Env> extends Omit<WorkerHandlerOptions<Env>, 'fallback'> {
  /** Sessions not written for this long are removed by their object's alarm. Default 7 days. */
  ttlMs?: number;
  /** The largest event a session keeps, in UTF-8 bytes. Default 32 MiB. */
  maxEventBytes?: number;
  /**
   * A reader that heard nothing from a running session for this long checks that its segment is
   * still alive, and takes it over from its last checkpoint if not. Default 15 000 ms.
   */
  livenessMs?: number;
  /**
   * While an object runs a segment, its alarm fires this often: each alarm keeps the object in
   * memory (an idle object is evicted after 70 to 140 seconds without requests or alarms) and
   * resets its CPU allowance. Default 30 000 ms.
   */
  heartbeatMs?: number;
}

const DEFAULT_HEARTBEAT_MS = 30_000;

/** Core's default `livenessMs`. */
const DEFAULT_LIVENESS_MS = 15_000;

/** What readers of a session read when its run was lost with nothing saved to go on from. */
const ABANDONED_MESSAGE = 'The run stopped: the server running it was restarted before it saved its progress, so it cannot go on; start it again';

/** The longest a recovery alarm follows a session before it hands over to the next alarm. */
const RECOVERY_MS = 5 * 60_000;

/** The storage key naming the session whose segment this object runs (or ran until it was evicted). */
const WATCH_KEY = 'watch';

/** Where a synthetic reader of the object's own handler points; never leaves the object. */
const INTERNAL_ORIGIN = 'https://session-object.internal';

/**
 * The Durable Object that holds one session (`namespace.idFromName(sessionId)`): its event log
 * in storage, the live readers attached to it, and its fan-out of messages. It serves the agent
 * protocol itself: the Worker of {@link createHandler} routes each session request to the
 * session's object, which answers it with core's agent handler over this log, so a reader's SSE
 * stream is served from the object that appends the events.
 *
 * A segment runs in the object that received the request starting it: a session's own object
 * for `:resume`, a fresh object for `sessions/new` and `streamRunAgent` (which appends to the
 * session's object). It goes on after that request has been answered: while it runs, the object
 * keeps an alarm firing every `heartbeatMs`, which keeps it in memory. If the object is evicted
 * or restarted anyway, the next alarm finds the session still running, follows it as a reader
 * would, and takes the run over from its last checkpoint once its claim's lease has run out.
 *
 * Export it from your Worker entry and bind it as `SESSIONS`; use {@link createSessionObject} to
 * give it options (they must match those of the Worker's {@link createHandler}).
 *
 * @example
 * ```ts
 * // worker entry
 * export { InteractionStoreObject, SessionObject } from '@org/adapter-workers';
 * ```
 */
export class SessionObject<Env = AgentWorkerEnv> extends DurableObject<Env> {
  #log!: SessionLogStorage;
  readonly #hub = new EventHub();
  #handler: ((request: Request) => Promise<Response>) | undefined;
  #sessions: { log: SessionLog; bus: EventBus } | undefined;
  /** The session whose segment runs in this instance now. */
  #running: string | undefined;
  /** The session whose segment this object runs, as kept in storage: it survives eviction. */
  #watching: string | undefined;
  #alarmAt: number | null = null;
  readonly #home = new Map<string, boolean>();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    void ctx.blockConcurrencyWhile(async () => {
      this.#log = await SessionLogStorage.load(ctx);
      this.#watching = await ctx.storage.get<string>(WATCH_KEY);
      this.#alarmAt = await ctx.storage.getAlarm();
    });
  }

  /** The options of this class; {@link createSessionObject} returns a subclass that gives them. */
  protected sessionObjectOptions(): SessionObjectOptions<Env> {
    return {};
  }

  /**
   * Serves the agent protocol (sessions and `streamRunAgent`) for requests the Worker routed here.
   * A client that leaves (its stream is cancelled) aborts the request's signal: the runtime does
   * not abort it by itself, and a reader of a session that is quiet would otherwise stay
   * subscribed, and keep checking the session, until its next event.
   */
  override async fetch(request: Request): Promise<Response> {
    const left = new AbortController();
    try {
      const signal = AbortSignal.any([request.signal, left.signal]);
      const response = await this.#agentHandler()(new Request(request, { signal }));
      const streamed = response.body !== null && (response.headers.get('content-type') ?? '').startsWith('text/event-stream');
      return streamed ? onCancel(response, response.body, (reason) => left.abort(reason)) : response;
    } catch (error) {
      return errorResponse(error);
    }
  }

  /** Runs when the alarm fires: removes an expired session, and keeps or takes over a running segment. */
  override async alarm(): Promise<void> {
    this.#alarmAt = null;
    try {
      await this.#log.dropIfExpired();
      const watched = this.#watching;
      if (watched !== undefined && this.#running !== watched) await this.#recover(watched);
      else if (watched !== undefined) await this.#checkStillRunning(watched);
    } catch {
      // Tried again at the next alarm, set below.
    }
    if (this.#watching === undefined && !this.#log.holdsSession) {
      // Nothing left to keep: an empty object costs nothing.
      await this.ctx.storage.deleteAlarm();
      await this.ctx.storage.deleteAll();
      return;
    }
    await this.#schedule();
  }

  // The session log of this object's session, called by other objects and Workers over RPC.

  /** `SessionLog.create` for the session this object is named after. */
  async logCreate(id: string, info: { interactionId: string; owner?: string }, ttlMs: number): Promise<boolean> {
    checkTtl('SessionObject', ttlMs);
    const created = await this.#log.create(id, info, ttlMs);
    if (created) await this.#schedule();
    return created;
  }

  /** `SessionLog.get`; `null` when there is no such session. */
  async logGet(id: string): Promise<SessionInfo | null> {
    return this.#log.get(id) ?? null;
  }

  /** `SessionLog.append`, the events as UTF-8 (`lengths` bytes each, in arrays or one stream); `null` when there is no such session. */
  async logAppend(id: string, ttlMs: number, lengths: number[], payload: Uint8Array[] | ReadableStream<Uint8Array>): Promise<number | null> {
    checkTtl('SessionObject', ttlMs);
    // Received before the indexes are taken: a stream arrives at its own pace.
    const events = await decodePayload(lengths, payload);
    return (await this.#log.append(id, events, ttlMs)) ?? null;
  }

  /** Up to `limit` events after `after`, in replies of at most `budgetBytes` (see `largeNext`). */
  async logRead(id: string, after: number, limit: number, budgetBytes: number): Promise<SessionLogReadResult> {
    if (!Number.isSafeInteger(after) || after < -1 || !Number.isSafeInteger(limit)) return { events: [], largeNext: false };
    // A budget that is not a positive number (NaN would compare false everywhere) is the default.
    const budget = typeof budgetBytes === 'number' && budgetBytes > 0 ? Math.min(budgetBytes, READ_BUDGET_BYTES) : READ_BUDGET_BYTES;
    return this.#log.read(id, after, limit, budget);
  }

  /** One event of any size as a byte stream; `null` when there is none at `index`. */
  async logReadEvent(id: string, index: number): Promise<ReadableStream<Uint8Array> | null> {
    if (!Number.isSafeInteger(index)) return null;
    const bytes = await this.#log.readEvent(id, index);
    return bytes ? new Blob([bytes]).stream() : null;
  }

  /** `SessionLog.update`; `from` is `null` for any status. */
  async logUpdate(
    id: string,
    change: { status: SessionStatus; interactionId?: string | null },
    from: SessionStatus[] | null,
    ttlMs: number,
  ): Promise<boolean> {
    checkTtl('SessionObject', ttlMs);
    return this.#log.update(id, change, from ?? undefined, ttlMs);
  }

  // The channels that live in this object, used by other objects and Workers over RPC.

  /** Opens a stream of the messages published on `channel` from now on, one JSON string per line. */
  async busSubscribe(channel: string, token: string): Promise<ReadableStream<Uint8Array>> {
    return this.#hub.subscribeRemote(channel, token);
  }

  /** Ends the stream opened with `token`. */
  async busUnsubscribe(channel: string, token: string): Promise<boolean> {
    return this.#hub.unsubscribeRemote(channel, token);
  }

  /** Sends `message` to every subscriber of `channel`; resolves to how many there were. */
  async busPublish(channel: string, message: string): Promise<number> {
    return this.#hub.publish(channel, message);
  }

  #options(): SessionObjectOptions<Env> & { namespace: DurableObjectNamespace<SessionObject> } {
    const options = this.sessionObjectOptions();
    const namespace = options.sessionNamespace ? options.sessionNamespace(this.env) : (this.env as AgentWorkerEnv | undefined)?.SESSIONS;
    if (!namespace) {
      throw new AgentError(
        'INTERNAL',
        'SessionObject cannot reach the other sessions: bind its class as SESSIONS in wrangler.jsonc, or pass sessionNamespace to createSessionObject',
      );
    }
    return { ...options, namespace };
  }

  #executionContext(): ExecutionContext {
    return {
      waitUntil: (promise) => this.ctx.waitUntil(promise),
      passThroughOnException() {},
      props: this.ctx.props,
    };
  }

  #agentHandler(): (request: Request) => Promise<Response> {
    if (this.#handler) return this.#handler;
    const options = this.#options();
    this.#handler = createAgentHandler({
      ...agentHandlerOptionsFor(this.env, options, this.#executionContext()),
      sessions: { ...this.#sessionPorts(), ...(options.livenessMs === undefined ? {} : { livenessMs: options.livenessMs }) },
    });
    return this.#handler;
  }

  /** The log and the bus of this object's agent handler, built once. */
  #sessionPorts(): { log: SessionLog; bus: EventBus } {
    if (!this.#sessions) {
      const options = this.#options();
      this.#sessions = { log: this.#sessionLog(options), bus: this.#eventBus(options.namespace) };
    }
    return this.#sessions;
  }

  /** Whether `name` is this object's own name in the namespace. */
  #isHome(namespace: DurableObjectNamespace<SessionObject>, name: string): boolean {
    let home = this.#home.get(name);
    if (home === undefined) {
      home = this.ctx.id.equals(namespace.idFromName(name));
      if (this.#home.size > 100) this.#home.clear();
      this.#home.set(name, home);
    }
    return home;
  }

  /**
   * The session log as it is, without this object's bookkeeping: this object's storage for its
   * own session, the session's object for any other.
   */
  #plainLog(options: SessionObjectOptions<Env> & { namespace: DurableObjectNamespace<SessionObject> }): SessionLog {
    const { namespace } = options;
    const ttlMs = options.ttlMs ?? DEFAULT_INTERACTION_TTL_MS;
    const maxEventBytes = options.maxEventBytes ?? DEFAULT_MAX_VALUE_BYTES;
    const remote = createDurableObjectSessionLog(namespace, { ttlMs, maxEventBytes });
    const here = (id: string) => this.#isHome(namespace, id);
    return {
      create: async (id, info) => (here(id) ? this.logCreate(id, info, ttlMs) : remote.create(id, info)),
      get: async (id) => (here(id) ? this.#log.get(id) : remote.get(id)),
      append: async (id, events) => {
        if (!here(id)) return remote.append(id, events);
        const first = await this.#log.append(id, encodeEvents(id, events, maxEventBytes).bytes, ttlMs);
        if (first === undefined) throw new AgentError('NOT_FOUND', `Session ${id} not found`, { details: { sessionId: id } });
        return first;
      },
      read: async (id, after, limit) => {
        if (!here(id)) return remote.read(id, after, limit);
        // One reply's worth, as the remote log reads: a replay never holds more than that at once.
        const decoder = new TextDecoder();
        const reply = await this.#log.read(id, after, limit, READ_BUDGET_BYTES);
        if (!reply.largeNext) return reply.events.map((bytes) => decoder.decode(bytes));
        const bytes = await this.#log.readEvent(id, after + 1);
        return bytes ? [decoder.decode(bytes)] : [];
      },
      update: async (id, change, from) => (here(id) ? this.#log.update(id, change, from, ttlMs) : remote.update(id, change, from)),
    };
  }

  /** The log the agent handler of this object writes to ({@link #plainLog}); it also tells which segment runs here. */
  #sessionLog(options: SessionObjectOptions<Env> & { namespace: DurableObjectNamespace<SessionObject> }): SessionLog {
    const log = this.#plainLog(options);
    return {
      create: async (id, info) => {
        // Watched before it exists: an object restarted in between finds no session and lets go,
        // where one restarted after the session was created and before it was watched would
        // leave it running with nobody to take it over.
        await this.#segmentStarted(id);
        let created = false;
        try {
          created = await log.create(id, info);
        } finally {
          if (!created) await this.#segmentEnded(id);
        }
        return created;
      },
      get: (id) => log.get(id),
      append: async (id, events) => {
        await this.#segmentStarted(id);
        return log.append(id, events);
      },
      read: (id, after, limit) => log.read(id, after, limit),
      update: async (id, change, from) => {
        const changed = await log.update(id, change, from);
        // A resume moves the session to running just before its segment starts here.
        if (changed && change.status === 'running') await this.#segmentStarted(id);
        return changed;
      },
    };
  }

  /** The bus the agent handler of this object uses: this object's hub for its own channels, the channel's object for others. */
  #eventBus(namespace: DurableObjectNamespace<SessionObject>): EventBus {
    const remote = createDurableObjectEventBus(namespace);
    const here = (channel: string) => this.#isHome(namespace, objectNameOfChannel(channel));
    return {
      subscribe: async (channel, listener) => {
        if (!here(channel)) return remote.subscribe(channel, listener);
        const remove = this.#hub.subscribeLocal(channel, listener);
        return { close: async () => remove() };
      },
      publish: async (channel, message) => {
        const sessionId = sessionOfChannel(channel);
        // Every segment ends by announcing "end" on its session's channel.
        if (sessionId !== undefined && message === 'end') await this.#segmentEnded(sessionId);
        if (!here(channel)) return remote.publish(channel, message);
        this.#hub.publish(channel, message);
      },
    };
  }

  async #segmentStarted(sessionId: string): Promise<void> {
    if (this.#running === sessionId) return;
    this.#running = sessionId;
    if (this.#watching !== sessionId) {
      this.#watching = sessionId;
      await this.ctx.storage.put(WATCH_KEY, sessionId);
    }
    await this.#schedule();
  }

  async #segmentEnded(sessionId: string): Promise<void> {
    if (this.#running === sessionId) this.#running = undefined;
    await this.#unwatch(sessionId);
  }

  async #unwatch(sessionId: string): Promise<void> {
    if (this.#watching !== sessionId) return;
    this.#watching = undefined;
    await this.ctx.storage.delete(WATCH_KEY);
  }

  /** Sets the alarm for the next heartbeat (while a segment runs here) or the session's expiry, whichever comes first. */
  async #schedule(): Promise<void> {
    let next = Number.POSITIVE_INFINITY;
    if (this.#watching !== undefined) next = Date.now() + (this.sessionObjectOptions().heartbeatMs ?? DEFAULT_HEARTBEAT_MS);
    const expiresAt = this.#log.expiresAt;
    if (expiresAt !== undefined) next = Math.min(next, expiresAt);
    if (!Number.isFinite(next) || (this.#alarmAt !== null && this.#alarmAt <= next)) return;
    this.#alarmAt = next;
    await this.ctx.storage.setAlarm(next);
  }

  /**
   * The segment this object ran is not running here any more (the object was evicted or
   * restarted): follow the session as a reader does. A reader that hears nothing for
   * `livenessMs` takes the run over from its last checkpoint once the dead segment's lease has
   * run out; events from elsewhere mean another object runs it now.
   */
  async #recover(sessionId: string): Promise<void> {
    const handler = this.#agentHandler();
    const { log } = this.#sessionPorts();
    const info = await log.get(sessionId);
    if (!info || info.status !== 'running') {
      await this.#unwatch(sessionId);
      return;
    }
    if (await this.#endIfAbandoned(sessionId, info)) return;
    const url = `${INTERNAL_ORIGIN}/v1beta1/sessions/${encodeURIComponent(sessionId)}?alt=sse&after=${info.eventCount - 1}`;
    // Aborted when the recovery stops following, so the reading ends even if the session stays quiet.
    const reading = new AbortController();
    const response = await handler(new Request(url, { signal: reading.signal }));
    if (!response.ok || !response.body) return;
    const events = parseSseStream(response.body)[Symbol.asyncIterator]();
    const deadline = Date.now() + RECOVERY_MS;
    let elsewhere = false;
    try {
      while (this.#running !== sessionId) {
        const next = await nextBefore(events, deadline);
        if (next === 'late' || next.done) break;
        if (next.value.event === 'event' && this.#running !== sessionId) {
          elsewhere = true;
          break;
        }
      }
    } finally {
      reading.abort();
      void events.return?.(undefined)?.catch(() => undefined);
    }
    if (this.#running === sessionId) return;
    const now = await log.get(sessionId);
    if (elsewhere || !now || now.status !== 'running') await this.#unwatch(sessionId);
  }

  /**
   * The segment of `sessionId` runs here as far as this instance knows. If the log says the
   * session is not running any more, it ended without announcing it (it lost its claim to another
   * instance after a stall, say): there is nothing left to keep this object in memory for.
   */
  async #checkStillRunning(sessionId: string): Promise<void> {
    const info = await this.#sessionPorts().log.get(sessionId);
    if (info?.status === 'running') return;
    if (this.#running === sessionId) this.#running = undefined;
    await this.#unwatch(sessionId);
  }

  /**
   * Ends a `running` session that nothing can go on with: its interaction has no saved state (the
   * dead segment had not saved its first checkpoint, or had finished and removed it just before
   * its object went), so no reader's take-over and no resume can ever continue it, and it would
   * read as running, its readers waiting, until it expires. Checked twice, `livenessMs` apart,
   * with no event in between, so a segment just starting or just finishing elsewhere writes its
   * own end. A run whose `complete` event is in the log ends as that event says; any other is
   * `failed`, after an error event that says why. Resolves to whether the session is over.
   */
  async #endIfAbandoned(sessionId: string, info: SessionInfo): Promise<boolean> {
    const options = this.#options();
    const store = await createStoreFor(this.env, { executionContext: this.#executionContext() }, options);
    const saved = async (interactionId: string | undefined) => interactionId !== undefined && (await store.get(interactionId)) !== undefined;
    if (await saved(info.interactionId)) return false;
    await new Promise((resolve) => setTimeout(resolve, options.livenessMs ?? DEFAULT_LIVENESS_MS));
    const log = this.#plainLog(options);
    const now = await log.get(sessionId);
    if (!now || now.status !== 'running') {
      await this.#unwatch(sessionId);
      return true;
    }
    if (this.#running === sessionId || now.eventCount !== info.eventCount || now.interactionId !== info.interactionId || (await saved(now.interactionId))) {
      return false;
    }
    const [last] = now.eventCount > 0 ? await log.read(sessionId, now.eventCount - 2, 1) : [];
    const success = completion(last);
    if (success === undefined) await log.append(sessionId, [JSON.stringify({ error: { message: ABANDONED_MESSAGE, code: 'INTERNAL' } })]);
    await log.update(sessionId, { status: success ? 'completed' : 'failed' }, ['running']);
    // Its readers wake up, find it over and end their streams.
    await this.#sessionPorts().bus.publish(`session:${sessionId}`, 'end').catch(() => undefined);
    await this.#unwatch(sessionId);
    return true;
  }
}

/**
 * The response with `body` passed through, calling `cancelled` when its reader cancels it (the
 * client left) before the end.
 */
function onCancel(response: Response, body: ReadableStream<Uint8Array>, cancelled: (reason: unknown) => void): Response {
  const reader = body.getReader();
  const passed = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      },
      cancel(reason) {
        cancelled(reason);
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(passed, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** The outcome a `complete` wire event reports, or `undefined` when `json` is not one. */
function completion(json: string | undefined): boolean | undefined {
  if (json === undefined || !json.startsWith('{"complete"')) return undefined;
  try {
    const success = (JSON.parse(json) as { complete?: { result?: { success?: unknown } } }).complete?.result?.success;
    return typeof success === 'boolean' ? success : undefined;
  } catch {
    return undefined;
  }
}

/** The iterator's next item, or `'late'` if it does not come before `deadline`. */
async function nextBefore(events: AsyncIterator<SseEvent>, deadline: number): Promise<IteratorResult<SseEvent> | 'late'> {
  let timer: ReturnType<typeof setTimeout> | null = null;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), Math.max(0, deadline - Date.now()));
  });
  try {
    return await Promise.race([events.next(), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A {@link SessionObject} class with options: the ports, run options, owners, limits and CORS of
 * the agent handler it serves (the same as the Worker's `createHandler`, which routes requests
 * to it), and the session timings. Export the returned class from the Worker entry under the
 * name bound in `wrangler.jsonc`.
 *
 * @example
 * ```ts
 * const options = { runOptions: () => ({ model: 'gemini-2.5-pro' }) };
 * export const SessionObject = createSessionObject<Env>(options);
 * export default createHandler<Env>(options);
 * ```
 */
export function createSessionObject<Env = AgentWorkerEnv>(options: SessionObjectOptions<Env>): typeof SessionObject<Env> {
  for (const name of ['ttlMs', 'livenessMs', 'heartbeatMs', 'maxEventBytes'] as const) {
    const value = options[name];
    if (value !== undefined && !(typeof value === 'number' && value > 0 && Number.isFinite(value))) {
      throw new AgentError('INTERNAL', `createSessionObject: ${name} must be a positive number, got ${String(value)}`);
    }
  }
  return class extends SessionObject<Env> {
    protected override sessionObjectOptions(): SessionObjectOptions<Env> {
      return options;
    }
  };
}
