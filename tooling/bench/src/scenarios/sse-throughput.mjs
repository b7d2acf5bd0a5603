// @ts-check
// SSE throughput: runs whose model streams many thoughts, served by adapter-node's serve(), each
// thought one event on the wire. The figure is events per second of the server's CPU: through
// createAgentHandler as it is, and through run() + createSseEventStream (the writer the handler's
// SSE path uses, without the session layer between them).
import { measurement } from '../measure.mjs';
import { cell, figureOf, ratioCell, table } from '../report.mjs';
import { problemsOf } from './scenario.mjs';

/** Thoughts the model streams per run. */
const THOUGHTS = 2000;

/**
 * @param {import('./scenario.mjs').BenchConfig} config
 * @param {'agent-handler' | 'event-stream'} variant
 */
const served = (config, variant) =>
  measurement('sse-server', 'http', 1, Math.max(3, Math.round(config.runs / 4)), variant, { BENCH_SSE_THOUGHTS: String(THOUGHTS) });

/** @type {import('./scenario.mjs').Scenario} */
export const sseThroughput = {
  name: 'sse',
  measurements: (config) => [served(config, 'agent-handler'), served(config, 'event-stream')],
  report(samplesOf, config) {
    const handler = samplesOf(served(config, 'agent-handler').id);
    const stream = samplesOf(served(config, 'event-stream').id);
    /** @type {import('../report.mjs').Pick} */
    const perSecond = (sample) => figureOf(sample, 'eventsPerCoreSecond') / 1000;
    /** @type {import('../report.mjs').Pick} */
    const perEvent = (sample) => (sample.cpuPerRunMs * 1000) / figureOf(sample, 'eventsPerRun');
    const runs = handler[0]?.runs ?? 0;
    return {
      markdown: [
        `### SSE events per second of server CPU (${THOUGHTS} thoughts per run, ${runs} runs per process)`,
        '',
        table(
          ['figure', 'createAgentHandler', 'run() + createSseEventStream', 'stream / handler'],
          [
            ['thousand events per core-second', cell(handler, perSecond, 'k'), cell(stream, perSecond, 'k'), ratioCell(stream, handler, perSecond)],
            ['server CPU per event', cell(handler, perEvent, ' µs'), cell(stream, perEvent, ' µs'), ratioCell(stream, handler, perEvent)],
          ],
        ),
      ].join('\n'),
      problems: problemsOf([...handler, ...stream]),
    };
  },
};
