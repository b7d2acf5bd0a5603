import { afterEach, describe, expect, it, vi } from 'vitest';
import type { InteractionStore } from '../ports/index.js';
import { createMemoryInteractionStore } from '../testing/index.js';
import { claimInteraction, saveInteraction, type ClaimOptions, type InteractionClaim } from './index.js';

async function claimed(store: InteractionStore, id: string, options: ClaimOptions): Promise<InteractionClaim> {
  const result = await claimInteraction(store, id, options);
  if (result.status !== 'claimed') throw new Error(`expected to claim ${id}, got ${result.status}`);
  return result.claim;
}

/** What a promise settled with: `ok`, or the code of what it threw. */
const outcomeOf = (promise: Promise<unknown>) =>
  promise.then(
    () => 'ok',
    (error: unknown) => (error as { code?: string }).code ?? String(error),
  );

/** A memory store whose operations can be made to fail or to wait, one kind at a time. */
function controlledStore() {
  const memory = createMemoryInteractionStore();
  const control = {
    /** Throw on the next call of this kind (`after`: once it was done). */
    fail: undefined as undefined | { op: 'set' | 'delete'; when: 'before' | 'after' },
    /** Hold every `set` until released. */
    stall: false,
    stalled: [] as Array<() => void>,
    sets: 0,
  };
  const store: InteractionStore = {
    get: (id) => memory.get(id),
    async set(id, write, expected) {
      control.sets += 1;
      if (control.stall) await new Promise<void>((resolve) => control.stalled.push(resolve));
      if (control.fail?.op === 'set') {
        const { when } = control.fail;
        control.fail = undefined;
        if (when === 'after') await memory.set(id, write, expected);
        throw new Error('connection reset');
      }
      return memory.set(id, write, expected);
    },
    async delete(id, expected) {
      if (control.fail?.op === 'delete') {
        const { when } = control.fail;
        control.fail = undefined;
        if (when === 'after') await memory.delete(id, expected);
        throw new Error('connection reset');
      }
      return memory.delete(id, expected);
    },
  };
  return { store, control };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('InteractionClaim', () => {
  it('leaves a record another process took over to it: the late holder cannot commit, write or release it', async () => {
    const store = createMemoryInteractionStore();
    let clock = 1_000_000;
    const now = () => clock;
    await saveInteraction(store, 'taken', { step: 1 }, 'alice');
    const late = await claimed(store, 'taken', { owner: 'alice', leaseMs: 10_000, now });
    clock += 11_000;
    const next = await claimed(store, 'taken', { owner: 'alice', leaseMs: 10_000, now });
    await next.checkpoint({ step: 2 });
    const held = await store.get('taken');

    // The late holder thinks its run ended: its commit must not report success, nor remove the record.
    expect(await outcomeOf(late.commit())).toBe('CONFLICT');
    expect(late.lost.aborted).toBe(true);
    expect(await outcomeOf(late.checkpoint({ step: 99 }))).toBe('CONFLICT');
    expect(await outcomeOf(late.release())).toBe('CONFLICT');
    expect(await store.get('taken')).toEqual(held);
    await next.commit();
    expect(await store.get('taken')).toBeUndefined();
  });

  it('refuses the write that finds the record taken over, so nothing after it counts as saved', async () => {
    const store = createMemoryInteractionStore();
    let clock = 1_000_000;
    const now = () => clock;
    await saveInteraction(store, 'raced', { step: 1 }, undefined);
    const late = await claimed(store, 'raced', { leaseMs: 10_000, now });
    clock += 11_000;
    await claimed(store, 'raced', { leaseMs: 10_000, now });
    const lost: string[] = [];
    late.onLost((reason) => lost.push(reason.code));
    expect(await outcomeOf(late.checkpoint({ step: 2, started: 'send_email' }))).toBe('CONFLICT');
    expect(lost).toEqual(['CONFLICT']);
    expect((await store.get('raced'))?.state).toBe('{"step":1}');
  });

  it('still holds a record whose commit failed in the store, so releasing it makes it resumable at once', async () => {
    const { store, control } = controlledStore();
    await saveInteraction(store, 'kept', { step: 1 }, 'alice');
    const claim = await claimed(store, 'kept', { owner: 'alice' });
    await claim.checkpoint({ step: 2 });
    control.fail = { op: 'delete', when: 'before' };
    expect(await outcomeOf(claim.commit())).toBe('STORE_ERROR');
    await claim.release();
    const again = await claimInteraction(store, 'kept', { owner: 'alice' });
    expect(again.status).toBe('claimed');
    expect(again.status === 'claimed' && again.claim.stateText).toBe('{"step":2}');
  });

  it('counts a commit, a release or a checkpoint the store applied before it failed as done, not as lost', async () => {
    const { store, control } = controlledStore();
    await saveInteraction(store, 'applied', { step: 1 }, 'alice');
    const claim = await claimed(store, 'applied', { owner: 'alice' });
    control.fail = { op: 'set', when: 'after' };
    await claim.checkpoint({ step: 2 });
    await claim.checkpoint({ step: 3 });
    expect(claim.lost.aborted).toBe(false);
    control.fail = { op: 'set', when: 'after' };
    await claim.release();
    const second = await claimed(store, 'applied', { owner: 'alice' });
    expect(second.stateText).toBe('{"step":3}');
    control.fail = { op: 'delete', when: 'after' };
    await second.commit();
    expect(await store.get('applied')).toBeUndefined();
  });

  it('reports a checkpoint the store failed as failed, even when it comes in the same millisecond as the one before', async () => {
    const { store, control } = controlledStore();
    await saveInteraction(store, 'same-ms', { step: 1 }, 'alice');
    const now = () => 1_700_000_000_000;
    const claim = await claimed(store, 'same-ms', { owner: 'alice', now });
    await claim.checkpoint({ step: 2 });
    control.fail = { op: 'set', when: 'before' };
    expect(await outcomeOf(claim.checkpoint({ step: 3 }))).toBe('STORE_ERROR');
    expect((await store.get('same-ms'))?.state).toBe('{"step":2}');
    await claim.checkpoint({ step: 4 });
    expect((await store.get('same-ms'))?.state).toBe('{"step":4}');
  });

  it('tries a checkpoint the store failed again when asked to, with the state as it is then, but never a state that cannot be saved, nor a record it lost', async () => {
    const { store, control } = controlledStore();
    await saveInteraction(store, 'retried', { step: 1 }, 'alice');
    const claim = await claimed(store, 'retried', { owner: 'alice' });
    const state: { step: number; note?: unknown } = { step: 2 };
    control.fail = { op: 'set', when: 'before' };
    const sets = control.sets;
    const written = claim.checkpoint(state, { delaysMs: [5, 5] });
    state.step = 3;
    await written;
    expect(control.sets - sets).toBe(2);
    expect((await store.get('retried'))?.state).toBe('{"step":3}');

    // Not JSON: refused at once, the store never asked.
    const before = control.sets;
    expect(await outcomeOf(claim.checkpoint({ step: 4, note: () => undefined }, { delaysMs: [5, 5] }))).toBe('STORE_ERROR');
    expect(control.sets).toBe(before);

    // Taken over by another process: the write is refused by the store's version check and never tried again.
    let clock = Date.now();
    await claim.release();
    const mine = await claimed(store, 'retried', { owner: 'alice', leaseMs: 10, now: () => clock });
    clock += 20;
    await claimed(store, 'retried', { owner: 'alice', now: () => clock });
    const tried = control.sets;
    expect(await outcomeOf(mine.checkpoint({ step: 99 }, { delaysMs: [5, 5] }))).toBe('CONFLICT');
    expect(control.sets - tried).toBe(1);
    expect((await store.get('retried'))?.state).toBe('{"step":3}');
  });

  it('keeps holding a record when a write the store applied was reported failed and could not be checked: the next one is written, not taken for a takeover', async () => {
    const memory = createMemoryInteractionStore();
    /** The next set is applied, then reported failed, and the get that checks it fails too. */
    let blackout = false;
    let getFails = false;
    const store: InteractionStore = {
      async get(id) {
        if (getFails) {
          getFails = false;
          throw new Error('connection reset');
        }
        return memory.get(id);
      },
      async set(id, write, expected) {
        const version = await memory.set(id, write, expected);
        if (blackout) {
          blackout = false;
          getFails = true;
          throw new Error('connection reset');
        }
        return version;
      },
      delete: (id, expected) => memory.delete(id, expected),
    };
    await saveInteraction(store, 'unsure', { step: 1 }, 'alice');
    const claim = await claimed(store, 'unsure', { owner: 'alice' });
    blackout = true;
    expect(await outcomeOf(claim.checkpoint({ step: 2 }))).toBe('STORE_ERROR');
    await claim.checkpoint({ step: 3 });
    expect(claim.lost.aborted).toBe(false);
    expect((await store.get('unsure'))?.state).toBe('{"step":3}');
    // Tried again at once, the same way.
    blackout = true;
    await claim.checkpoint({ step: 4 }, { delaysMs: [5] });
    expect((await store.get('unsure'))?.state).toBe('{"step":4}');
    await claim.commit();
    expect(await store.get('unsure')).toBeUndefined();
  });

  it('stops holding a record whose store is too slow to renew the lease, before another process may take it, and never writes over it', async () => {
    vi.useFakeTimers();
    const { store, control } = controlledStore();
    await saveInteraction(store, 'slow', { step: 1 }, undefined);
    const claim = await claimed(store, 'slow', { leaseMs: 3_000 });
    claim.startHeartbeat();
    await vi.advanceTimersByTimeAsync(1_000);
    // Saved, claimed, renewed once.
    expect(control.sets).toBe(3);

    // From now on the store takes its time: a renewal goes out and does not come back.
    control.stall = true;
    await vi.advanceTimersByTimeAsync(1_000);
    expect(claim.lost.aborted).toBe(false);
    // A checkpoint waits behind the renewal still in flight.
    const checkpoint = outcomeOf(claim.checkpoint({ step: 2 }));
    await vi.advanceTimersByTimeAsync(1_000);
    // The lease ends before the next beat: the holder lets go now, and what waited ends with it.
    expect(claim.lost.aborted).toBe(true);
    expect((claim.lost.reason as { code: string }).code).toBe('CONFLICT');
    expect(await checkpoint).toBe('CONFLICT');
    // Beats while the store was slow added no writes of their own.
    expect(control.sets).toBe(4);
    expect(await claimInteraction(store, 'slow', {})).toMatchObject({ status: 'busy' });

    // Once the lease ran out another process takes the record; the slow write then reaches the store.
    await vi.advanceTimersByTimeAsync(1_000);
    control.stall = false;
    const next = await claimed(store, 'slow', {});
    await next.checkpoint({ step: 'theirs' });
    for (const resume of control.stalled.splice(0)) resume();
    await vi.advanceTimersByTimeAsync(5_000);
    expect((await store.get('slow'))?.state).toBe('{"step":"theirs"}');
    expect(await outcomeOf(claim.release())).toBe('CONFLICT');
    expect(vi.getTimerCount()).toBe(0);
    await next.release();
  });
});
