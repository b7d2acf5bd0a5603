// @ts-check
// Sessions on two instances sharing one Redis (`contenders/shared-sessions.mjs`): each session
// started on one instance and streamed from the other while it runs. Every stream is checked
// (nothing lost, repeated, out of order or from another session); the figures are throughput and
// the delay from an event's append on the running instance to its delivery on the other. Without
// redis-server the table says so and nothing fails.
import { measurement } from '../measure.mjs';
import { cell, figureOf, table } from '../report.mjs';
import { problemsOf } from './scenario.mjs';

/** Sessions in flight at once. */
const CONCURRENCY = 100;
/** Thoughts per session, and the model's pause before each. */
const THOUGHTS = 10;
const GAP_MS = 10;

/** @param {import('./scenario.mjs').BenchConfig} config */
const sessions = (config) =>
  measurement('shared-sessions', 'http', 1, config.sessions, undefined, {
    BENCH_SESSION_CONCURRENCY: String(CONCURRENCY),
    BENCH_SESSION_THOUGHTS: String(THOUGHTS),
    BENCH_THOUGHT_GAP_MS: String(GAP_MS),
    ...(process.env.REDIS_SERVER ? { REDIS_SERVER: process.env.REDIS_SERVER } : {}),
  });

/** @type {import('./scenario.mjs').Scenario} */
export const sharedSessions = {
  name: 'shared-sessions',
  measurements: (config) => [sessions(config)],
  report(samplesOf, config) {
    const samples = samplesOf(sessions(config).id);
    const heading = `### Sessions across two instances on one Redis (${config.sessions} sessions, ${CONCURRENCY} at a time, ${THOUGHTS} thoughts ${GAP_MS} ms apart)`;
    const skipped = samples.find((sample) => sample.skipped !== undefined)?.skipped;
    if (skipped) return { markdown: [heading, '', `Skipped: ${skipped}.`].join('\n'), problems: [] };
    /** @param {string} name */
    const figure = (name) => (/** @type {import('../measure.mjs').Sample} */ sample) => figureOf(sample, name);
    /** @type {import('../report.mjs').Pick} */
    const faults = (sample) =>
      ['lost', 'duplicated', 'misrouted', 'outOfOrder', 'thoughtMismatches', 'unfinished', 'replayMismatches', 'ranElsewhere'].reduce(
        (sum, name) => sum + (sample.figures[name] ?? Number.NaN),
        0,
      );
    const sum = (/** @type {string} */ name) => samples.reduce((total, sample) => total + figureOf(sample, name), 0);
    return {
      markdown: [
        heading,
        '',
        table(
          ['figure', '@org/core + @org/adapter-node/redis'],
          [
            ['sessions per second (wall time)', cell(samples, figure('sessionsPerSecond'), '')],
            ['events per second (wall time)', cell(samples, figure('eventsPerSecond'), '')],
            ['append → delivery on the other instance, p50', cell(samples, figure('delayP50Ms'), ' ms')],
            ['append → delivery on the other instance, p99', cell(samples, figure('delayP99Ms'), ' ms')],
            ['append → delivery on the other instance, slowest', cell(samples, figure('delayMaxMs'), ' ms')],
            ['events delivered (followed live)', `${sum('events')} (${sum('liveEvents')})`],
            ['events lost, repeated, out of order or misrouted', String(samples.reduce((total, sample) => total + faults(sample), 0))],
          ],
        ),
      ].join('\n'),
      problems: problemsOf(samples),
    };
  },
};
