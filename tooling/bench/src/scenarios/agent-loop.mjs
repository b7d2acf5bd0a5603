// @ts-check
// The headline: the five-turn tool loop against the mock over HTTP, N runs per process, the
// floor client next to our runtime.
import { measurement } from '../measure.mjs';
import { cell, ratioCell, table, violationsCell } from '../report.mjs';
import { STANDARD_TURNS } from '../mock/scenario.mjs';
import { problemsOf } from './scenario.mjs';

/**
 * The floor's five-turn runs against the mock.
 * @param {import('./scenario.mjs').BenchConfig} config
 */
export const floorRuns = (config) => measurement('floor', 'mock', STANDARD_TURNS, config.runs);

/**
 * Our runtime's five-turn runs against the mock, run() in the process.
 * @param {import('./scenario.mjs').BenchConfig} config
 */
export const oursRuns = (config) => measurement('ours', 'mock', STANDARD_TURNS, config.runs);

/**
 * Our runtime over Node's global fetch, so the process never imports @org/adapter-node: the
 * start-up of a one-run process that needs nothing but core. Two runs are enough for start-up.
 */
const oursGlobalFetch = () => measurement('ours', 'mock', STANDARD_TURNS, 2, 'global-fetch');

/** @type {import('./scenario.mjs').Scenario} */
export const agentLoop = {
  name: 'agent-loop',
  measurements: (config) => [floorRuns(config), oursRuns(config), oursGlobalFetch()],
  report(samplesOf, config) {
    const floor = samplesOf(floorRuns(config).id);
    const ours = samplesOf(oursRuns(config).id);
    const lean = samplesOf(oursGlobalFetch().id);
    /** @type {Array<[string, import('../report.mjs').Pick, string]>} */
    const figures = [
      ['CPU per 5-turn run', (sample) => sample.cpuPerRunMs, ' ms'],
      ['wall time per 5-turn run', (sample) => sample.wallPerRunMs, ' ms'],
      ['start-up CPU (process start + first run), importing @org/adapter-node', (sample) => sample.startupCpuMs / 1000, ' s'],
      [`peak RSS after ${config.runs} runs`, (sample) => sample.peakRssMb, ' MB'],
      ['peak RSS after one run', (sample) => sample.firstRunRssMb, ' MB'],
    ];
    const rows = figures.map(([label, pick, unit]) => [label, cell(floor, pick, unit), cell(ours, pick, unit), ratioCell(ours, floor, pick)]);
    const startup = (/** @type {import('../measure.mjs').Sample} */ sample) => sample.startupCpuMs / 1000;
    rows.splice(3, 0, ['start-up CPU (process start + first run), core only (global fetch)', cell(floor, startup, ' s'), cell(lean, startup, ' s'), ratioCell(lean, floor, startup)]);
    rows.push(['signature violations', violationsCell(floor), violationsCell([...ours, ...lean]), '']);
    return {
      markdown: [
        `### Five-turn tool loop against the mock (N=${config.runs} runs per process)`,
        '',
        table(['figure', 'floor', '@org/core', '@org/core / floor'], rows),
      ].join('\n'),
      problems: problemsOf([...floor, ...ours, ...lean]),
    };
  },
};
