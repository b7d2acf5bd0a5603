/**
 * One model turn: preparing the request body (`conformBody`), merging streamed Gemini chunks into
 * one model content with its function calls, and checking the history before each request.
 */
export { blobIdOf, BodyConformer, conformBody } from './conform-body.js';
export { HistoryValidator, validateHistory } from './history.js';
export {
  ModelTurnAccumulator,
  type ModelTurn,
  type ModelTurnDelta,
  type ParsedFunctionCall,
} from './model-turn-accumulator.js';
