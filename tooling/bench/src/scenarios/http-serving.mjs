// @ts-check
// The cost of serving a run over HTTP: the five-turn run through createAgentHandler behind
// adapter-node's serve(), driven by a client process over loopback, against the same run
// through run() in the process. Both talk to the mock as their model; the figures are those
// of the process running the loop.
import { measurement } from '../measure.mjs';
import { STANDARD_TURNS } from '../mock/scenario.mjs';
import { cell, ratioCell, table, violationsCell } from '../report.mjs';
import { oursRuns } from './agent-loop.mjs';
import { problemsOf } from './scenario.mjs';

/**
 * The served runs.
 * @param {import('./scenario.mjs').BenchConfig} config
 */
const servedRuns = (config) => measurement('ours-server', 'http', STANDARD_TURNS, config.runs);

/** @type {import('./scenario.mjs').Scenario} */
export const httpServing = {
  name: 'http',
  measurements: (config) => [oursRuns(config), servedRuns(config)],
  report(samplesOf, config) {
    const inProcess = samplesOf(oursRuns(config).id);
    const served = samplesOf(servedRuns(config).id);
    /** @type {Array<[string, import('../report.mjs').Pick, string]>} */
    const figures = [
      ['CPU per 5-turn run', (sample) => sample.cpuPerRunMs, ' ms'],
      ['start-up CPU (process start + first run)', (sample) => sample.startupCpuMs / 1000, ' s'],
      [`peak RSS after ${config.runs} runs`, (sample) => sample.peakRssMb, ' MB'],
    ];
    const rows = figures.map(([label, pick, unit]) => [label, cell(inProcess, pick, unit), cell(served, pick, unit), ratioCell(served, inProcess, pick)]);
    rows.push(['signature violations', violationsCell(inProcess), violationsCell(served), '']);
    const clients = served.flatMap((sample) => (sample.client ? [sample.client] : []));
    return {
      markdown: [
        `### Serving over HTTP against run() in the process (N=${config.runs})`,
        '',
        table(['figure', 'run() in process', 'served: serve() + createAgentHandler', 'served / in process'], rows),
        '',
        `The client process (createAgentClient over the global fetch) used ${cell(clients, (sample) => sample.cpuPerRunMs, ' ms')} of CPU per run, not counted above.`,
      ].join('\n'),
      problems: problemsOf([...inProcess, ...served]),
    };
  },
};
