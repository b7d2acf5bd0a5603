// @ts-check
// Resuming suspended runs: how much CPU a resume costs before its first event, and how long a
// resume waits for its first event when resumes arrive faster than one at a time. Runs with the
// default function groups (the Opal protocol) ask the user a question and suspend; each is then
// resumed with an answer, the in-memory store, and a model that never answers, so the first event
// (the next model request going out) is the whole of what is measured.
//
//   1. BENCH_RUNS resumes one after another: CPU from calling resume() to its first event.
//   2. BENCH_RESUMES resumes arriving open loop at BENCH_RESUME_RATE per second: the time from
//      each one's scheduled arrival to its first event.
import { performance } from 'node:perf_hooks';
import { resume, run } from '@org/core';
import { createMemoryInteractionStore } from '@org/core/testing';
import { report } from './contender.mjs';

const sequential = Number(process.env.BENCH_RUNS || 200);
const openLoop = Number(process.env.BENCH_RESUMES || 1000);
const rate = Number(process.env.BENCH_RESUME_RATE || 1000);
const warmUp = 20;

const ask = {
  candidates: [
    {
      content: { role: 'model', parts: [{ functionCall: { name: 'chat_request_user_input', args: { user_message: 'Which city?', input_type: 'text' } }, thoughtSignature: 'c2lnbmF0dXJl' }] },
      finishReason: 'STOP',
      index: 0,
    },
  ],
};
let answering = true;
const unsupported = () => Promise.reject(new Error('the resume bench backend only answers model requests'));
/** @type {import('@org/core').BackendClient} */
const backend = {
  async *streamGenerateContent(_model, _body, signal) {
    if (answering) {
      yield ask;
      return;
    }
    // The model never answers; the run waits until it is stopped.
    await new Promise((resolve) => {
      if (signal?.aborted) resolve(undefined);
      else signal?.addEventListener('abort', resolve, { once: true });
    });
  },
  executeStep: unsupported,
  uploadGeminiFile: unsupported,
  uploadBlobFile: unsupported,
};
const ports = { backend, store: createMemoryInteractionStore() };
const start = { segments: [{ type: /** @type {const} */ ('text'), text: 'Ask me for a city, then tell me its weather.' }] };
const answer = /** @type {import('@org/core').ResumeResponse} */ (/** @type {unknown} */ ({ input: { role: 'user', parts: [{ text: 'Lisbon' }] } }));

/** Suspends one run and returns its interaction id. */
async function suspended() {
  let id;
  for await (const event of run(start, ports)) {
    if (event.type === 'waitForInput') id = event.interactionId;
    else if (event.type === 'error') throw new Error(event.message);
  }
  if (!id) throw new Error('the run did not suspend');
  return id;
}

const ids = [];
for (let index = 0; index < warmUp + sequential + openLoop; index += 1) ids.push(await suspended());
answering = false;

/** @param {AsyncGenerator<import('@org/core').RunEvent>} events */
async function firstEvent(events) {
  const first = await events.next();
  if (first.done || first.value.type !== 'sendRequest') throw new Error(`a resume began with ${first.done ? 'nothing' : first.value.type}, not sendRequest`);
}

const cpuMicros = () => {
  const usage = process.cpuUsage();
  return usage.user + usage.system;
};

// 1. One at a time.
let spent = 0;
for (let index = 0; index < warmUp + sequential; index += 1) {
  const before = cpuMicros();
  const events = resume(/** @type {string} */ (ids[index]), answer, ports);
  await firstEvent(events);
  if (index >= warmUp) spent += cpuMicros() - before;
  await events.return(undefined);
  // Stopping a run releases its claim in the background: let that finish outside the next window.
  await new Promise((resolve) => setTimeout(resolve, 1));
}

// 2. Open loop: arrivals on a fixed schedule, whether or not earlier ones have their first event.
const pending = ids.slice(warmUp + sequential);
const interval = 1000 / rate;
/** @type {number[]} */
const latencies = [];
/** @type {AsyncGenerator<import('@org/core').RunEvent>[]} */
const running = [];
const began = performance.now() + 5;
await new Promise((resolve, reject) => {
  let launched = 0;
  const tick = () => {
    const now = performance.now();
    while (launched < pending.length && began + launched * interval <= now) {
      const scheduled = began + launched * interval;
      const events = resume(/** @type {string} */ (pending[launched]), answer, ports);
      launched += 1;
      running.push(events);
      firstEvent(events).then(() => {
        latencies.push(performance.now() - scheduled);
        if (latencies.length === pending.length) resolve(undefined);
      }, reject);
    }
    if (launched < pending.length) setTimeout(tick, Math.max(0, began + launched * interval - performance.now()));
  };
  tick();
});
await Promise.all(running.map((events) => events.return(undefined)));

latencies.sort((a, b) => a - b);
const percentile = (/** @type {number} */ p) => /** @type {number} */ (latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)]);
report({
  figures: {
    cpuPerResumeMs: spent / 1000 / sequential,
    firstEventP50Ms: percentile(50),
    firstEventP99Ms: percentile(99),
    firstEventMaxMs: /** @type {number} */ (latencies.at(-1)),
    resumes: latencies.length,
    ratePerSecond: rate,
  },
});
process.stdout.write(`${latencies.length} resumes\n`);
