// @ts-check
// What prefix caching saves on the wire: the five-turn run with the default function groups (the
// instruction and declarations of a real agent) against the mock, which keeps cached prefixes
// like Gemini. The figure is the bytes of each model request, with the prefix sent every time and
// with it cached once and named.
import { measurement } from '../measure.mjs';
import { STANDARD_TURNS } from '../mock/scenario.mjs';
import { cell, figureOf, ratioCell, table } from '../report.mjs';
import { problemsOf } from './scenario.mjs';

/**
 * @param {import('./scenario.mjs').BenchConfig} config
 * @param {'prefix-off' | 'prefix-on'} variant
 */
const runs = (config, variant) => measurement('ours', 'mock', STANDARD_TURNS, Math.max(2, Math.round(config.runs / 4)), variant);

/** @type {import('./scenario.mjs').Scenario} */
export const prefixCaching = {
  name: 'prefix',
  measurements: (config) => [runs(config, 'prefix-off'), runs(config, 'prefix-on')],
  report(samplesOf, config) {
    const off = samplesOf(runs(config, 'prefix-off').id);
    const on = samplesOf(runs(config, 'prefix-on').id);
    /** @type {import('../report.mjs').Pick} */
    const bytes = (sample) => figureOf(sample, 'requestBytesPerRequest') / 1024;
    /** @type {import('../report.mjs').Pick} */
    const cached = (sample) => figureOf(sample, 'cachedRequests') / sample.requests;
    /** @type {import('../report.mjs').Pick} */
    const cacheCalls = (sample) => figureOf(sample, 'cacheCalls');
    /** @type {import('../report.mjs').Pick} */
    const cacheBytes = (sample) => figureOf(sample, 'cacheBytes') / 1024;
    return {
      markdown: [
        `### Bytes per model request, with and without prefix caching (default function groups, N=${off[0]?.runs ?? 0})`,
        '',
        table(
          ['figure', 'prefix sent every request', 'prefix cached', 'cached / whole'],
          [
            ['KiB per model request (5-turn runs)', cell(off, bytes, ' KiB'), cell(on, bytes, ' KiB'), ratioCell(on, off, bytes)],
            ['share of requests naming a cached prefix', cell(off, cached, '×'), cell(on, cached, '×'), ''],
            ['cachedContents calls (KiB sent for them)', `${cell(off, cacheCalls, '')} (${cell(off, cacheBytes, ' KiB')})`, `${cell(on, cacheCalls, '')} (${cell(on, cacheBytes, ' KiB')})`, ''],
            ['CPU per 5-turn run', cell(off, (sample) => sample.cpuPerRunMs, ' ms'), cell(on, (sample) => sample.cpuPerRunMs, ' ms'), ratioCell(on, off, (sample) => sample.cpuPerRunMs)],
          ],
        ),
      ].join('\n'),
      problems: problemsOf([...off, ...on]),
    };
  },
};
