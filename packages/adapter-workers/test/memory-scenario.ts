// The shared memory scenario (fixtures/memory) as a scripted model, for the Worker and its session objects.
import type { JsonObject } from '@org/core';
import { functionCallChunk, type ScriptedRequest } from '@org/core/testing';
import scenario from '../../../fixtures/memory/memory-scenario.json';

export { scenario };

/** Plays the scenario: the run its objective names, the turn its history has reached. */
export function playMemoryScenario(request: ScriptedRequest) {
  const objective = request.body.contents[0]?.parts[0]?.text ?? '';
  const run = scenario.runs.find((candidate) => objective.includes(candidate.objective));
  const turn = run?.turns[request.body.contents.filter((content) => content.role === 'model').length];
  if (!turn) throw new Error(`the memory scenario has no turn for request ${request.index}`);
  return turn.map((call) => functionCallChunk(call.name, call.args as JsonObject));
}
