export {
  ModelTurnAccumulator,
  type ModelTurn,
  type ModelTurnDelta,
  type ParsedFunctionCall,
} from './model-turn-accumulator.js';
export { validateHistory } from './history.js';
