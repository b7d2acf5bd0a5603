// @ts-check
// `pnpm bench`: starts the mock Gemini, runs every measurement of the selected scenarios REPS
// times (interleaved, so drift of the machine spreads over all of them), prints one markdown
// table per scenario, and writes every sample to OUT/results.json. Knobs: see docs/benchmarks.md.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runSharedHarness } from './harness/shared-harness.mjs';
import { measure } from './measure.mjs';
import { listeningUrl, SOURCE_DIR, startNode, stopAll } from './processes.mjs';
import { SCENARIOS } from './scenarios/index.mjs';

/** @typedef {import('./scenarios/scenario.mjs').BenchConfig} BenchConfig */

/** Relative paths in OUT and BENCH_HARNESS are taken from the repository root, where `pnpm bench` runs. */
const REPOSITORY_ROOT = path.resolve(SOURCE_DIR, '..', '..', '..');

/**
 * @param {string} name
 * @param {number} fallback
 * @param {number} minimum
 */
function integer(name, fallback, minimum) {
  const raw = process.env[name];
  const value = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isInteger(value) || value < minimum) throw new Error(`${name} must be an integer of at least ${minimum}, not ${raw}`);
  return value;
}

/** @returns {BenchConfig} */
function readConfig() {
  const quick = process.env.BENCH_QUICK === '1';
  const turnCounts = (process.env.TURN_COUNTS || (quick ? '5,50,200' : '5,50,200,1000')).split(',').map((text) => Number(text.trim()));
  if (turnCounts.some((turns) => !Number.isInteger(turns) || turns < 2 || turns > 10_000)) {
    throw new Error('TURN_COUNTS must list whole numbers from 2 to 10000, e.g. 5,50,200');
  }
  return {
    runs: integer('N', quick ? 20 : 200, 2),
    reps: integer('REPS', quick ? 1 : 3, 1),
    turnCounts,
    chunkChars: integer('CHUNK_CHARS', 200, 1),
    model: process.env.MODEL || 'gemini-2.5-flash',
    quick,
    timeoutSeconds: integer('TIMEOUT_S', 300, 1),
    sessions: integer('BENCH_SESSIONS', quick ? 100 : 1000, 1),
  };
}

function selectScenarios() {
  const wanted = process.env.BENCH_SCENARIOS?.split(',').map((name) => name.trim()).filter(Boolean);
  if (!wanted || wanted.length === 0) return SCENARIOS;
  return wanted.map((name) => {
    const scenario = SCENARIOS.find((candidate) => candidate.name === name);
    if (!scenario) throw new Error(`No scenario ${name}; there are ${SCENARIOS.map((candidate) => candidate.name).join(', ')}`);
    return scenario;
  });
}

/** @returns {Promise<import('./measure.mjs').MockServer & { stop(): Promise<void> }>} */
async function startMock(/** @type {BenchConfig} */ config) {
  const started = startNode('mock/server.mjs', { PORT: '0', CHUNK_CHARS: String(config.chunkChars) }, { timeoutSeconds: 3600 });
  const url = await listeningUrl(started, 'the mock Gemini');
  const call = async (/** @type {string} */ method, /** @type {string} */ route) => {
    const response = await fetch(`${url}${route}`, { method });
    if (!response.ok) throw new Error(`mock ${method} ${route}: ${response.status}`);
    return response.json();
  };
  return {
    url,
    reset: async () => void (await call('POST', '/reset')),
    stats: () => call('GET', '/stats'),
    stop: async () => {
      started.child.kill('SIGTERM');
      await started.exited;
    },
  };
}

/** @param {string} text */
const progress = (text) => process.stderr.write(`${text}\n`);

/** @param {number} value */
const short = (value) => (Number.isFinite(value) ? value.toFixed(2) : 'n/a');

async function main() {
  const config = readConfig();
  const scenarios = selectScenarios();
  /** @type {Map<string, import('./measure.mjs').Measurement>} */
  const plan = new Map();
  for (const scenario of scenarios) for (const spec of scenario.measurements(config)) plan.set(spec.id, spec);
  const started = Date.now();
  progress(`# @org/bench: ${plan.size} measurements x ${config.reps} repetitions, N=${config.runs}${config.quick ? ' (quick)' : ''}`);

  const mock = await startMock(config);
  const compileCache = process.env.BENCH_COMPILE_CACHE === '0' ? undefined : path.join(os.tmpdir(), 'org-bench-compile-cache');
  const context = { mock, chunkChars: config.chunkChars, model: config.model, timeoutSeconds: config.timeoutSeconds, compileCache };
  /** @type {import('./measure.mjs').Sample[]} */
  const samples = [];
  try {
    if (!config.quick) {
      // One short process per kind of contender first: files come into the disk cache, and a
      // broken setup shows before minutes of measuring.
      const kinds = new Map([...plan.values()].map((spec) => [`${spec.contender}/${spec.backend}`, { ...spec, runs: 1 }]));
      for (const [kind, spec] of kinds) {
        const sample = await measure({ ...spec, id: `warm-up ${kind}` }, 0, context);
        progress(`  warm-up ${kind}: ${sample.problems.length > 0 ? `PROBLEM ${sample.problems.join('; ')}` : 'ok'}`);
        if (sample.problems.length > 0) throw new Error(`the warm-up of ${kind} failed`);
      }
    }
    for (let rep = 1; rep <= config.reps; rep += 1) {
      for (const spec of plan.values()) {
        const sample = await measure(spec, rep, context);
        samples.push(sample);
        progress(
          `  rep ${rep} ${spec.id.padEnd(40)} cpu/run ${short(sample.cpuPerRunMs)} ms  start-up ${short(sample.startupCpuMs)} ms  rss ${short(sample.peakRssMb)} MB${sample.problems.length > 0 ? `  PROBLEM ${sample.problems.join('; ')}` : ''}${sample.skipped ? `  skipped: ${sample.skipped}` : ''}`,
        );
      }
    }
  } finally {
    await mock.stop();
  }

  const samplesOf = (/** @type {string} */ id) => samples.filter((sample) => sample.id === id);
  const reports = scenarios.map((scenario) => scenario.report(samplesOf, config));
  const problems = reports.flatMap((report) => report.problems);
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const markdown = [
    '## @org/bench',
    '',
    `${new Date().toISOString().slice(0, 10)} · Node ${process.versions.node} · ${cpu} · ${os.cpus().length} cores · N=${config.runs} · REPS=${config.reps} · CHUNK_CHARS=${config.chunkChars}${config.quick ? ' · quick' : ''}`,
    '',
    'CPU and wall time per run are the cost of one more run in a process: (after the last run − after the first) / (N − 1).',
    'Each figure is the median over the repetitions; parentheses give the smallest and largest.',
    '',
    ...reports.flatMap((report) => [report.markdown, '']),
    ...(problems.length > 0 ? ['**Problems** (these figures cannot be trusted):', '', ...problems.map((problem) => `- ${problem}`), ''] : []),
    `Total wall time: ${Math.round((Date.now() - started) / 1000)} s.`,
  ].join('\n');
  process.stdout.write(`${markdown}\n`);

  const out = process.env.OUT ? path.resolve(REPOSITORY_ROOT, process.env.OUT) : path.join(SOURCE_DIR, '..', 'results');
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(path.join(out, 'results.json'), `${JSON.stringify({ config, node: process.versions.node, cpu, cores: os.cpus().length, samples }, null, 2)}\n`);
  fs.writeFileSync(path.join(out, 'results.md'), `${markdown}\n`);

  let exitCode = problems.length > 0 ? 1 : 0;
  if (process.env.BENCH_HARNESS) {
    const harness = path.resolve(REPOSITORY_ROOT, process.env.BENCH_HARNESS);
    progress(`# external harness at ${harness}`);
    const code = await runSharedHarness({ harness, runs: config.runs, reps: config.reps, out: path.join(out, 'harness') });
    if (code !== 0) exitCode = code;
  }
  process.exitCode = exitCode;
}

for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM'])) {
  process.once(signal, () => {
    stopAll();
    process.exit(130);
  });
}
main().catch((error) => {
  stopAll();
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exitCode = 1;
});
