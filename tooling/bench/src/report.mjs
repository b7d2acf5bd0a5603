// @ts-check
// Building blocks of the printed tables: figures over repetitions, ratios paired by repetition,
// and markdown.
import { formatSpread, spread } from './statistics.mjs';

/**
 * @typedef {import('./measure.mjs').Sample} Sample
 * @typedef {(sample: Sample) => number} Pick
 */

/**
 * The median and range of one figure over the samples of a measurement, formatted.
 * @param {Sample[]} samples
 * @param {Pick} pick
 * @param {string} unit
 */
export function cell(samples, pick, unit) {
  return formatSpread(spread(samples.map(pick)), unit);
}

/**
 * `pick(a) / pick(b)` per repetition (samples of the same repetition are paired), formatted as
 * `1.12× (1.05–1.20)`.
 * @param {Sample[]} a
 * @param {Sample[]} b
 * @param {Pick} pick
 */
export function ratioCell(a, b, pick) {
  const ratios = [];
  for (const sample of a) {
    const other = b.find((candidate) => candidate.rep === sample.rep);
    if (other) ratios.push(pick(sample) / pick(other));
  }
  return formatSpread(spread(ratios), '×');
}

/**
 * Signature violations over every sample, as `violations / checked`.
 * @param {Sample[]} samples
 */
export function violationsCell(samples) {
  let violations = 0;
  let checked = 0;
  for (const sample of samples) {
    violations += sample.signatures.violations;
    checked += sample.signatures.checked;
  }
  return `${violations} / ${checked}`;
}

/**
 * A markdown table.
 * @param {string[]} header
 * @param {string[][]} rows
 */
export function table(header, rows) {
  const line = (/** @type {string[]} */ cells) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/**
 * A figure a contender reported of its own (`sample.figures[name]`), NaN when it reported none.
 * @param {Sample} sample
 * @param {string} name
 */
export function figureOf(sample, name) {
  return sample.figures[name] ?? Number.NaN;
}
