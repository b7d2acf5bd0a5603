// @ts-check
// The model turn of the SSE scenario, shared by our server and the floor: `thoughts` chunks of one
// thought each, then the answer. Prepared objects, so nothing is parsed per chunk.

/**
 * @param {number} thoughts
 * @param {string} model
 * @returns {any[]} the turn's chunks, in order
 */
export function sseTurn(thoughts, model) {
  /** @param {object[]} parts @param {object} [end] */
  const chunk = (parts, end = {}) => ({ candidates: [{ content: { role: 'model', parts }, index: 0, ...end }], modelVersion: model, responseId: 'bench-sse' });
  return [
    ...Array.from({ length: thoughts }, (_, index) => chunk([{ text: `Thinking step ${index}: weighing the next move.`, thought: true }])),
    chunk([{ text: 'Done thinking.' }], { finishReason: 'STOP' }),
  ];
}
