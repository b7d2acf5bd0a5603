import { isAgentError } from '../errors/index.js';
import type { EventBus, SessionLog } from '../ports/index.js';
import type { ConformanceAssert, ConformanceTestApi } from './interaction-store-conformance.js';

/** A case of the session log or event bus suite, run against fresh instances from `create`. */
export interface SessionConformanceCase<T, O> {
  name: string;
  run(create: (options: O) => T | Promise<T>, assert: ConformanceAssert): Promise<void>;
}

/** What a log case may ask of the factory. */
export interface SessionLogConformanceOptions {
  ttlMs?: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const UNICODE = '{"thought":{"text":"héllo — 😀 ✓ 中文 \\"quoted\\" \\\\ back"}}';

/** Every case of the `SessionLog` suite. */
export const sessionLogConformanceCases: ReadonlyArray<SessionConformanceCase<SessionLog, SessionLogConformanceOptions>> = [
  {
    name: 'creates a running session once, with its owner and interaction',
    async run(create, assert) {
      const log = await create({});
      assert.equal(await log.create('s-1', { interactionId: 'i-1', owner: 'alice' }), true, 'created');
      assert.equal(await log.create('s-1', { interactionId: 'i-2' }), false, 'a second create is refused');
      assert.equal(await log.get('s-1'), { status: 'running', eventCount: 0, interactionId: 'i-1', owner: 'alice' }, 'info');
      assert.equal(await log.get('unknown'), undefined, 'unknown session');
      assert.equal(await log.read('unknown', -1, 10), [], 'unknown session has no events');
    },
  },
  {
    name: 'numbers appended events from 0 and reads them back after a cursor, exactly',
    async run(create, assert) {
      const log = await create({});
      await log.create('s-1', { interactionId: 'i-1' });
      assert.equal(await log.append('s-1', ['{"a":0}', '{"a":1}']), 0, 'first batch starts at 0');
      assert.equal(await log.append('s-1', [UNICODE]), 2, 'second batch continues');
      assert.equal(await log.read('s-1', -1, 100), ['{"a":0}', '{"a":1}', UNICODE], 'everything');
      assert.equal(await log.read('s-1', 0, 100), ['{"a":1}', UNICODE], 'after index 0');
      assert.equal(await log.read('s-1', 0, 1), ['{"a":1}'], 'a limit');
      assert.equal(await log.read('s-1', 2, 100), [], 'nothing after the last');
      assert.equal((await log.get('s-1'))?.eventCount, 3, 'event count');
    },
  },
  {
    name: 'appending to an unknown session is a coded NOT_FOUND',
    async run(create, assert) {
      const log = await create({});
      const code = await log.append('missing', ['{}']).then(
        () => 'no error',
        (error: unknown) => (isAgentError(error) ? error.code : String(error)),
      );
      assert.equal(code, 'NOT_FOUND', 'code');
    },
  },
  {
    name: 'a hundred concurrent appends get a hundred distinct indexes, in the order the log keeps',
    async run(create, assert) {
      const log = await create({});
      await log.create('s-1', { interactionId: 'i-1' });
      const indexes = await Promise.all(Array.from({ length: 100 }, (_, index) => log.append('s-1', [`{"n":${index}}`])));
      assert.equal([...indexes].sort((a, b) => a - b), Array.from({ length: 100 }, (_, index) => index), 'indexes');
      const events = await log.read('s-1', -1, 1000);
      assert.equal(events.length, 100, 'events kept');
      assert.equal(indexes.every((index, writer) => events[index] === `{"n":${writer}}`), true, 'each event sits at the index its writer got');
    },
  },
  {
    name: 'updates status only from the expected statuses, atomically',
    async run(create, assert) {
      const log = await create({});
      await log.create('s-1', { interactionId: 'i-1' });
      assert.equal(await log.update('s-1', { status: 'suspended', interactionId: 'i-2' }, ['running']), true, 'running → suspended');
      assert.equal(await log.update('s-1', { status: 'completed' }, ['running']), false, 'not from suspended');
      assert.equal(await log.get('s-1'), { status: 'suspended', eventCount: 0, interactionId: 'i-2' }, 'after');
      const racers = await Promise.all(Array.from({ length: 20 }, () => log.update('s-1', { status: 'running' }, ['suspended'])));
      assert.equal(racers.filter(Boolean).length, 1, 'one of twenty racing updates wins');
      assert.equal(await log.update('s-1', { status: 'cancelled', interactionId: null }), true, 'from any status');
      assert.equal(await log.get('s-1'), { status: 'cancelled', eventCount: 0 }, 'interaction cleared');
      assert.equal(await log.update('missing', { status: 'running' }), false, 'unknown session');
    },
  },
  {
    name: 'large events survive whole',
    async run(create, assert) {
      const log = await create({});
      await log.create('s-1', { interactionId: 'i-1' });
      const big = JSON.stringify({ sendRequest: { body: { text: 'x'.repeat(2_000_000) } } });
      await log.append('s-1', [big]);
      const [read] = await log.read('s-1', -1, 1);
      assert.equal(read?.length, big.length, 'length');
      assert.equal(read === big, true, 'content');
    },
  },
  {
    name: 'sessions expire after the time to live',
    async run(create, assert) {
      const log = await create({ ttlMs: 300 });
      await log.create('s-1', { interactionId: 'i-1' });
      await sleep(700);
      assert.equal(await log.get('s-1'), undefined, 'gone');
      assert.equal(await log.create('s-1', { interactionId: 'i-2' }), true, 'the id can be used again');
    },
  },
];

/** Every case of the `EventBus` suite: `create` gives a bus connection; two connections act as two instances. */
export const eventBusConformanceCases: ReadonlyArray<SessionConformanceCase<EventBus, Record<string, never>>> = [
  {
    name: 'delivers what is published after subscribing, in order, to every subscriber on every connection',
    async run(create, assert) {
      const [publisher, subscriber] = [await create({}), await create({})];
      const first: string[] = [];
      const second: string[] = [];
      const a = await subscriber.subscribe('channel-a', (message) => first.push(message));
      const b = await publisher.subscribe('channel-a', (message) => second.push(message));
      for (let index = 0; index < 50; index += 1) await publisher.publish('channel-a', `m${index}`);
      await waitFor(() => first.length >= 50 && second.length >= 50);
      const expected = Array.from({ length: 50 }, (_, index) => `m${index}`);
      assert.equal(first, expected, 'the other connection');
      assert.equal(second, expected, 'the same connection');
      await a.close();
      await b.close();
    },
  },
  {
    name: 'keeps channels apart, and stops delivering after close',
    async run(create, assert) {
      const bus = await create({});
      const other = await create({});
      const heard: string[] = [];
      const subscription = await other.subscribe('channel-x', (message) => heard.push(message));
      await bus.publish('channel-y', 'elsewhere');
      await bus.publish('channel-x', 'here');
      await waitFor(() => heard.length >= 1);
      await subscription.close();
      await subscription.close();
      await bus.publish('channel-x', 'after close');
      await sleep(200);
      assert.equal(heard, ['here'], 'only its channel, and nothing after close');
    },
  },
];

async function waitFor(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) return;
    await sleep(10);
  }
}

/** Options of the session suites. */
export interface SessionConformanceOptions<T> {
  /** Called after each case with every instance it created (close connections here). */
  cleanup?(instances: T[]): void | Promise<void>;
  timeoutMs?: number;
}

function describeCases<T, O>(
  title: string,
  cases: ReadonlyArray<SessionConformanceCase<T, O>>,
  create: (options: O) => T | Promise<T>,
  api: ConformanceTestApi,
  options: SessionConformanceOptions<T>,
): void {
  api.describe(title, () => {
    for (const testCase of cases) {
      api.it(
        testCase.name,
        async () => {
          const instances: T[] = [];
          try {
            await testCase.run(
              async (createOptions) => {
                const instance = await create(createOptions);
                instances.push(instance);
                return instance;
              },
              { equal: (actual, expected, message) => api.expect({ [message]: actual }).toEqual({ [message]: expected }) },
            );
          } finally {
            await options.cleanup?.(instances);
          }
        },
        options.timeoutMs ?? 30_000,
      );
    }
  });
}

/**
 * Registers the `SessionLog` conformance suite with the caller's test runner.
 *
 * @example
 * ```ts
 * describeSessionLogConformance('redis', (options) => createRedisSessionLog({ client, ...options }), { describe, it, expect });
 * ```
 */
export function describeSessionLogConformance(
  name: string,
  create: (options: SessionLogConformanceOptions) => SessionLog | Promise<SessionLog>,
  api: ConformanceTestApi,
  options: SessionConformanceOptions<SessionLog> = {},
): void {
  describeCases(`SessionLog conformance: ${name}`, sessionLogConformanceCases, create, api, options);
}

/**
 * Registers the `EventBus` conformance suite. `create` is called once per connection; two
 * connections stand for two instances of a deployment.
 *
 * @example
 * ```ts
 * describeEventBusConformance('redis', () => createRedisEventBus({ url }), { describe, it, expect });
 * ```
 */
export function describeEventBusConformance(
  name: string,
  create: () => EventBus | Promise<EventBus>,
  api: ConformanceTestApi,
  options: SessionConformanceOptions<EventBus> = {},
): void {
  describeCases(`EventBus conformance: ${name}`, eventBusConformanceCases, () => create(), api, options);
}
