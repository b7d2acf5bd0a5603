// @ts-check
// A model backend that answers the scenario inside the contender's process: it yields prepared
// chunk objects, so nothing is serialised, sent or parsed. What remains is the loop's own work.
import { checkHistory, turnChunks } from './scenario.mjs';

/**
 * @typedef {object} InProcessStats
 * @property {number} requests model requests answered
 * @property {{ checked: number, missing: number, mismatched: number, firstViolation: string | null }} signatures
 * @property {number} extraTurns requests past the run's last turn
 */

/**
 * A backend playing a run of `turns` turns from prepared chunks. It finds the turn by counting
 * the model turns in the request's history (only those added since the run's previous request),
 * and checks the replayed signatures once per run, on the last turn's request (which holds every
 * call of the run).
 * @param {{ turns: number, chunkChars: number }} options
 */
export function createInProcessBackend(options) {
  /** @type {Map<string, object[][]>} */
  const prepared = new Map();
  /** @type {InProcessStats} */
  const stats = { requests: 0, signatures: { checked: 0, missing: 0, mismatched: 0, firstViolation: null }, extraTurns: 0 };
  /**
   * @param {string} model
   * @param {number} turn
   */
  const chunksFor = (model, turn) => {
    let turns = prepared.get(model);
    if (!turns) {
      turns = [];
      for (let index = 1; index <= options.turns; index += 1) {
        turns.push(turnChunks({ turn: index, turns: options.turns, model, chunkChars: options.chunkChars }));
      }
      prepared.set(model, turns);
    }
    return /** @type {object[]} */ (turns[turn - 1]);
  };
  // Model turns counted so far per run, keyed by the run's first content (the same object in
  // every request of a run): each request scans only the contents added since the run's last
  // one, so the backend's own work per request does not grow with the history.
  /** @type {WeakMap<object, { scanned: number, modelTurns: number, previousWasModel: boolean }>} */
  const runs = new WeakMap();
  /** @param {unknown} contents */
  const modelTurnsOf = (contents) => {
    if (!Array.isArray(contents) || contents.length === 0 || typeof contents[0] !== 'object') return checkHistory(contents, { signatures: false }).modelTurns;
    let count = runs.get(contents[0]);
    if (!count || count.scanned > contents.length) {
      count = { scanned: 0, modelTurns: 0, previousWasModel: false };
      runs.set(contents[0], count);
    }
    for (let index = count.scanned; index < contents.length; index += 1) {
      const isModel = contents[index]?.role === 'model';
      if (isModel && !count.previousWasModel) count.modelTurns += 1;
      count.previousWasModel = isModel;
    }
    count.scanned = contents.length;
    return count.modelTurns;
  };
  const unsupported = () => Promise.reject(new Error('The in-process bench backend only answers model requests'));
  return {
    stats,
    /**
     * @param {string} model
     * @param {{ contents?: unknown }} body
     * @returns {AsyncGenerator<any>}
     */
    async *streamGenerateContent(model, body) {
      stats.requests += 1;
      let turn = modelTurnsOf(body.contents) + 1;
      if (turn >= options.turns) {
        if (turn > options.turns) stats.extraTurns += 1;
        turn = options.turns;
        const history = checkHistory(body.contents, { signatures: true });
        stats.signatures.checked += history.checked;
        stats.signatures.missing += history.missing;
        stats.signatures.mismatched += history.mismatched;
        if (history.firstViolation && stats.signatures.firstViolation === null) stats.signatures.firstViolation = history.firstViolation;
      }
      yield* chunksFor(model, turn);
    },
    executeStep: unsupported,
    uploadGeminiFile: unsupported,
    uploadBlobFile: unsupported,
  };
}
