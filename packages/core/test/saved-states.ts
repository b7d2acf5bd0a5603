import { INTERACTION_STATE_VERSION, type InteractionState } from '../src/run/interaction-state.js';

/**
 * A first checkpoint of an objective run, as a process that claimed the run and died would have
 * left it; `overrides` replace its fields.
 */
export function checkpointState(overrides: Partial<InteractionState> = {}): InteractionState {
  return {
    version: INTERACTION_STATE_VERSION,
    createdAt: new Date(0).toISOString(),
    kind: 'checkpoint',
    mode: 'objective',
    model: 'gemini-test',
    contents: [{ role: 'user', parts: [{ text: '<objective>Greet me</objective>' }] }],
    fileSystem: { files: [], routes: {}, fileCount: 0 },
    taskTree: { tree: null },
    flags: {},
    consentsGranted: [],
    turnCount: 0,
    ...overrides,
  };
}
