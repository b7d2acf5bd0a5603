// @ts-check
// CPU per model turn as runs get longer: the history grows with every turn, so each request
// carries more. Measured end to end against the mock (HTTP, JSON, SSE) and in process, where
// the model's chunks are prepared objects and only the loop's own work remains.
import { measurement } from '../measure.mjs';
import { cell, ratioCell, table, violationsCell } from '../report.mjs';
import { problemsOf } from './scenario.mjs';

/**
 * Runs per process for runs of `turns` turns: about as many turns per process as N five-turn
 * runs make, and never fewer than two runs (one more run is the measured cost).
 * @param {import('./scenario.mjs').BenchConfig} config
 * @param {number} turns
 */
export function runsFor(config, turns) {
  return Math.max(2, Math.round((config.runs * 5) / turns));
}

/**
 * @param {import('./scenario.mjs').BenchConfig} config
 * @param {number} turns
 */
function specsFor(config, turns) {
  const runs = runsFor(config, turns);
  return {
    floorMock: measurement('floor', 'mock', turns, runs),
    oursMock: measurement('ours', 'mock', turns, runs),
    oursInProcess: measurement('ours', 'in-process', turns, runs),
    floorInProcess: measurement('floor', 'in-process', turns, runs),
  };
}

/** @type {import('./scenario.mjs').Scenario} */
export const turnScaling = {
  name: 'turns',
  measurements: (config) => config.turnCounts.flatMap((turns) => Object.values(specsFor(config, turns))),
  report(samplesOf, config) {
    const rows = [];
    const all = [];
    const inProcessAt = (/** @type {number} */ turns) => samplesOf(specsFor(config, turns).oursInProcess.id);
    const baseTurns = config.turnCounts.includes(50) ? 50 : undefined;
    for (const turns of config.turnCounts) {
      const specs = specsFor(config, turns);
      const floorMock = samplesOf(specs.floorMock.id);
      const oursMock = samplesOf(specs.oursMock.id);
      const oursInProcess = samplesOf(specs.oursInProcess.id);
      const floorInProcess = samplesOf(specs.floorInProcess.id);
      const perTurn = (/** @type {import('../measure.mjs').Sample} */ sample) => sample.cpuPerRunMs / turns;
      const samples = [...floorMock, ...oursMock, ...oursInProcess, ...floorInProcess];
      all.push(...samples);
      rows.push([
        String(turns),
        String(specs.oursMock.runs),
        cell(floorMock, perTurn, ' ms'),
        cell(oursMock, perTurn, ' ms'),
        ratioCell(oursMock, floorMock, perTurn),
        cell(oursInProcess, perTurn, ' ms'),
        cell(floorInProcess, perTurn, ' ms'),
        baseTurns === undefined
          ? 'n/a'
          : ratioCell(oursInProcess, inProcessAt(baseTurns), (sample) => sample.cpuPerRunMs / (sample.turns)),
        violationsCell(samples),
      ]);
    }
    return {
      markdown: [
        '### CPU per model turn by run length',
        '',
        'End to end, both contenders send the whole history every turn (the API is stateless), so that part grows with the run for everyone. In process, the model answers from prepared objects: what remains is the loop alone.',
        '',
        table(
          [
            'turns per run',
            'runs per process',
            'floor, mock',
            '@org/core, mock',
            '@org/core / floor, mock',
            '@org/core, in process',
            'floor, in process',
            '@org/core in process, per turn / at 50 turns',
            'signature violations',
          ],
          rows,
        ),
      ].join('\n'),
      problems: problemsOf(all),
    };
  },
};
