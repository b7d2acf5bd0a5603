// @ts-check
// SSE throughput: runs whose model streams many thoughts, each thought one event on the wire. The
// figure is events per second of the server's CPU: through createAgentHandler behind adapter-node's
// serve(), through run() + createSseEventStream (the writer the handler's SSE path uses, without
// the session layer between them), and through the floor: node:http and no library, sending the
// same events. The floor is what this machine allows, whatever the runtime does.
import { measurement } from '../measure.mjs';
import { cell, figureOf, ratioCell, table } from '../report.mjs';
import { problemsOf } from './scenario.mjs';

/** Thoughts the model streams per run. */
const THOUGHTS = 2000;

/**
 * Runs a server does before its warm reading (25 at N=200): a server lives long, and V8 keeps
 * compiling its hot code for the first few hundred thousand events.
 * @param {import('./scenario.mjs').BenchConfig} config
 */
const warmRunsOf = (config) => Math.max(2, Math.round(config.runs / 8));

/**
 * Runs per server process: the warm-up, then N/4 measured (the figure from the second run counts both).
 * @param {import('./scenario.mjs').BenchConfig} config
 */
const runsOf = (config) => warmRunsOf(config) + Math.max(3, Math.round(config.runs / 4));

/** @param {import('./scenario.mjs').BenchConfig} config */
const settingsOf = (config) => ({ BENCH_SSE_THOUGHTS: String(THOUGHTS), BENCH_SSE_WARM_RUNS: String(warmRunsOf(config)) });

/**
 * @param {import('./scenario.mjs').BenchConfig} config
 * @param {'agent-handler' | 'event-stream'} variant
 */
const served = (config, variant) => measurement('sse-server', 'http', 1, runsOf(config), variant, settingsOf(config));

/** @param {import('./scenario.mjs').BenchConfig} config */
const floorServed = (config) => measurement('sse-floor-server', 'http', 1, runsOf(config), undefined, settingsOf(config));

/** @type {import('./scenario.mjs').Scenario} */
export const sseThroughput = {
  name: 'sse',
  measurements: (config) => [floorServed(config), served(config, 'agent-handler'), served(config, 'event-stream')],
  report(samplesOf, config) {
    const floor = samplesOf(floorServed(config).id);
    const handler = samplesOf(served(config, 'agent-handler').id);
    const stream = samplesOf(served(config, 'event-stream').id);
    /** @type {import('../report.mjs').Pick} */
    const warmPerSecond = (sample) => figureOf(sample, 'warmEventsPerCoreSecond') / 1000;
    /** @type {import('../report.mjs').Pick} */
    const perSecond = (sample) => figureOf(sample, 'eventsPerCoreSecond') / 1000;
    /** @type {import('../report.mjs').Pick} */
    const perEvent = (sample) => 1e6 / figureOf(sample, 'warmEventsPerCoreSecond');
    const runs = handler[0]?.runs ?? 0;
    const warmRuns = warmRunsOf(config);
    // The floor must send what ours sends, or the comparison means nothing.
    const mismatched = [...handler, ...stream].flatMap((sample) => {
      const ours = figureOf(sample, 'eventsPerRun');
      const theirs = floor.find((candidate) => candidate.rep === sample.rep);
      return theirs && figureOf(theirs, 'eventsPerRun') !== ours ? [`${sample.id}: ${ours} events per run, the floor sent ${figureOf(theirs, 'eventsPerRun')}`] : [];
    });
    return {
      markdown: [
        `### SSE events per second of server CPU (${THOUGHTS} thoughts per run, ${runs} runs per process; warm: after ${warmRuns} runs)`,
        '',
        table(
          ['figure', 'floor: node:http, no library', 'createAgentHandler', 'run() + createSseEventStream', 'handler / floor', 'stream / floor'],
          [
            ['thousand events per core-second, warm server', cell(floor, warmPerSecond, 'k'), cell(handler, warmPerSecond, 'k'), cell(stream, warmPerSecond, 'k'), ratioCell(handler, floor, warmPerSecond), ratioCell(stream, floor, warmPerSecond)],
            ['thousand events per core-second, from the second run', cell(floor, perSecond, 'k'), cell(handler, perSecond, 'k'), cell(stream, perSecond, 'k'), ratioCell(handler, floor, perSecond), ratioCell(stream, floor, perSecond)],
            ['server CPU per event, warm server', cell(floor, perEvent, ' µs'), cell(handler, perEvent, ' µs'), cell(stream, perEvent, ' µs'), ratioCell(handler, floor, perEvent), ratioCell(stream, floor, perEvent)],
          ],
        ),
      ].join('\n'),
      problems: [...problemsOf([...floor, ...handler, ...stream]), ...mismatched],
    };
  },
};
