import { AgentError } from '../errors/index.js';
import type { InteractionStore } from '../ports/index.js';
import { createJsonTextEncoder, DEFAULT_MAX_STATE_BYTES, type JsonTextOptions, toJsonText } from './json-text.js';
import { isChatRecordId } from './record-id.js';

/** How long a claim holds a record without renewing it, unless a run says otherwise. */
export const DEFAULT_LEASE_MS = 60_000;

/** What the runtime keeps in a record's `meta`. */
interface RecordMeta {
  /** Who may resume the record; absent: anyone. */
  owner?: string;
  /** Who holds the record now, and until when (epoch ms). */
  lease?: { token: string; until: number };
  /** The session the run belongs to, so a resume by interaction id finds it. */
  sessionId?: string;
}

/** What a record says about itself, readable without claiming it. */
export interface InteractionLabel {
  owner?: string;
  sessionId?: string;
}

/** Options of {@link saveInteraction} and {@link claimInteraction}. */
export interface ClaimOptions {
  /** The caller; a record bound to another owner is never claimed or changed by them. */
  owner?: string;
  /** How long the claim lasts without renewal. Default {@link DEFAULT_LEASE_MS}. */
  leaseMs?: number;
  /** Clock (epoch ms), for tests of lease expiry. */
  now?: () => number;
  /** The session the run belongs to (kept with the record). */
  sessionId?: string;
}

/** How {@link InteractionClaim.checkpoint} tries again a write the store failed. */
export interface CheckpointRetry {
  /** The wait before each further attempt, in ms: `[100, 400]` makes three attempts in all. */
  delaysMs: readonly number[];
  /** Tries no more once it aborts (the run was stopped). */
  signal?: AbortSignal;
}

/** What {@link claimInteraction} found. */
export type ClaimResult =
  | { status: 'claimed'; claim: InteractionClaim }
  | { status: 'missing' }
  | { status: 'forbidden' }
  | { status: 'busy'; until: number };

/**
 * Encodes `state` for a store: the one encoding every store receives (see {@link toJsonText}),
 * within the store's size limit.
 */
export function encodeState(store: InteractionStore, id: string, state: unknown): string {
  return toJsonText(state, stateTextOptions(store, id));
}

function stateTextOptions(store: InteractionStore, id: string): JsonTextOptions {
  return { label: `Interaction ${id}`, maxBytes: store.maxStateBytes ?? DEFAULT_MAX_STATE_BYTES };
}

/**
 * Saves a new record nobody holds (a suspend or a pause), bound to `owner`. Ids are fresh, so a
 * record already under `id` is a `CONFLICT`.
 */
export async function saveInteraction(
  store: InteractionStore,
  id: string,
  state: unknown,
  owner: string | undefined,
  sessionId?: string,
): Promise<void> {
  const meta: RecordMeta = owner === undefined ? {} : { owner };
  if (sessionId !== undefined) meta.sessionId = sessionId;
  const version = await storeCall(id, 'save', () => store.set(id, { meta: JSON.stringify(meta), state: encodeState(store, id, state) }, null));
  if (version === undefined) throw new AgentError('CONFLICT', `Interaction ${id} already exists`);
}

/**
 * Creates a record held by the caller from the start (a run that keeps checkpoints from its
 * first turn).
 */
export async function createClaimedInteraction(
  store: InteractionStore,
  id: string,
  state: unknown,
  options: ClaimOptions = {},
): Promise<InteractionClaim> {
  const now = options.now ?? Date.now;
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const lease = { token: crypto.randomUUID(), until: now() + leaseMs };
  const meta: RecordMeta = options.owner === undefined ? { lease } : { owner: options.owner, lease };
  if (options.sessionId !== undefined) meta.sessionId = options.sessionId;
  const metaText = JSON.stringify(meta);
  const stateText = encodeState(store, id, state);
  const version = await storeCall(id, 'save', () => store.set(id, { meta: metaText, state: stateText }, null));
  if (version === undefined) throw new AgentError('CONFLICT', `Interaction ${id} already exists`);
  return new InteractionClaim(store, id, stateText, meta, version, leaseMs, now);
}

/** The owner and session of the record under `id`, without claiming it; `undefined` when absent. */
export async function readInteractionLabel(store: InteractionStore, id: string): Promise<InteractionLabel | undefined> {
  if (isChatRecordId(id)) return undefined;
  const record = await storeCall(id, 'read', () => store.get(id));
  if (!record) return undefined;
  const { owner, sessionId } = parseMeta(id, record.meta);
  const label: InteractionLabel = {};
  if (owner !== undefined) label.owner = owner;
  if (sessionId !== undefined) label.sessionId = sessionId;
  return label;
}

/**
 * Claims the record under `id` for the caller: atomically, for one claimant at a time, and only
 * for its owner. A foreign or anonymous caller of an owned record gets `forbidden` without any
 * write, so it can never disturb the owner; a record held by a live lease is `busy`; an expired
 * lease (its holder died) can be claimed again.
 */
export async function claimInteraction(store: InteractionStore, id: string, options: ClaimOptions = {}): Promise<ClaimResult> {
  const now = options.now ?? Date.now;
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  // A chat's record is no run, whoever names it: it is as unknown as any other id.
  if (isChatRecordId(id)) return { status: 'missing' };
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const record = await storeCall(id, 'read', () => store.get(id));
    if (!record) return { status: 'missing' };
    const meta = parseMeta(id, record.meta);
    if (meta.owner !== undefined && meta.owner !== options.owner) return { status: 'forbidden' };
    const current = now();
    if (meta.lease && meta.lease.until > current) return { status: 'busy', until: meta.lease.until };
    const held: RecordMeta = { ...meta, lease: { token: crypto.randomUUID(), until: current + leaseMs } };
    const version = await storeCall(id, 'claim', () => store.set(id, { meta: JSON.stringify(held) }, record.version));
    if (version !== undefined) {
      return { status: 'claimed', claim: new InteractionClaim(store, id, record.state, held, version, leaseMs, now) };
    }
    // Another claimant wrote first: read again to report what it did.
  }
  return { status: 'busy', until: now() + leaseMs };
}

/**
 * A record held by this process. Checkpoints overwrite its state, a heartbeat renews the lease,
 * and the segment ends with `commit` (the record is done with) or `release` (resumable at once).
 * Writes are serialised; a write that finds the record changed means another process took it
 * over after the lease ran out: `lost` aborts, `onLost` listeners are called, that write and every
 * later one (commit and release included) reject with the `CONFLICT`, and the run must stop. A
 * holder whose store is too slow or failing to renew the lease before it ends stops holding the
 * record the same way, before another process may take it.
 */
export class InteractionClaim {
  readonly id: string;
  /** The state as it was stored when claimed. */
  readonly stateText: string;
  readonly #store: InteractionStore;
  readonly #leaseMs: number;
  readonly #now: () => number;
  /** Why the record was lost (set once, when a write finds it taken over). */
  #lostReason: AgentError | undefined;
  /** Built only when someone asks for {@link lost}: a resume observes the loss through `onLost`. */
  #lostController: AbortController | undefined;
  #lostListeners: Array<(reason: AgentError) => void> = [];
  /** Rejects with the loss: a write still waiting behind a slow one ends with it at once. */
  #whenLost: Promise<never> | undefined;
  #rejectLost: ((reason: AgentError) => void) | undefined;
  #meta: RecordMeta;
  #version: string;
  /** The state as last written (what {@link reinstate} puts back). */
  #lastState: string;
  /** The lease end of the last write tried: each write's is later, so no two writes share a meta. */
  #lastUntil: number;
  #queue: Promise<unknown> = Promise.resolve();
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  #ended = false;
  /** Writes queued or in flight. */
  #writing = 0;
  /** The last write failed in the store: the lease was not extended by it. */
  #lastWriteFailed = false;
  /** Checkpoints of one claim are successive states of one run: their history is encoded once. */
  #encode: ((state: unknown) => string) | undefined;

  /** @internal Use {@link claimInteraction} or {@link createClaimedInteraction}. */
  constructor(store: InteractionStore, id: string, stateText: string, meta: RecordMeta, version: string, leaseMs: number, now: () => number) {
    this.#store = store;
    this.id = id;
    this.stateText = stateText;
    this.#lastState = stateText;
    this.#meta = meta;
    this.#lastUntil = meta.lease?.until ?? 0;
    this.#version = version;
    this.#leaseMs = leaseMs;
    this.#now = now;
  }

  /** Aborts when the record was taken over by another process (its reason is a `CONFLICT` error). */
  get lost(): AbortSignal {
    if (!this.#lostController) {
      this.#lostController = new AbortController();
      if (this.#lostReason) this.#lostController.abort(this.#lostReason);
    }
    return this.#lostController.signal;
  }

  /**
   * Calls `listener` with the `CONFLICT` error once the record is taken over by another process
   * (at once when it already was). Cheaper than listening on {@link lost}: no signal is built.
   */
  onLost(listener: (reason: AgentError) => void): void {
    if (this.#lostReason) listener(this.#lostReason);
    else this.#lostListeners.push(listener);
  }

  /**
   * Renews the lease every third of its length until the claim ends. A beat while a write is still
   * in flight adds no other; when the lease would end before the next beat without having been
   * renewed (a slow or failing store), the record counts as lost.
   */
  startHeartbeat(): void {
    if (this.#heartbeat !== undefined || this.#ended || this.#lostReason) return;
    const interval = Math.max(1, Math.floor(this.#leaseMs / 3));
    this.#heartbeat = setInterval(() => this.#beat(interval), interval);
  }

  /** Extends the lease without touching the state. */
  renew(): Promise<void> {
    return this.#write(undefined);
  }

  /**
   * Replaces the stored state (and extends the lease). With `retry`, a write the store failed
   * (`STORE_ERROR`: a blip, a timeout) is tried again after each of its waits, with `state` as it
   * is then; never a record this claim lost, a state that cannot be saved, or once the run stopped.
   */
  async checkpoint(state: unknown, retry?: CheckpointRetry): Promise<void> {
    this.#encode ??= createJsonTextEncoder(stateTextOptions(this.#store, this.id));
    for (let attempt = 0; ; attempt += 1) {
      // Encoded at each attempt: a state that shares the run's objects is written as it is now.
      const text = this.#encode(state);
      try {
        await this.#write(text);
        return;
      } catch (error) {
        const delay = retry?.delaysMs[attempt];
        // A loss (the record is another process's now) is final, whatever the store said before it.
        if (delay === undefined || this.#lostReason || !(error instanceof AgentError) || error.code !== 'STORE_ERROR') throw error;
        if (!(await this.#wait(delay, retry?.signal))) throw this.#lostReason ?? error;
      }
    }
  }

  /**
   * The segment reached a durable point elsewhere (a new suspend, the end): the record goes. A
   * record another process took over is left to it (`CONFLICT`); after a store failure that left
   * the record there, the claim is still held, so `release` can still make it resumable.
   */
  async commit(): Promise<void> {
    await this.#finish(async () => {
      let deleted: boolean;
      try {
        deleted = await this.#store.delete(this.id, this.#version);
      } catch (error) {
        // The delete may have landed before the store failed: a record that is gone went.
        if ((await this.#store.get(this.id).catch(() => null)) !== undefined) throw error;
        deleted = true;
      }
      if (!deleted) throw this.#takenOver();
    });
  }

  /** The segment stopped without finishing: the record stays, resumable by its owner at once. */
  async release(): Promise<void> {
    await this.#finish(async () => {
      const { lease: _released, ...meta } = this.#meta;
      const text = JSON.stringify(meta);
      let version: string | undefined;
      try {
        version = await this.#store.set(this.id, { meta: text }, this.#version);
      } catch (error) {
        if ((await this.#landed(text)) === undefined) throw error;
        return;
      }
      if (version === undefined) throw this.#takenOver();
    });
  }

  /**
   * Puts a committed record back as it was last written, nobody's to hold: the segment's next
   * durable point was saved under another id that its reader left without learning, so the run
   * stays resumable under this one.
   */
  async reinstate(): Promise<void> {
    const { lease: _released, ...meta } = this.#meta;
    const version = await storeCall(this.id, 'save', () => this.#store.set(this.id, { meta: JSON.stringify(meta), state: this.#lastState }, null));
    if (version === undefined) throw new AgentError('CONFLICT', `Interaction ${this.id} already exists`);
  }

  #beat(interval: number): void {
    const stalled = this.#writing > 0 || this.#lastWriteFailed;
    if (stalled && (this.#meta.lease?.until ?? 0) - this.#now() <= interval) {
      // Another process may claim the record once the lease ends: stop holding it before then.
      this.#markLost(
        new AgentError('CONFLICT', `Interaction ${this.id} could not renew its lease in time (the store is slow or failing), so this process stopped holding it`),
      );
      return;
    }
    if (this.#writing > 0) return;
    void this.renew().catch(() => undefined);
  }

  #write(state: string | undefined): Promise<void> {
    if (this.#lostReason) return Promise.reject(this.#lostReason);
    this.#writing += 1;
    const task = this.#queue.then(async () => {
      if (this.#ended) return;
      if (this.#lostReason) throw this.#lostReason;
      // A failed write is told from one that landed by its meta: two writes in the same millisecond
      // must not share it, or a write the store failed would count as written.
      const until = Math.max(this.#now() + this.#leaseMs, this.#lastUntil + 1);
      this.#lastUntil = until;
      const meta: RecordMeta = { ...this.#meta, lease: { token: this.#meta.lease?.token ?? crypto.randomUUID(), until } };
      const write = state === undefined ? { meta: JSON.stringify(meta) } : { meta: JSON.stringify(meta), state };
      let version: string | undefined;
      try {
        version = await storeCall(this.id, 'checkpoint', () => this.#store.set(this.id, write, this.#version));
      } catch (error) {
        // A write that landed before the store failed is written (its meta, with this lease's end, is unique).
        version = await this.#landed(write.meta);
        if (version === undefined) {
          this.#lastWriteFailed = true;
          throw error;
        }
      }
      if (version === undefined && this.#lastWriteFailed) {
        // An earlier write the store failed, and could not then be asked about, may have landed
        // after all: a record that still carries this claim's lease token was written by nobody else.
        const current = await this.#store.get(this.id).catch(() => undefined);
        if (current !== undefined && leaseTokenOf(current.meta) === meta.lease?.token) {
          this.#version = current.version;
          this.#lastState = current.state;
          version = await storeCall(this.id, 'checkpoint', () => this.#store.set(this.id, write, current.version));
        }
      }
      // Written over by another process: whatever this one does next must not count.
      if (version === undefined) throw this.#takenOver();
      this.#lastWriteFailed = false;
      this.#meta = meta;
      this.#version = version;
      if (state !== undefined) this.#lastState = state;
    });
    const settled = task.then(
      () => {
        this.#writing -= 1;
      },
      () => {
        this.#writing -= 1;
      },
    );
    this.#queue = settled;
    return Promise.race([task, this.#lostPromise()]);
  }

  async #finish(action: () => Promise<void>): Promise<void> {
    this.#stop();
    if (this.#lostReason) throw this.#lostReason;
    const task = this.#queue.then(async () => {
      if (this.#ended) return;
      if (this.#lostReason) throw this.#lostReason;
      await storeCall(this.id, 'finish', action);
      this.#ended = true;
    });
    this.#queue = task.catch(() => undefined);
    await Promise.race([task, this.#lostPromise()]);
  }

  /** Waits `ms`; `false` at once when the claim is lost or `signal` aborts meanwhile. */
  async #wait(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
    if (signal?.aborted) return false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stop: (() => void) | undefined;
    try {
      return await Promise.race([
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(true), ms);
          stop = () => resolve(false);
          signal?.addEventListener('abort', stop, { once: true });
        }),
        this.#lostPromise().catch(() => false),
      ]);
    } finally {
      clearTimeout(timer);
      if (stop) signal?.removeEventListener('abort', stop);
    }
  }

  /** The version of the record if its meta is `meta` (a write of this claim that landed), else `undefined`. */
  async #landed(meta: string): Promise<string | undefined> {
    const record = await this.#store.get(this.id).catch(() => undefined);
    return record?.meta === meta ? record.version : undefined;
  }

  /** The `CONFLICT` of a record another process wrote: the claim is lost from now on. */
  #takenOver(): AgentError {
    const reason = new AgentError('CONFLICT', `Interaction ${this.id} was taken over by another process after its lease ran out`);
    this.#markLost(reason);
    return reason;
  }

  #lostPromise(): Promise<never> {
    if (!this.#whenLost) {
      this.#whenLost = new Promise<never>((_resolve, reject) => {
        this.#rejectLost = reject;
      });
      this.#whenLost.catch(() => undefined);
      if (this.#lostReason) this.#rejectLost?.(this.#lostReason);
    }
    return this.#whenLost;
  }

  #markLost(reason: AgentError): void {
    if (this.#lostReason) return;
    this.#stop();
    this.#lostReason = reason;
    this.#lostController?.abort(reason);
    this.#rejectLost?.(reason);
    for (const listener of this.#lostListeners.splice(0)) listener(reason);
  }

  #stop(): void {
    if (this.#heartbeat !== undefined) clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
  }
}

function parseMeta(id: string, text: string): RecordMeta {
  try {
    const meta = JSON.parse(text) as unknown;
    if (isRecordMeta(meta)) return meta;
  } catch {
    // Reported below.
  }
  throw new AgentError('STORE_ERROR', `Interaction ${id} has a record this runtime cannot read`);
}

/**
 * Whether a parsed meta has the form this runtime writes. A record edited by hand (an owner that
 * is a number, a lease whose end is not a time) must not be taken for someone else's run, nor
 * claimed past a lease it cannot read.
 */
function isRecordMeta(value: unknown): value is RecordMeta {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const { owner, sessionId, lease } = value as { owner?: unknown; sessionId?: unknown; lease?: unknown };
  if (owner !== undefined && typeof owner !== 'string') return false;
  if (sessionId !== undefined && typeof sessionId !== 'string') return false;
  if (lease === undefined) return true;
  if (typeof lease !== 'object' || lease === null) return false;
  const { token, until } = lease as { token?: unknown; until?: unknown };
  return typeof token === 'string' && typeof until === 'number' && Number.isFinite(until);
}

/** The lease token in a record's meta, if it has one this runtime wrote. */
function leaseTokenOf(text: string): string | undefined {
  try {
    const meta = JSON.parse(text) as unknown;
    return isRecordMeta(meta) ? meta.lease?.token : undefined;
  } catch {
    return undefined;
  }
}

/** Runs a store operation; anything it throws that is not already coded becomes `STORE_ERROR`. */
async function storeCall<T>(id: string, action: string, operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    if (error instanceof AgentError) throw error;
    // A driver's own message may name server paths or hosts: keep it as the cause, not the text.
    const reason = (error as { code?: unknown }).code ?? (error as { name?: unknown }).name ?? 'error';
    throw new AgentError('STORE_ERROR', `Could not ${action} interaction ${id} (${String(reason)})`, { cause: error });
  }
}
