// @ts-check
// One measurement: a contender process doing `runs` runs of a `turns`-turn scenario against one
// backend, and what it costs. Figures come from the process itself (process.cpuUsage and
// resourceUsage at the end of its first and of its last run), correctness from the backend's
// counters and the answer the process prints.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expectedAnswer } from './mock/scenario.mjs';
import { killGroup, listeningUrl, startNode } from './processes.mjs';

/**
 * @typedef {'floor' | 'ours' | 'ours-server' | 'sse-server' | 'sse-floor-server' | 'resume' | 'shared-sessions'} ContenderName
 * @typedef {'mock' | 'in-process' | 'http'} BackendKind
 */

/**
 * @typedef {object} Measurement
 * @property {string} id the same id means the same measurement, run once per repetition
 * @property {ContenderName} contender
 * @property {BackendKind} backend `http`: our server process behind loopback, driven by a client process, with the mock as its model
 * @property {number} turns model turns per run
 * @property {number} runs runs per process
 * @property {string} [variant] passed to the contender as BENCH_VARIANT (`prefix-on`, `event-stream`, `global-fetch`, ...)
 * @property {Record<string, string>} [env] more settings for the contender
 */

/**
 * @typedef {object} Sample
 * @property {string} id
 * @property {number} rep
 * @property {number} runs
 * @property {number} turns
 * @property {number} cpuPerRunMs CPU of one more run: (CPU after the last run − CPU after the first) / (runs − 1)
 * @property {number} wallPerRunMs wall time of one more run, the same way
 * @property {number} startupCpuMs CPU from process start to the end of the first run
 * @property {number} peakRssMb peak RSS after all runs
 * @property {number} firstRunRssMb peak RSS after the first run
 * @property {number} requests model requests the backend answered
 * @property {{ checked: number, violations: number, first: string | null }} signatures
 * @property {number} mockCpuPerRunMs the mock's CPU per run (0 in process)
 * @property {Sample | undefined} client for `http`: the client process's own figures
 * @property {Record<string, number>} figures figures of their own that some contenders report, and what the mock saw
 * @property {string[]} problems why the sample cannot be trusted (empty when it can)
 * @property {string} [skipped] why the measurement did not run (something it needs is missing here)
 */

/**
 * @typedef {object} MockServer
 * @property {string} url
 * @property {() => Promise<void>} reset
 * @property {() => Promise<any>} stats
 */

/**
 * @typedef {object} MeasureContext
 * @property {MockServer} mock
 * @property {number} chunkChars
 * @property {string} model
 * @property {number} timeoutSeconds
 * @property {string} [compileCache] folder for Node's module compile cache (NODE_COMPILE_CACHE)
 */

/**
 * A measurement description with its id.
 * @param {ContenderName} contender
 * @param {BackendKind} backend
 * @param {number} turns
 * @param {number} runs
 * @param {string} [variant]
 * @param {Record<string, string>} [env]
 * @returns {Measurement}
 */
export function measurement(contender, backend, turns, runs, variant, env) {
  /** @type {Measurement} */
  const spec = { id: `${contender}/${backend}/${turns}-turns/${runs}-runs${variant ? `/${variant}` : ''}`, contender, backend, turns, runs };
  if (variant) spec.variant = variant;
  if (env) spec.env = env;
  return spec;
}

/**
 * Runs one measurement once and returns its figures.
 * @param {Measurement} spec
 * @param {number} rep
 * @param {MeasureContext} context
 * @returns {Promise<Sample>}
 */
export async function measure(spec, rep, context) {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'org-bench-'));
  try {
    await context.mock.reset();
    const env = {
      MOCK_URL: `${context.mock.url}/turns/${spec.turns}`,
      MODEL: context.model,
      CHUNK_CHARS: String(context.chunkChars),
      BENCH_TURNS: String(spec.turns),
      BENCH_RUNS: String(spec.runs),
      BENCH_BACKEND: spec.backend === 'in-process' ? 'in-process' : 'mock',
      ...(process.env.BENCH_FETCH ? { BENCH_FETCH: process.env.BENCH_FETCH } : {}),
      ...(spec.variant === 'global-fetch' ? { BENCH_FETCH: 'global' } : spec.variant ? { BENCH_VARIANT: spec.variant } : {}),
      // Node 22.1+ keeps compiled module code here between processes (older Node ignores it); every contender gets it.
      ...(context.compileCache ? { NODE_COMPILE_CACHE: context.compileCache } : {}),
      ...spec.env,
    };
    const limit = { timeoutSeconds: context.timeoutSeconds };
    /** @type {string[]} */
    const problems = [];
    let sample;
    if (spec.contender === 'resume') {
      const started = startNode('contenders/resume.mjs', { ...env, BENCH_RESULT: path.join(folder, 'result.json') }, limit);
      const exit = await started.exited;
      problems.push(...exitProblems(spec.contender, exit, started.stderr()));
      const result = readResult(path.join(folder, 'result.json'));
      if (!result?.figures) problems.push('the process reported no figures');
      const expected = `${result?.figures?.resumes ?? '?'} resumes`;
      if (started.stdout().trim() !== expected || !(result?.figures?.resumes > 0)) problems.push(`unexpected answer: ${JSON.stringify(started.stdout().trim().slice(0, 80))}`);
      return { ...toSample(spec, rep, undefined, []), problems, figures: result?.figures ?? {} };
    }
    if (spec.contender === 'shared-sessions') {
      const started = startNode('contenders/shared-sessions.mjs', { ...env, BENCH_RESULT: path.join(folder, 'result.json') }, limit);
      const exit = await started.exited;
      problems.push(...exitProblems(spec.contender, exit, started.stderr()));
      const result = readResult(path.join(folder, 'result.json'));
      /** @type {Sample} */
      const sample = { ...toSample(spec, rep, undefined, []), problems, figures: result?.figures ?? {} };
      if (typeof result?.skipped === 'string') return { ...sample, skipped: result.skipped };
      if (!result?.figures) problems.push('the process reported no figures');
      const figures = sample.figures;
      for (const fault of ['lost', 'duplicated', 'misrouted', 'outOfOrder', 'thoughtMismatches', 'unfinished', 'replayMismatches', 'ranElsewhere']) {
        if ((figures[fault] ?? 0) > 0) problems.push(`${figures[fault]} ${fault}`);
      }
      if (started.stdout().trim() !== `${spec.runs} sessions verified`) problems.push(`unexpected answer: ${JSON.stringify(started.stdout().trim().slice(0, 80))}`);
      return sample;
    }
    if (spec.backend === 'http') {
      const serverResult = path.join(folder, 'server.json');
      const sse = spec.contender === 'sse-server' || spec.contender === 'sse-floor-server';
      const server = startNode(sse ? `contenders/${spec.contender}.mjs` : 'contenders/ours-server.mjs', { ...env, BENCH_RESULT: serverResult }, limit);
      let client;
      try {
        const serverUrl = await listeningUrl(server, 'the agent server');
        client = startNode(sse ? 'contenders/sse-client.mjs' : 'contenders/agent-client.mjs', { ...env, SERVER_URL: serverUrl, BENCH_RESULT: path.join(folder, 'client.json') }, limit);
        const clientExit = await client.exited;
        problems.push(...exitProblems('client', clientExit, client.stderr()));
      } finally {
        killGroup(server.child, 'SIGTERM');
      }
      const serverExit = await server.exited;
      if (serverExit.code !== 0) problems.push(...exitProblems('server', serverExit, server.stderr()));
      const reported = readResult(serverResult);
      sample = toSample(spec, rep, reported, problems);
      const clientSample = toSample(spec, rep, readResult(path.join(folder, 'client.json')), []);
      sample.client = clientSample;
      if (sse) {
        const events = Number(/^(\d+) events$/.exec(client.stdout().trim())?.[1] ?? Number.NaN);
        if (!(events > 0)) problems.push(`unexpected answer: ${JSON.stringify(client.stdout().trim().slice(0, 80))}`);
        sample.figures.eventsPerRun = events;
        sample.figures.eventsPerCoreSecond = events / (sample.cpuPerRunMs / 1000);
        // The same after the server's warm-up runs: a long-lived server's pace, once its code is compiled.
        const warm = reported?.warm;
        if (warm && reported.last && reported.runs > warm.runs) {
          const warmCpuPerRunMs = (reported.last.cpuMicros - warm.at.cpuMicros) / 1000 / (reported.runs - warm.runs);
          sample.figures.warmRuns = warm.runs;
          sample.figures.warmEventsPerCoreSecond = events / (warmCpuPerRunMs / 1000);
        }
        return sample;
      }
      checkAnswer(client.stdout(), spec, context, problems);
    } else {
      const script = `contenders/${spec.contender}.mjs`;
      const started = startNode(script, { ...env, BENCH_RESULT: path.join(folder, 'result.json') }, limit);
      const exit = await started.exited;
      problems.push(...exitProblems(spec.contender, exit, started.stderr()));
      sample = toSample(spec, rep, readResult(path.join(folder, 'result.json')), problems);
      checkAnswer(started.stdout(), spec, context, problems);
    }
    const backend = spec.backend === 'in-process' ? sample.backendStats : await context.mock.stats();
    if (backend) {
      sample.requests = backend.requests;
      sample.signatures = {
        checked: backend.signatures.checked,
        violations: backend.signatures.missing + backend.signatures.mismatched,
        first: backend.signatures.firstViolation,
      };
      if (spec.backend !== 'in-process') {
        sample.mockCpuPerRunMs = (backend.cpuSeconds * 1000) / spec.runs;
        sample.figures.requestBytesPerRequest = backend.requestBytes / backend.requests;
        sample.figures.cacheCalls = backend.cacheCalls;
        sample.figures.cacheBytes = backend.cacheBytes;
        sample.figures.cachedRequests = backend.cachedRequests;
      }
      if (backend.extraTurns > 0) problems.push(`${backend.extraTurns} requests went past the last turn`);
      if (backend.badRequests > 0) problems.push(`${backend.badRequests} requests the mock could not read`);
    }
    if (sample.requests !== spec.turns * spec.runs) problems.push(`the backend saw ${sample.requests} requests, expected ${spec.turns * spec.runs}`);
    if (sample.signatures.violations > 0) problems.push(`${sample.signatures.violations} replayed calls lost their signature (first: ${sample.signatures.first})`);
    delete sample.backendStats;
    return sample;
  } finally {
    fs.rmSync(folder, { recursive: true, force: true });
  }
}

/**
 * @param {string} who
 * @param {{ code: number | null, signal: NodeJS.Signals | null, timedOut: boolean }} exit
 * @param {string} stderr
 */
function exitProblems(who, exit, stderr) {
  if (exit.timedOut) return [`${who} timed out`];
  if (exit.code !== 0) return [`${who} exited with ${exit.code ?? exit.signal}: ${stderr.trim().split('\n').slice(-3).join(' | ')}`];
  return [];
}

/**
 * @param {string} stdout
 * @param {Measurement} spec
 * @param {MeasureContext} context
 * @param {string[]} problems
 */
function checkAnswer(stdout, spec, context, problems) {
  const printed = stdout.trim();
  if (printed !== expectedAnswer(spec.turns, context.chunkChars)) problems.push(`unexpected answer: ${JSON.stringify(printed.slice(0, 80))}`);
}

/** @param {string} file */
function readResult(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
}

/**
 * @param {Measurement} spec
 * @param {number} rep
 * @param {any} result what the contender reported, if anything
 * @param {string[]} problems
 * @returns {Sample & { backendStats?: any }}
 */
function toSample(spec, rep, result, problems) {
  const none = Number.NaN;
  if (!result) problems.push('the process reported no figures');
  const first = result?.first;
  const last = result?.last;
  const runs = result?.runs ?? 0;
  const more = runs >= 2 && first && last;
  return {
    id: spec.id,
    rep,
    runs,
    turns: spec.turns,
    cpuPerRunMs: more ? (last.cpuMicros - first.cpuMicros) / 1000 / (runs - 1) : none,
    wallPerRunMs: more ? (last.wallMs - first.wallMs) / (runs - 1) : none,
    startupCpuMs: first ? first.cpuMicros / 1000 : none,
    peakRssMb: last ? last.maxRssKb / 1024 : none,
    firstRunRssMb: first ? first.maxRssKb / 1024 : none,
    requests: 0,
    signatures: { checked: 0, violations: 0, first: null },
    mockCpuPerRunMs: 0,
    client: undefined,
    figures: {},
    problems,
    backendStats: result?.backend,
  };
}
