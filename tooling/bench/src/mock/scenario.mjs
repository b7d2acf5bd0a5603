// @ts-check
// The scenario every contender plays, as data: a tool loop of `turns` model turns. Turns 1 to
// turns-1 each think, then call get_weather for "City n" with a thought signature on the call
// part; the last turn answers in text. The mock server and the in-process backend both serve
// these chunks; contenders never import this module (they only see the wire or the chunks).

/** The number of model turns of the standard run (four tool calls, then the answer). */
export const STANDARD_TURNS = 5;

/** The most turns one run may ask for (the mock refuses more). */
export const MAX_TURNS = 10_000;

/** The prompt every run starts from. */
export const PROMPT =
  'What is the weather in City 1, City 2, City 3 and City 4? Look each one up with get_weather, one at a time.';

/** The city model turn `turn` asks about. */
export const cityFor = (/** @type {number} */ turn) => `City ${turn}`;

/**
 * The thought signature issued with the call of model turn `turn`: about 300 base64 characters,
 * the same on every run, so a replayed call can be checked against it.
 * @param {number} turn
 */
export function signatureFor(turn) {
  let signature = signatures.get(turn);
  if (signature === undefined) {
    const seed = `bench-signature/turn-${turn}/`;
    signature = Buffer.from(seed.repeat(Math.ceil(225 / seed.length)).slice(0, 225)).toString('base64');
    signatures.set(turn, signature);
  }
  return signature;
}

/** @type {Map<number, string>} */
const signatures = new Map();

/**
 * `prefix` padded with filler words to exactly `chars` characters (or left as is when longer).
 * @param {string} prefix
 * @param {number} chars
 */
function padded(prefix, chars) {
  if (prefix.length >= chars) return prefix;
  const words = ' the quick brown fox jumps over the lazy dog';
  let text = prefix;
  while (text.length < chars) text += words;
  return text.slice(0, chars);
}

/**
 * The three text chunks of the final answer; what a contender prints is their concatenation.
 * @param {number} turns
 * @param {number} chunkChars
 */
export function answerChunks(turns, chunkChars) {
  const cities = [];
  for (let turn = 1; turn < turns; turn += 1) cities.push(`${cityFor(turn)}: 21C`);
  return [
    padded(`[answer-1/3] ${cities.join(', ')}.`, chunkChars),
    padded('[answer-2/3]', chunkChars),
    padded('[answer-3/3]', chunkChars),
  ];
}

/**
 * The answer a correct run of `turns` turns ends with.
 * @param {number} turns
 * @param {number} chunkChars
 */
export function expectedAnswer(turns, chunkChars) {
  return answerChunks(turns, chunkChars).join('');
}

/**
 * @param {number} turn
 * @param {boolean} last
 * @param {number} chunkChars
 */
function usageFor(turn, last, chunkChars) {
  const prompt = 40 + turn * 60;
  const candidates = last ? Math.ceil((3 * chunkChars) / 4) : 12;
  const thoughts = last ? 0 : Math.ceil(chunkChars / 4);
  return {
    promptTokenCount: prompt,
    candidatesTokenCount: candidates,
    totalTokenCount: prompt + candidates + thoughts,
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: prompt }],
    ...(thoughts > 0 ? { thoughtsTokenCount: thoughts } : {}),
  };
}

/**
 * One streamed response chunk, shaped like Gemini's.
 * @param {string} model
 * @param {object[]} parts
 * @param {{ finishReason?: string, usageMetadata?: object }} [end]
 */
function chunk(model, parts, end) {
  return {
    candidates: [{ content: { parts, role: 'model' }, index: 0, ...(end?.finishReason ? { finishReason: end.finishReason } : {}) }],
    ...(end?.usageMetadata ? { usageMetadata: end.usageMetadata } : {}),
    modelVersion: model,
    responseId: 'bench-response',
  };
}

/**
 * The three chunks of model turn `turn` (1-based) of a run of `turns` turns.
 * @param {{ turn: number, turns: number, model: string, chunkChars: number }} options
 */
export function turnChunks({ turn, turns, model, chunkChars }) {
  const last = turn >= turns;
  const end = { finishReason: 'STOP', usageMetadata: usageFor(turn, last, chunkChars) };
  if (!last) {
    return [
      chunk(model, [{ text: padded(`**Planning turn ${turn}** I need the weather for ${cityFor(turn)}.`, chunkChars), thought: true }]),
      chunk(model, [{ functionCall: { name: 'get_weather', args: { city: cityFor(turn) } }, thoughtSignature: signatureFor(turn) }]),
      chunk(model, [{ text: '' }], end),
    ];
  }
  const [first, second, third] = answerChunks(turns, chunkChars);
  return [chunk(model, [{ text: first }]), chunk(model, [{ text: second }]), chunk(model, [{ text: third }], end)];
}

/**
 * @typedef {object} HistoryCheck
 * @property {number} modelTurns model turns already in the history (a run of consecutive model contents is one turn)
 * @property {number} checked replayed get_weather calls checked
 * @property {number} missing calls replayed without their signature
 * @property {number} mismatched calls replayed with another signature than the one issued
 * @property {number} calls function calls in the history
 * @property {number} responses function responses in the history
 * @property {string | undefined} firstViolation where the first violation sits, e.g. `contents[3].parts[1]: missing`
 */

/**
 * Reads a request's `contents`: how many model turns it holds and whether every replayed
 * get_weather call still carries the signature issued for its city.
 * @param {unknown} contents
 * @param {{ signatures: boolean }} options `signatures: false` only counts turns
 * @returns {HistoryCheck}
 */
export function checkHistory(contents, options) {
  /** @type {HistoryCheck} */
  const result = { modelTurns: 0, checked: 0, missing: 0, mismatched: 0, calls: 0, responses: 0, firstViolation: undefined };
  if (!Array.isArray(contents)) return result;
  let previousWasModel = false;
  for (let index = 0; index < contents.length; index += 1) {
    const content = contents[index];
    const isModel = content?.role === 'model';
    if (isModel && !previousWasModel) result.modelTurns += 1;
    previousWasModel = isModel;
    if (!options.signatures) continue;
    const parts = Array.isArray(content?.parts) ? content.parts : [];
    for (let partIndex = 0; partIndex < parts.length; partIndex += 1) {
      const part = parts[partIndex];
      if (part?.functionResponse) result.responses += 1;
      const call = part?.functionCall;
      if (!call) continue;
      result.calls += 1;
      if (call.name !== 'get_weather') continue;
      const match = /^City (\d+)$/.exec(String(call.args?.city ?? ''));
      const expected = match ? signatureFor(Number(match[1])) : undefined;
      const actual = part.thoughtSignature ?? part.thought_signature;
      result.checked += 1;
      const kind = actual === undefined || actual === null || actual === '' ? 'missing' : actual !== expected ? 'mismatched' : undefined;
      if (kind === undefined) continue;
      result[kind] += 1;
      result.firstViolation ??= `contents[${index}].parts[${partIndex}]: ${kind}`;
    }
  }
  return result;
}
