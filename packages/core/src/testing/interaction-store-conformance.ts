import type { InteractionStore } from '../ports/index.js';

/** The few assertions the cases need, so they run without any test framework (a browser page, workerd). */
export interface ConformanceAssert {
  equal(actual: unknown, expected: unknown, message: string): void;
}

/** One conformance case: a name and a body run against a fresh store. */
export interface ConformanceCase {
  name: string;
  /** Skipped for stores that declare eventual consistency. */
  strongOnly?: boolean;
  run(store: InteractionStore, assert: ConformanceAssert): Promise<void>;
}

const FIDELITY_VALUE = {
  version: 1,
  text: 'héllo wörld — 😀 ✓ 中文',
  numbers: [0, -1, 1.5, 1e21, Number.MAX_SAFE_INTEGER],
  flags: [true, false, null],
  empty: { string: '', array: [], object: {} },
  'key.with/slashes': { 'a.b': 'c/d' },
  nested: { deep: { deeper: { deepest: ['x', { y: 'z' }] } } },
};

/** Every case of the suite, as plain data. */
export const interactionStoreConformanceCases: readonly ConformanceCase[] = [
  {
    name: 'take returns what save stored, with JSON fidelity',
    async run(store, assert) {
      await store.save('fidelity', FIDELITY_VALUE);
      assert.equal(await store.has('fidelity'), true, 'has after save');
      assert.equal(JSON.stringify(await store.take('fidelity')), JSON.stringify(FIDELITY_VALUE), 'value round-trips');
    },
  },
  {
    name: 'take is single use: a second take finds nothing',
    async run(store, assert) {
      await store.save('once', { a: 1 });
      assert.equal(JSON.stringify(await store.take('once')), '{"a":1}', 'first take');
      assert.equal(await store.take('once'), undefined, 'second take');
      assert.equal(await store.has('once'), false, 'has after take');
    },
  },
  {
    name: 'unknown ids are absent',
    async run(store, assert) {
      assert.equal(await store.take('never-saved'), undefined, 'take of an unknown id');
      assert.equal(await store.has('never-saved'), false, 'has of an unknown id');
      await store.delete('never-saved');
    },
  },
  {
    name: 'delete removes a value',
    async run(store, assert) {
      await store.save('gone', { a: 1 });
      await store.delete('gone');
      assert.equal(await store.has('gone'), false, 'has after delete');
      assert.equal(await store.take('gone'), undefined, 'take after delete');
    },
  },
  {
    name: 'save replaces an earlier value',
    async run(store, assert) {
      await store.save('twice', { v: 1 });
      await store.save('twice', { v: 2 });
      assert.equal(JSON.stringify(await store.take('twice')), '{"v":2}', 'latest value wins');
    },
  },
  {
    name: 'changing an object after save does not change what is stored',
    async run(store, assert) {
      const value = { list: [1] };
      await store.save('copy', value);
      value.list.push(2);
      assert.equal(JSON.stringify(await store.take('copy')), '{"list":[1]}', 'stored copy');
    },
  },
  {
    name: 'ids are independent, including ids with unusual characters',
    async run(store, assert) {
      const ids = ['0b8f7a2e-6c1d-4f5a-9e3b-2d7c8a1f4e6b', 'with-dashes_and_underscores', 'UPPER.lower', 'a'];
      for (const [index, id] of ids.entries()) await store.save(id, { index });
      for (const [index, id] of ids.entries()) {
        assert.equal(JSON.stringify(await store.take(id)), JSON.stringify({ index }), `value of ${id}`);
      }
    },
  },
  {
    name: 'large values survive whole',
    async run(store, assert) {
      const text = 'abcdefghij'.repeat(400_000);
      const base64 = 'QUJD'.repeat(262_144);
      await store.save('large', { text, image: { mimeType: 'image/png', data: base64 } });
      const value = (await store.take('large')) as { text: string; image: { data: string } };
      assert.equal(value.text.length, text.length, 'text length');
      assert.equal(value.text === text, true, 'text content');
      assert.equal(value.image.data === base64, true, 'base64 content');
    },
  },
  {
    name: 'ten concurrent takes of one id: exactly one gets the value',
    strongOnly: true,
    async run(store, assert) {
      await store.save('race', { winner: true });
      const results = await Promise.all(Array.from({ length: 10 }, () => store.take('race')));
      assert.equal(results.filter((value) => value !== undefined && value !== null).length, 1, 'number of winners');
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
  /** Called after each case, e.g. to close a connection or remove a folder. */
  cleanup?(store: InteractionStore): void | Promise<void>;
  /**
   * `eventual` (KV-style stores) skips the concurrent-take case: such a store cannot promise that
   * two takes racing in different places see each other, so single use is best effort there.
   */
  consistency?: 'strong' | 'eventual';
  /** Per-case timeout in ms (default 30 000). */
  timeoutMs?: number;
}

/**
 * Registers the `InteractionStore` conformance suite with the caller's test runner. The runner is
 * injected so the same suite runs in Node, in workerd and in a browser.
 *
 * @example
 * ```ts
 * import { describe, it, expect } from 'vitest';
 * describeInteractionStoreConformance('file store', () => createFileInteractionStore({ directory }), { describe, it, expect });
 * ```
 */
export function describeInteractionStoreConformance(
  name: string,
  createStore: () => InteractionStore | Promise<InteractionStore>,
  api: ConformanceTestApi,
  options: ConformanceOptions = {},
): void {
  api.describe(`InteractionStore conformance: ${name}`, () => {
    for (const testCase of interactionStoreConformanceCases) {
      if (testCase.strongOnly && options.consistency === 'eventual') continue;
      api.it(
        testCase.name,
        async () => {
          const store = await createStore();
          try {
            await testCase.run(store, {
              equal: (actual, expected, message) => api.expect({ [message]: actual }).toEqual({ [message]: expected }),
            });
          } finally {
            await options.cleanup?.(store);
          }
        },
        options.timeoutMs ?? 30_000,
      );
    }
  });
}

/** Runs every case against stores from `createStore` without a framework; returns the failures. */
export async function runInteractionStoreConformance(
  createStore: () => InteractionStore | Promise<InteractionStore>,
  options: Pick<ConformanceOptions, 'consistency' | 'cleanup'> = {},
): Promise<Array<{ name: string; message: string }>> {
  const failures: Array<{ name: string; message: string }> = [];
  for (const testCase of interactionStoreConformanceCases) {
    if (testCase.strongOnly && options.consistency === 'eventual') continue;
    const store = await createStore();
    try {
      await testCase.run(store, {
        equal(actual, expected, message) {
          if (JSON.stringify(actual) !== JSON.stringify(expected)) {
            throw new Error(`${message}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)?.slice(0, 200)}`);
          }
        },
      });
    } catch (error) {
      failures.push({ name: testCase.name, message: error instanceof Error ? error.message : String(error) });
    } finally {
      await options.cleanup?.(store);
    }
  }
  return failures;
}
