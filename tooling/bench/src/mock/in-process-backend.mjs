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
 * the model turns in the request's history, and checks the replayed signatures once per run, on
 * the last turn's request (which holds every call of the run).
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
      let turn = checkHistory(body.contents, { signatures: false }).modelTurns + 1;
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
