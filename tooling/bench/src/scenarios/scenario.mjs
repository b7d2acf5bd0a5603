// @ts-check
// What a scenario is: the measurements it needs, and how it turns their samples into a table.
// Scenarios only describe; the runner measures. Measurements with the same id are shared between
// scenarios and run once per repetition.

/**
 * @typedef {object} BenchConfig
 * @property {number} runs N: runs per process of the five-turn scenarios
 * @property {number} reps repetitions of every measurement
 * @property {number[]} turnCounts run lengths of the turn-scaling scenario
 * @property {number} chunkChars length of each streamed thought or answer chunk
 * @property {string} model
 * @property {boolean} quick a smoke run: few runs, one repetition, no warm-up
 * @property {number} timeoutSeconds per process
 * @property {number} sessions sessions of the shared-sessions scenario
 */

/**
 * @typedef {object} ScenarioReport
 * @property {string} markdown a section: a heading, a sentence on what is measured, a table
 * @property {string[]} problems
 */

/**
 * @typedef {object} Scenario
 * @property {string} name what BENCH_SCENARIOS selects it by
 * @property {(config: BenchConfig) => import('../measure.mjs').Measurement[]} measurements
 * @property {(samplesOf: (id: string) => import('../measure.mjs').Sample[], config: BenchConfig) => ScenarioReport} report
 */

/**
 * The problems of every sample, each once, prefixed with the measurement's id.
 * @param {import('../measure.mjs').Sample[]} samples
 */
export function problemsOf(samples) {
  return [...new Set(samples.flatMap((sample) => sample.problems.map((problem) => `${sample.id}: ${problem}`)))];
}
