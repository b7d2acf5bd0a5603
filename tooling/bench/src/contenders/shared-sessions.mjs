// @ts-check
// Sessions across two instances sharing one Redis: BENCH_RUNS sessions, at most
// BENCH_SESSION_CONCURRENCY at a time, each started on one instance (alternating) and streamed
// from the other while it runs. Every stream is checked: exactly its own events, indexes
// contiguous from 0, its thoughts once each and in order, ending in `complete`, and equal to a
// replay from the instance that ran it. Figures: sessions and events per second of wall time, and
// the delay of each event from the moment the running instance handed it to the log to the moment
// this process read it from the other instance's stream (same machine, same clock).
//
// With no redis-server (REDIS_SERVER, PATH, the usual places) it reports `skipped` and exits 0.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseSseStream } from '@org/core';
import { findRedisServer, startRedisServer } from '../redis-server.mjs';
import { report } from './contender.mjs';

const sessions = Number(process.env.BENCH_RUNS || 1000);
const concurrency = Number(process.env.BENCH_SESSION_CONCURRENCY || 100);
const thoughts = Number(process.env.BENCH_SESSION_THOUGHTS || 10);
const gapMs = Number(process.env.BENCH_THOUGHT_GAP_MS || 10);
const now = () => performance.timeOrigin + performance.now();

const binary = findRedisServer();
if (!binary) {
  report({ skipped: 'redis-server was not found (install redis-server, or set REDIS_SERVER to its path)', figures: {} });
  process.stdout.write('skipped\n');
  process.exit(0);
}

const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'org-bench-sessions-'));
const redis = await startRedisServer(binary);

/**
 * Starts one instance in this process's group (stopping the group stops it).
 * @param {string} name
 */
async function startInstance(name) {
  const result = path.join(folder, `${name}.json`);
  const child = spawn(process.execPath, [path.join(path.dirname(fileURLToPath(import.meta.url)), 'session-instance.mjs')], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      ...(process.env.NODE_COMPILE_CACHE ? { NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE } : {}),
      REDIS_URL: redis.url,
      BENCH_PREFIX: 'bench:',
      BENCH_RESULT: result,
      BENCH_SESSION_THOUGHTS: String(thoughts),
      BENCH_THOUGHT_GAP_MS: String(gapMs),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.setEncoding('utf8').on('data', (text) => (output += text));
  child.stderr?.setEncoding('utf8').on('data', (text) => (output = (output + text).slice(-4000)));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const url = await new Promise((resolve, reject) => {
    const look = () => {
      const match = /LISTENING (\S+)/.exec(output);
      if (match) resolve(match[1]);
    };
    child.stdout?.on('data', look);
    void exited.then(() => reject(new Error(`instance ${name} exited: ${output}`)));
  });
  return {
    url: /** @type {string} */ (url),
    /** Stops the instance; resolves with its notes of appends. */
    async stop() {
      child.kill('SIGTERM');
      await exited;
      return /** @type {Array<string | number>} */ (JSON.parse(fs.readFileSync(result, 'utf8')));
    },
  };
}

/**
 * @typedef {object} Received
 * @property {number} id
 * @property {string} data
 * @property {number} at when this process read it
 */

/**
 * Reads a session's stream to its end.
 * @param {string} url
 * @returns {Promise<{ events: Received[], envelopes: string[] }>}
 */
async function readStream(url) {
  const response = await fetch(url);
  if (response.status !== 200) throw new Error(`GET ${url}: ${response.status} ${await response.text()}`);
  /** @type {Received[]} */
  const events = [];
  /** @type {string[]} */
  const envelopes = [];
  for await (const message of parseSseStream(/** @type {ReadableStream<Uint8Array>} */ (response.body))) {
    if (message.event === 'event') events.push({ id: Number(message.id), data: message.data, at: now() });
    else envelopes.push(message.event ?? 'message');
  }
  return { events, envelopes };
}

const instances = await Promise.all([startInstance('a'), startInstance('b')]);
/** @type {Array<Array<string | number>>} */
let notes = [[], []];
/**
 * @typedef {object} Outcome
 * @property {string} tag
 * @property {string} sessionId
 * @property {number} starter index of the instance that started (and ran) it
 * @property {Received[]} events
 * @property {string[]} envelopes
 */
/** @type {Outcome[]} */
const outcomes = [];
let began = 0;
let ended = 0;
try {
  /** @param {number} index */
  const one = async (index) => {
    const tag = `s${index}`;
    const starter = index % 2;
    const created = await fetch(`${instances[starter]?.url}/v1beta1/sessions/new`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ segments: [{ textSegment: { text: `Think it over, session ${tag}.` } }] }),
    });
    if (created.status !== 200) throw new Error(`sessions/new: ${created.status} ${await created.text()}`);
    const { sessionId } = /** @type {{ sessionId: string }} */ (await created.json());
    const { events, envelopes } = await readStream(`${instances[1 - starter]?.url}/v1beta1/sessions/${sessionId}?alt=sse`);
    outcomes[index] = { tag, sessionId, starter, events, envelopes };
  };
  began = now();
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, sessions) }, async () => {
      while (next < sessions) await one(next++);
    }),
  );
  ended = now();

  // Checked after the clock stopped: each stream against a replay from the instance that ran it.
  let cursor = 0;
  /** @type {string[][]} */
  const replays = [];
  await Promise.all(
    Array.from({ length: Math.min(20, sessions) }, async () => {
      while (cursor < sessions) {
        const index = cursor++;
        const outcome = /** @type {Outcome} */ (outcomes[index]);
        replays[index] = (await readStream(`${instances[outcome.starter]?.url}/v1beta1/sessions/${outcome.sessionId}?alt=sse`)).events.map((event) => event.data);
      }
    }),
  );
  notes = await Promise.all(instances.map((instance) => instance.stop()));

  /** When each event was handed to the log, by `sessionId:index`, and by which instance. */
  /** @type {Map<string, { at: number, by: number }>} */
  const appended = new Map();
  for (const [by, list] of notes.entries()) {
    for (let offset = 0; offset < list.length; offset += 4) {
      const [id, first, count, at] = /** @type {[string, number, number, number]} */ (list.slice(offset, offset + 4));
      for (let index = first; index < first + count; index += 1) appended.set(`${id}:${index}`, { at, by });
    }
  }

  let lost = 0;
  let duplicated = 0;
  let misrouted = 0;
  let outOfOrder = 0;
  let thoughtMismatches = 0;
  let unfinished = 0;
  let replayMismatches = 0;
  let ranElsewhere = 0;
  let eventCount = 0;
  /** @type {number[]} */
  const delays = [];
  const typeOf = (/** @type {string} */ data) => Object.keys(JSON.parse(data))[0];
  for (const [index, outcome] of outcomes.entries()) {
    const { events, tag, sessionId } = outcome;
    eventCount += events.length;
    const replay = /** @type {string[]} */ (replays[index]);
    const ids = events.map((event) => event.id);
    const unique = new Set(ids).size;
    duplicated += ids.length - unique;
    lost += Math.max(0, replay.length - unique);
    if (ids.some((id, position) => id !== position)) outOfOrder += 1;
    if (events.map((event) => event.data).join('\n') !== replay.join('\n')) replayMismatches += 1;
    // Its own thoughts, each once, in order; nobody else's.
    const texts = events.flatMap((event) => (typeOf(event.data) === 'thought' ? [String(JSON.parse(event.data).thought.text)] : []));
    misrouted += texts.filter((text) => !text.startsWith(`${tag} `)).length;
    const expected = Array.from({ length: thoughts }, (_, thought) => `${tag} thought ${thought}`);
    if (texts.join('\n') !== expected.join('\n')) thoughtMismatches += 1;
    const last = events.at(-1);
    if (!last || typeOf(last.data) !== 'complete' || !last.data.includes(`done ${tag}`) || outcome.envelopes.at(-1) !== 'done') unfinished += 1;
    // Delays of the events appended after this reader had its first event: those it followed live.
    const firstRead = events[0]?.at ?? Number.POSITIVE_INFINITY;
    for (const event of events) {
      const note = appended.get(`${sessionId}:${event.id}`);
      if (!note) continue;
      if (note.by !== outcome.starter) ranElsewhere += 1;
      if (note.at > firstRead) delays.push(event.at - note.at);
    }
  }
  delays.sort((a, b) => a - b);
  const percentile = (/** @type {number} */ p) => delays[Math.min(delays.length - 1, Math.max(0, Math.ceil((p / 100) * delays.length) - 1))] ?? Number.NaN;
  const seconds = (ended - began) / 1000;
  report({
    figures: {
      sessions: outcomes.length,
      events: eventCount,
      sessionsPerSecond: outcomes.length / seconds,
      eventsPerSecond: eventCount / seconds,
      wallSeconds: seconds,
      concurrency,
      liveEvents: delays.length,
      delayP50Ms: percentile(50),
      delayP99Ms: percentile(99),
      delayMaxMs: delays.at(-1) ?? Number.NaN,
      lost,
      duplicated,
      misrouted,
      outOfOrder,
      thoughtMismatches,
      unfinished,
      replayMismatches,
      ranElsewhere,
    },
  });
  const wrong = lost + duplicated + misrouted + outOfOrder + thoughtMismatches + unfinished + replayMismatches + ranElsewhere;
  process.stdout.write(wrong === 0 ? `${outcomes.length} sessions verified\n` : `${wrong} faults\n`);
} finally {
  await Promise.all(instances.map((instance) => instance.stop().catch(() => [])));
  await redis.stop();
  fs.rmSync(folder, { recursive: true, force: true });
}
