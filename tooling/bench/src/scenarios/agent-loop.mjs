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

/** @type {import('./scenario.mjs').Scenario} */
export const agentLoop = {
  name: 'agent-loop',
  measurements: (config) => [floorRuns(config), oursRuns(config)],
  report(samplesOf, config) {
    const floor = samplesOf(floorRuns(config).id);
    const ours = samplesOf(oursRuns(config).id);
    /** @type {Array<[string, import('../report.mjs').Pick, string]>} */
    const figures = [
      ['CPU per 5-turn run', (sample) => sample.cpuPerRunMs, ' ms'],
      ['wall time per 5-turn run', (sample) => sample.wallPerRunMs, ' ms'],
      ['start-up CPU (process start + first run)', (sample) => sample.startupCpuMs / 1000, ' s'],
      [`peak RSS after ${config.runs} runs`, (sample) => sample.peakRssMb, ' MB'],
      ['peak RSS after one run', (sample) => sample.firstRunRssMb, ' MB'],
    ];
    const rows = figures.map(([label, pick, unit]) => [label, cell(floor, pick, unit), cell(ours, pick, unit), ratioCell(ours, floor, pick)]);
    rows.push(['signature violations', violationsCell(floor), violationsCell(ours), '']);
    return {
      markdown: [
        `### Five-turn tool loop against the mock (N=${config.runs} runs per process)`,
        '',
        table(['figure', 'floor', '@org/core', '@org/core / floor'], rows),
      ].join('\n'),
      problems: problemsOf([...floor, ...ours]),
    };
  },
};
