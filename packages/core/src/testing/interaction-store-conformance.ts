import { isAgentError } from '../errors/index.js';
import { claimInteraction, saveInteraction, type InteractionClaim } from '../interactions/index.js';
import type { InteractionStore } from '../ports/index.js';

/** The few assertions the cases need, so they run without any test framework (a browser page, workerd). */
export interface ConformanceAssert {
  equal(actual: unknown, expected: unknown, message: string): void;
}

/** What a case may ask of the store factory: a short time to live, a small size limit. */
export interface ConformanceStoreOptions {
  ttlMs?: number;
  maxStateBytes?: number;
}

/** Makes a fresh, empty store for one case, honouring the options when given. */
export type ConformanceStoreFactory = (options: ConformanceStoreOptions) => InteractionStore | Promise<InteractionStore>;

/** One conformance case: a name and a body run against a fresh store. */
export interface ConformanceCase {
  name: string;
  /** Only for stores that promise atomic conditional writes (skipped in `eventual` mode). */
  strongOnly?: boolean;
  /** Only in `eventual` mode: what such a store must still do. */
  eventualOnly?: boolean;
  run(createStore: ConformanceStoreFactory, assert: ConformanceAssert): Promise<void>;
}

const UNICODE = 'héllo wörld — 😀 ✓ 中文 \u0000 "quoted" \\ back';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function claimed(store: InteractionStore, id: string, options: Parameters<typeof claimInteraction>[2]): Promise<InteractionClaim> {
  const result = await claimInteraction(store, id, options);
  if (result.status !== 'claimed') throw new Error(`expected to claim ${id}, got ${result.status}`);
  return result.claim;
}

async function codeOf(operation: () => Promise<unknown>): Promise<string> {
  try {
    await operation();
    return 'no error';
  } catch (error) {
    return isAgentError(error) ? error.code : String(error);
  }
}

/** Every case of the suite, as plain data. */
export const interactionStoreConformanceCases: readonly ConformanceCase[] = [
  {
    name: 'creates a record only where there is none, and reads it back exactly',
    async run(createStore, assert) {
      const store = await createStore({});
      const version = await store.set('fidelity', { meta: `{"m":"${UNICODE}"}`, state: JSON.stringify({ text: UNICODE }) }, null);
      assert.equal(typeof version, 'string', 'create returns a version');
      const record = await store.get('fidelity');
      assert.equal(record?.meta, `{"m":"${UNICODE}"}`, 'meta round-trips');
      assert.equal(record?.state, JSON.stringify({ text: UNICODE }), 'state round-trips');
      assert.equal(record?.version, version, 'version read back');
      assert.equal(await store.set('fidelity', { meta: '{}', state: '{}' }, null), undefined, 'second create refused');
      assert.equal((await store.get('fidelity'))?.state, JSON.stringify({ text: UNICODE }), 'state unchanged by the refused create');
    },
  },
  {
    name: 'writes only over the expected version, and keeps the state when only meta is written',
    async run(createStore, assert) {
      const store = await createStore({});
      const first = (await store.set('cas', { meta: '{"n":1}', state: '"one"' }, null)) as string;
      const second = await store.set('cas', { meta: '{"n":2}' }, first);
      assert.equal(typeof second === 'string' && second !== first, true, 'a new version');
      assert.equal(await store.set('cas', { meta: '{"n":3}', state: '"three"' }, first), undefined, 'stale version refused');
      const record = await store.get('cas');
      assert.equal([record?.meta, record?.state], ['{"n":2}', '"one"'], 'meta replaced, state kept, stale write lost');
      const third = await store.set('cas', { meta: '{"n":3}', state: '"three"' }, second as string);
      assert.equal((await store.get('cas'))?.state, '"three"', 'state replaced');
      assert.equal(typeof third, 'string', 'third version');
    },
  },
  {
    name: 'deletes only the expected version, or whatever is there',
    async run(createStore, assert) {
      const store = await createStore({});
      const version = (await store.set('gone', { meta: '{}', state: '1' }, null)) as string;
      const newer = (await store.set('gone', { meta: '{"x":1}' }, version)) as string;
      assert.equal(await store.delete('gone', version), false, 'stale delete refused');
      assert.equal((await store.get('gone'))?.version, newer, 'still there');
      assert.equal(await store.delete('gone', newer), true, 'delete with the current version');
      assert.equal(await store.get('gone'), undefined, 'gone');
      await store.set('any', { meta: '{}', state: '1' }, null);
      assert.equal(await store.delete('any'), true, 'unconditional delete');
      assert.equal(await store.delete('any'), false, 'nothing left to delete');
    },
  },
  {
    name: 'unknown ids are absent, and conditional writes to them do nothing',
    async run(createStore, assert) {
      const store = await createStore({});
      assert.equal(await store.get('never-saved'), undefined, 'get');
      assert.equal(await store.set('never-saved', { meta: '{}', state: '1' }, 'some-version'), undefined, 'conditional set');
      assert.equal(await store.get('never-saved'), undefined, 'still absent');
      assert.equal(await store.delete('never-saved'), false, 'delete');
    },
  },
  {
    name: 'ids are independent, including ids with unusual characters',
    async run(createStore, assert) {
      const store = await createStore({});
      const ids = ['0b8f7a2e-6c1d-4f5a-9e3b-2d7c8a1f4e6b', 'with-dashes_and_underscores', 'UPPER.lower', 'a'];
      for (const [index, id] of ids.entries()) await store.set(id, { meta: '{}', state: String(index) }, null);
      for (const [index, id] of ids.entries()) assert.equal((await store.get(id))?.state, String(index), `state of ${id}`);
    },
  },
  {
    name: 'large states survive whole, and a meta-only write keeps them',
    async run(createStore, assert) {
      const store = await createStore({});
      const state = JSON.stringify({ text: 'abcdefghij'.repeat(400_000), image: { mimeType: 'image/png', data: 'QUJD'.repeat(262_144) } });
      const version = (await store.set('large', { meta: '{}', state }, null)) as string;
      await store.set('large', { meta: '{"renewed":true}' }, version);
      const record = await store.get('large');
      assert.equal(record?.state.length, state.length, 'length');
      assert.equal(record?.state === state, true, 'content');
    },
  },
  {
    name: 'records expire after the time to live',
    async run(createStore, assert) {
      const store = await createStore({ ttlMs: 300 });
      await store.set('short', { meta: '{}', state: '1' }, null);
      assert.equal((await store.get('short'))?.state, '1', 'there at first');
      await sleep(700);
      assert.equal(await store.get('short'), undefined, 'gone after the time to live');
      assert.equal(typeof (await store.set('short', { meta: '{}', state: '2' }, null)), 'string', 'the id can be used again');
    },
  },
  {
    name: 'a hundred conditional writes over one version: exactly one wins',
    strongOnly: true,
    async run(createStore, assert) {
      const store = await createStore({});
      const version = (await store.set('race', { meta: '{}', state: '"base"' }, null)) as string;
      const results = await Promise.all(
        Array.from({ length: 100 }, (_, index) => store.set('race', { meta: `{"winner":${index}}`, state: `${index}` }, version)),
      );
      const winners = results.flatMap((result, index) => (result === undefined ? [] : [index]));
      assert.equal(winners.length, 1, 'number of winners');
      assert.equal((await store.get('race'))?.state, String(winners[0]), 'the winner is what is stored');
    },
  },
  {
    name: 'a hundred claimants of one interaction: exactly one claims it',
    strongOnly: true,
    async run(createStore, assert) {
      const store = await createStore({});
      await saveInteraction(store, 'claimed', { step: 1 }, 'owner-a');
      const results = await Promise.all(Array.from({ length: 100 }, () => claimInteraction(store, 'claimed', { owner: 'owner-a' })));
      assert.equal(results.filter((result) => result.status === 'claimed').length, 1, 'claimed once');
      assert.equal(results.filter((result) => result.status === 'busy').length, 99, 'the others find it busy');
    },
  },
  {
    name: 'racing claimants: whoever claims gets the saved state',
    eventualOnly: true,
    async run(createStore, assert) {
      const store = await createStore({});
      await saveInteraction(store, 'claimed', { step: 1 }, 'owner-a');
      const results = await Promise.all(Array.from({ length: 10 }, () => claimInteraction(store, 'claimed', { owner: 'owner-a' })));
      const winners = results.flatMap((result) => (result.status === 'claimed' ? [result.claim] : []));
      assert.equal(winners.length >= 1, true, 'at least one claims it');
      assert.equal(winners.every((claim) => claim.stateText === '{"step":1}'), true, 'every claimant got the state');
    },
  },
  {
    name: 'a foreign or anonymous caller never claims or changes an owned interaction',
    async run(createStore, assert) {
      const store = await createStore({});
      await saveInteraction(store, 'owned', { secret: true }, 'owner-a');
      const before = await store.get('owned');
      const strangers = await Promise.all([
        ...Array.from({ length: 20 }, () => claimInteraction(store, 'owned', { owner: 'owner-b' })),
        ...Array.from({ length: 20 }, () => claimInteraction(store, 'owned', {})),
      ]);
      assert.equal(strangers.every((result) => result.status === 'forbidden'), true, 'every stranger is refused');
      assert.equal((await store.get('owned'))?.version, before?.version, 'the record was not written');
      const owner = await claimInteraction(store, 'owned', { owner: 'owner-a' });
      assert.equal(owner.status, 'claimed', 'the owner claims it');
    },
  },
  {
    name: 'a claim expires after its lease, and the next claimant takes over',
    async run(createStore, assert) {
      const store = await createStore({});
      let clock = 1_000_000;
      const now = () => clock;
      await saveInteraction(store, 'leased', { step: 1 }, undefined);
      const first = await claimed(store, 'leased', { leaseMs: 60_000, now });
      clock += 30_000;
      const during = await claimInteraction(store, 'leased', { leaseMs: 60_000, now });
      assert.equal(during.status, 'busy', 'busy while the lease lasts');
      clock += 31_000;
      const second = await claimed(store, 'leased', { leaseMs: 60_000, now });
      await second.checkpoint({ step: 2 });
      await first.checkpoint({ step: 99 }).catch(() => undefined);
      assert.equal(first.lost.aborted, true, 'the first holder learns it lost the record');
      assert.equal(isAgentError(first.lost.reason) ? first.lost.reason.code : 'none', 'CONFLICT', 'with a CONFLICT');
      const record = await store.get('leased');
      assert.equal(record?.state, '{"step":2}', "the first holder's late write did not land");
      await second.release();
    },
  },
  {
    name: 'commit removes the interaction; release makes it claimable at once',
    async run(createStore, assert) {
      const store = await createStore({});
      await saveInteraction(store, 'released', { step: 1 }, 'owner-a');
      const first = await claimed(store, 'released', { owner: 'owner-a' });
      await first.checkpoint({ step: 2 });
      await first.release();
      const again = await claimed(store, 'released', { owner: 'owner-a' });
      assert.equal(again.stateText, '{"step":2}', 'the checkpoint is what the next claimant gets');
      await again.commit();
      assert.equal(await store.get('released'), undefined, 'committed: gone');
      assert.equal((await claimInteraction(store, 'released', { owner: 'owner-a' })).status, 'missing', 'cannot be claimed again');
    },
  },
  {
    name: 'checkpoints overwrite the held state and renew the lease',
    async run(createStore, assert) {
      const store = await createStore({});
      let clock = 1_000_000;
      const now = () => clock;
      await saveInteraction(store, 'checkpointed', { step: 0 }, undefined);
      const claim = await claimed(store, 'checkpointed', { leaseMs: 10_000, now });
      for (let step = 1; step <= 5; step += 1) {
        clock += 6_000;
        await claim.checkpoint({ step });
      }
      assert.equal((await store.get('checkpointed'))?.state, '{"step":5}', 'the last checkpoint is stored');
      clock += 6_000;
      assert.equal((await claimInteraction(store, 'checkpointed', { leaseMs: 10_000, now })).status, 'busy', 'still held: the lease was renewed');
      await claim.release();
    },
  },
  {
    name: 'values JSON cannot hold exactly are refused the same way, and nothing is written',
    async run(createStore, assert) {
      const store = await createStore({});
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      const values = [
        ['NaN', { n: Number.NaN }],
        ['bigint', { n: 1n }],
        ['cycle', cyclic],
        ['date', { at: new Date(0) }],
        ['undefined in an array', { list: [1, undefined] }],
      ] as const;
      for (const [index, [label, value]] of values.entries()) {
        assert.equal(await codeOf(() => saveInteraction(store, `bad-${index}`, value, undefined)), 'STORE_ERROR', label);
        assert.equal(await store.get(`bad-${index}`), undefined, `${label}: nothing written`);
      }
    },
  },
  {
    name: "states over the store's size limit are refused before any write",
    async run(createStore, assert) {
      const store = await createStore({ maxStateBytes: 10_000 });
      assert.equal(await codeOf(() => saveInteraction(store, 'big', { text: 'x'.repeat(20_000) }, undefined)), 'PAYLOAD_TOO_LARGE', 'code');
      assert.equal(await store.get('big'), undefined, 'nothing written');
      await saveInteraction(store, 'small', { text: 'x'.repeat(5_000) }, undefined);
      assert.equal((await store.get('small'))?.state.length, 5_011, 'a state under the limit is kept');
    },
  },
];

/** The test functions of the runner in use (vitest, or anything shaped like it). */
export interface ConformanceTestApi {
  describe(name: string, body: () => void): void;
  it(name: string, body: () => Promise<void>, timeout?: number): void;
  expect(actual: unknown): { toEqual(expected: unknown): void };
}

/** Options of {@link describeInteractionStoreConformance}. */
export interface ConformanceOptions {
  /** Called after each case with every store it created, e.g. to close connections. */
  cleanup?(stores: InteractionStore[]): void | Promise<void>;
  /**
   * `eventual` (KV-style stores): such a store cannot make two writes racing in different places
   * see each other, so the race cases are replaced by what it must still do.
   */
  consistency?: 'strong' | 'eventual';
  /** Per-case timeout in ms (default 30 000). */
  timeoutMs?: number;
}

function casesFor(consistency: ConformanceOptions['consistency']): ConformanceCase[] {
  const eventual = consistency === 'eventual';
  return interactionStoreConformanceCases.filter((testCase) => (eventual ? !testCase.strongOnly : !testCase.eventualOnly));
}

async function runCase(testCase: ConformanceCase, createStore: ConformanceStoreFactory, assert: ConformanceAssert, options: ConformanceOptions) {
  const stores: InteractionStore[] = [];
  try {
    await testCase.run(async (storeOptions) => {
      const store = await createStore(storeOptions);
      stores.push(store);
      return store;
    }, assert);
  } finally {
    await options.cleanup?.(stores);
  }
}

/**
 * Registers the `InteractionStore` conformance suite with the caller's test runner. The runner is
 * injected so the same suite runs in Node, in workerd and in a browser. The factory gets
 * `ttlMs` and `maxStateBytes` for the cases that test them.
 *
 * @example
 * ```ts
 * import { describe, it, expect } from 'vitest';
 * describeInteractionStoreConformance('file store', (options) => createFileInteractionStore({ directory, ...options }), { describe, it, expect });
 * ```
 */
export function describeInteractionStoreConformance(
  name: string,
  createStore: ConformanceStoreFactory,
  api: ConformanceTestApi,
  options: ConformanceOptions = {},
): void {
  api.describe(`InteractionStore conformance: ${name}`, () => {
    for (const testCase of casesFor(options.consistency)) {
      api.it(
        testCase.name,
        () =>
          runCase(
            testCase,
            createStore,
            { equal: (actual, expected, message) => api.expect({ [message]: actual }).toEqual({ [message]: expected }) },
            options,
          ),
        options.timeoutMs ?? 30_000,
      );
    }
  });
}

/** Runs every case against stores from `createStore` without a framework; returns the failures. */
export async function runInteractionStoreConformance(
  createStore: ConformanceStoreFactory,
  options: Pick<ConformanceOptions, 'consistency' | 'cleanup'> = {},
): Promise<Array<{ name: string; message: string }>> {
  const failures: Array<{ name: string; message: string }> = [];
  for (const testCase of casesFor(options.consistency)) {
    try {
      await runCase(
        testCase,
        createStore,
        {
          equal(actual, expected, message) {
            if (JSON.stringify(actual) !== JSON.stringify(expected)) {
              throw new Error(`${message}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)?.slice(0, 200)}`);
            }
          },
        },
        options,
      );
    } catch (error) {
      failures.push({ name: testCase.name, message: error instanceof Error ? error.message : String(error) });
    }
  }
  return failures;
}
