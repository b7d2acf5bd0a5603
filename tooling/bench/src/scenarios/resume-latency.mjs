// @ts-check
// Resuming a suspended run: the CPU a resume costs before its first event, and how long resumes
// wait for their first event when 1,000 of them arrive at 1,000 per second (open loop) on one
// process. The store is the in-memory one and the model never answers, so the first event (the
// next model request going out) is all that is measured.
import { measurement } from '../measure.mjs';
import { cell, figureOf, table } from '../report.mjs';
import { problemsOf } from './scenario.mjs';

/** Resumes per second arriving in the open-loop part. */
const RATE = 1000;

/** Resumes in the open-loop part: a second's worth, a fifth of it in quick mode. */
const resumeCount = (/** @type {import('./scenario.mjs').BenchConfig} */ config) => (config.quick ? 200 : 1000);

/** @param {import('./scenario.mjs').BenchConfig} config */
const resumes = (config) =>
  measurement('resume', 'in-process', 1, config.runs, undefined, { BENCH_RESUMES: String(resumeCount(config)), BENCH_RESUME_RATE: String(RATE) });

/** @type {import('./scenario.mjs').Scenario} */
export const resumeLatency = {
  name: 'resume',
  measurements: (config) => [resumes(config)],
  report(samplesOf, config) {
    const samples = samplesOf(resumes(config).id);
    const RESUMES = resumeCount(config);
    /** @param {string} name */
    const figure = (name) => (/** @type {import('../measure.mjs').Sample} */ sample) => figureOf(sample, name);
    return {
      markdown: [
        `### Resuming suspended runs (memory store, a model that never answers)`,
        '',
        table(
          ['figure', '@org/core'],
          [
            [`CPU per resume before its first event (${config.runs} resumes one after another)`, cell(samples, figure('cpuPerResumeMs'), ' ms')],
            [`resume → first event, p50 (${RESUMES} resumes arriving at ${RATE}/s)`, cell(samples, figure('firstEventP50Ms'), ' ms')],
            [`resume → first event, p99 (${RESUMES} resumes arriving at ${RATE}/s)`, cell(samples, figure('firstEventP99Ms'), ' ms')],
            [`resume → first event, slowest`, cell(samples, figure('firstEventMaxMs'), ' ms')],
          ],
        ),
      ].join('\n'),
      problems: problemsOf(samples),
    };
  },
};
