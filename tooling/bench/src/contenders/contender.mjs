// @ts-check
// What every contender process shares: its settings from the environment, and the loop that runs
// the scenario N times and reports the process's own CPU and memory at two points (after the
// first run and after the last), so the runner can take the cost of one more run as a difference.
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { createInProcessBackend } from '../mock/in-process-backend.mjs';

/**
 * @typedef {object} Snapshot
 * @property {number} cpuMicros user + system CPU of this process since it started
 * @property {number} wallMs milliseconds since the process started
 * @property {number} maxRssKb peak resident set size so far
 */

/**
 * @typedef {object} ContenderSettings
 * @property {number} runs scenario runs to perform, one after another
 * @property {number} turns model turns per run
 * @property {'mock' | 'in-process'} backend where the model answers from
 * @property {string} mockUrl the mock's base URL, `/turns/{T}` included; Gemini paths go after it
 * @property {string} model
 * @property {number} chunkChars
 */

/** The contender's settings, read from the environment the runner gives it. */
export function contenderSettings() {
  const backend = process.env.BENCH_BACKEND === 'in-process' ? 'in-process' : 'mock';
  const mockUrl = process.env.MOCK_URL ?? '';
  if (backend === 'mock' && mockUrl === '') throw new Error('MOCK_URL is required');
  /** @type {ContenderSettings} */
  const settings = {
    runs: positive('BENCH_RUNS', 1),
    turns: positive('BENCH_TURNS', 5),
    backend,
    mockUrl,
    model: process.env.MODEL || 'gemini-2.5-flash',
    chunkChars: positive('CHUNK_CHARS', 200),
  };
  return settings;
}

/**
 * @param {string} name
 * @param {number} fallback
 */
function positive(name, fallback) {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`);
  return value;
}

/**
 * The in-process backend for these settings (it answers without HTTP or JSON).
 * @param {ContenderSettings} settings
 */
export function inProcessBackend(settings) {
  return createInProcessBackend({ turns: settings.turns, chunkChars: settings.chunkChars });
}

/** This process's CPU, wall clock and peak memory now. @returns {Snapshot} */
export function snapshot() {
  const cpu = process.cpuUsage();
  return { cpuMicros: cpu.user + cpu.system, wallMs: performance.now(), maxRssKb: process.resourceUsage().maxRSS };
}

/**
 * Writes this process's figures where the runner reads them (`BENCH_RESULT`).
 * @param {Record<string, unknown>} result
 */
export function report(result) {
  const file = process.env.BENCH_RESULT;
  if (file) fs.writeFileSync(file, JSON.stringify(result));
}

/**
 * Runs `runOnce` `settings.runs` times, prints the last run's answer, and reports the figures.
 * @param {ContenderSettings} settings
 * @param {() => Promise<string>} runOnce resolves to the run's final answer
 * @param {{ backendStats?: () => unknown, close?: () => Promise<void> }} [hooks]
 */
export async function runContender(settings, runOnce, hooks = {}) {
  let answer = '';
  let first = snapshot();
  for (let index = 0; index < settings.runs; index += 1) {
    answer = await runOnce();
    if (index === 0) first = snapshot();
  }
  const last = snapshot();
  await hooks.close?.();
  report({ runs: settings.runs, first, last, backend: hooks.backendStats?.() });
  process.stdout.write(`${answer}\n`);
}
