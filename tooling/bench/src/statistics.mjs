// @ts-check
// Summaries of repeated figures: the median, and the smallest and largest value as the noise.

/**
 * @typedef {object} Spread
 * @property {number} median
 * @property {number} min
 * @property {number} max
 * @property {number} count
 */

/**
 * The median and range of `values` (NaN values are left out).
 * @param {number[]} values
 * @returns {Spread}
 */
export function spread(values) {
  const sorted = values.filter((value) => Number.isFinite(value)).sort((a, b) => a - b);
  const count = sorted.length;
  if (count === 0) return { median: Number.NaN, min: Number.NaN, max: Number.NaN, count };
  const middle = count >> 1;
  const median = count % 2 === 1 ? /** @type {number} */ (sorted[middle]) : (/** @type {number} */ (sorted[middle - 1]) + /** @type {number} */ (sorted[middle])) / 2;
  return { median, min: /** @type {number} */ (sorted[0]), max: /** @type {number} */ (sorted[count - 1]), count };
}

/**
 * `value` with three significant digits (no exponent), e.g. 7.07, 0.153, 212.
 * @param {number} value
 */
export function significant(value) {
  if (!Number.isFinite(value)) return 'n/a';
  if (value === 0) return '0';
  const digits = Math.max(0, 2 - Math.floor(Math.log10(Math.abs(value))));
  return value.toFixed(Math.min(digits, 6));
}

/**
 * A figure as `median unit (min–max)`, or `median unit` when it was measured once.
 * @param {Spread} figure
 * @param {string} unit e.g. ' ms', '×'
 */
export function formatSpread(figure, unit) {
  const median = `${significant(figure.median)}${unit}`;
  if (figure.count < 2 || figure.min === figure.max) return median;
  return `${median} (${significant(figure.min)}–${significant(figure.max)})`;
}
