/**
 * Where a session stands (decision W13): `running` while a segment runs, `suspended` waiting for
 * the client's answer, `paused` after a model failure (resumable), and the terminal `completed`,
 * `failed` and `cancelled`.
 */
export type SessionStatus = 'running' | 'suspended' | 'paused' | 'completed' | 'failed' | 'cancelled';

/** Every session status. */
export const SESSION_STATUSES: readonly SessionStatus[] = ['running', 'suspended', 'paused', 'completed', 'failed', 'cancelled'];

/** The statuses a session never leaves. */
export const TERMINAL_SESSION_STATUSES: readonly SessionStatus[] = ['completed', 'failed', 'cancelled'];

/** What a session log knows about one session besides its events. */
export interface SessionInfo {
  status: SessionStatus;
  /** How many events the log holds; the next one gets this index. */
  eventCount: number;
  /**
   * The interaction record behind the session: its checkpoints while it runs, its saved state
   * while it is suspended or paused.
   */
  interactionId?: string;
  /** Who may resume the session; absent: anyone. */
  owner?: string;
}

/**
 * The append-only event log of sessions, shared by every instance of a deployment. Events are
 * opaque JSON texts numbered from 0 in the order they were appended.
 *
 * Like `InteractionStore`, a log is a small driver; the session protocol (who runs a segment,
 * replay then live, cancellation) is built on top of it by the runtime and checked by the
 * conformance suite in `@org/core/testing`. A log drops a session once it has not been written
 * for its time to live (each factory takes `ttlMs`, default 7 days).
 *
 * @example
 * ```ts
 * const log: SessionLog = createMemorySessionLog();
 * await log.create('s-1', { interactionId: 's-1' });
 * await log.append('s-1', ['{"thought":{"text":"hm"}}']); // 0
 * await log.read('s-1', -1, 100); // ['{"thought":{"text":"hm"}}']
 * ```
 */
export interface SessionLog {
  /** Creates a session with status `running` and no events; `false` when the id is taken. */
  create(id: string, info: { interactionId: string; owner?: string }): Promise<boolean>;
  /** The session's status and counters, or `undefined` when there is none. */
  get(id: string): Promise<SessionInfo | undefined>;
  /**
   * Appends events in order and resolves to the index of the first. Atomic and ordered even when
   * several instances append at once. An unknown session is an `AgentError` `NOT_FOUND`.
   */
  append(id: string, events: readonly string[]): Promise<number>;
  /**
   * Up to `limit` events with an index above `after`, in order (`after = -1`: from the start). A
   * log may return fewer (for example to stay within a reply size); an empty result means none.
   */
  read(id: string, after: number, limit: number): Promise<string[]>;
  /**
   * Sets the status (and the interaction, when given; `null` clears it) if the current status is
   * one of `from` (any status when left out). Atomic; resolves to whether it changed.
   */
  update(
    id: string,
    change: { status: SessionStatus; interactionId?: string | null },
    from?: readonly SessionStatus[],
  ): Promise<boolean>;
}

/** A live subscription to a channel of an {@link EventBus}. */
export interface EventSubscription {
  /** Stops delivery; safe to call twice. */
  close(): Promise<void>;
}

/**
 * Live fan-out of small messages between the instances of a deployment (a session's "new events
 * up to index N", "segment ended", "cancel"). Delivery is best effort and may repeat; readers
 * never trust it for data (they read the log), only for waking up.
 *
 * @example
 * ```ts
 * const bus: EventBus = createMemoryEventBus();
 * const subscription = await bus.subscribe('session:s-1', (message) => console.log(message));
 * await bus.publish('session:s-1', 'end'); // logs "end"
 * await subscription.close();
 * ```
 */
export interface EventBus {
  /**
   * Subscribes `listener` to `channel`; resolves once messages published from now on will reach it.
   * The listener is called from the bus's own callbacks and must not throw: what it throws is not
   * caught, and in Node it ends the process as any uncaught exception does. Keep it to queuing the
   * message and waking whoever reads it.
   */
  subscribe(channel: string, listener: (message: string) => void): Promise<EventSubscription>;
  /** Sends `message` to every current subscriber of `channel`, on every instance. */
  publish(channel: string, message: string): Promise<void>;
}
