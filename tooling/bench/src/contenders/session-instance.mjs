// @ts-check
// One instance of a deployment for the shared-sessions scenario: createAgentHandler behind
// serve(), with its sessions, interactions and bus on the Redis at REDIS_URL (under
// BENCH_PREFIX), as a Node user deploys several of them. Its model is in process: each run streams
// BENCH_SESSION_THOUGHTS thoughts, BENCH_THOUGHT_GAP_MS apart, each naming the session's tag from
// the objective, then fulfils the objective with the tag. It wraps its session log to note when
// it hands each event to the log (epoch ms, sub-millisecond), and on SIGTERM writes those notes to
// BENCH_RESULT as a flat array: sessionId, first index, count, time, ... It prints
// `LISTENING <url>`.
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { serve } from '@org/adapter-node';
import { createRedisBackends } from '@org/adapter-node/redis';
import { createAgentHandler } from '@org/core/http';

const url = process.env.REDIS_URL;
if (!url) throw new Error('REDIS_URL is required');
const thoughts = Number(process.env.BENCH_SESSION_THOUGHTS || 10);
const gapMs = Number(process.env.BENCH_THOUGHT_GAP_MS || 10);
const backing = createRedisBackends({ url, prefix: process.env.BENCH_PREFIX || 'bench:' });

/** Epoch milliseconds with the resolution of the performance clock, comparable across processes of one machine. */
const now = () => performance.timeOrigin + performance.now();

/** @type {Array<string | number>} */
const appends = [];
/** @type {import('@org/core').SessionLog} */
const log = {
  create: (id, info) => backing.log.create(id, info),
  get: (id) => backing.log.get(id),
  read: (id, after, limit) => backing.log.read(id, after, limit),
  update: (id, change, from) => backing.log.update(id, change, from),
  async append(id, events) {
    const at = now();
    const first = await backing.log.append(id, events);
    appends.push(id, first, events.length, at);
    return first;
  },
};

/** @param {string} text */
const thought = (text) => ({ candidates: [{ content: { role: 'model', parts: [{ text, thought: true }] }, index: 0 }] });
const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));
const unsupported = () => Promise.reject(new Error('the shared-sessions bench backend only answers model requests'));

/** @type {import('@org/core').BackendClient} */
const backend = {
  async *streamGenerateContent(_model, body) {
    const objective = JSON.stringify(body.contents?.[0] ?? {});
    const tag = /session (s\d+)/.exec(objective)?.[1] ?? 'unknown';
    for (let index = 0; index < thoughts; index += 1) {
      if (gapMs > 0) await sleep(gapMs);
      yield thought(`${tag} thought ${index}`);
    }
    yield {
      candidates: [
        {
          content: { role: 'model', parts: [{ functionCall: { name: 'system_objective_fulfilled', args: { objective_outcome: `done ${tag}` } } }] },
          finishReason: 'STOP',
          index: 0,
        },
      ],
    };
  },
  executeStep: unsupported,
  uploadGeminiFile: unsupported,
  uploadBlobFile: unsupported,
};

const handler = createAgentHandler({
  createPorts: () => ({ backend, store: backing.store }),
  sessions: { log, bus: backing.bus },
});
const server = await serve({ handler, port: 0, maxConnections: 10_000 });
process.stdout.write(`LISTENING ${server.url}\n`);

process.once('SIGTERM', () => {
  if (process.env.BENCH_RESULT) fs.writeFileSync(process.env.BENCH_RESULT, JSON.stringify(appends));
  void Promise.all([server.close(), backing.close()]).finally(() => process.exit(0));
});
