// Bundled into the test page: exposes the browser-side checks to the Node test through `window`.
import type { AgentEvent, ResumeResponse } from '@org/core';
import { createGeminiBackendClient } from '@org/core/http';
import { createSimulatedGemini, runInteractionStoreConformance } from '@org/core/testing';
import { createBrowserAgentClient, createIndexedDbInteractionStore, type AgentClient } from '../../src/index.js';

/** How the scripted user answers: a name, then the second choice. */
const answers = (event: AgentEvent): ResumeResponse => {
  if (event.type === 'waitForInput') return { input: { role: 'user', parts: [{ text: 'Ada' }] } };
  if (event.type === 'waitForChoice') return { selected: { ids: [event.choices[1]?.id ?? ''] } };
  return {};
};

/** What two runs must agree on: the event types in order, with function names. */
function shape(events: AgentEvent[]): string[] {
  return events.map((event) => (event.type === 'functionCall' ? `functionCall:${event.name}` : event.type));
}

function localClient(databaseName: string): AgentClient {
  const gemini = createSimulatedGemini();
  const backend = createGeminiBackendClient({
    apiKey: 'simulated',
    fetch: (input, init) => gemini.fetch(new Request(input, init)),
  });
  return createBrowserAgentClient({ runIn: 'page', backend, store: createIndexedDbInteractionStore({ databaseName }) });
}

async function play(client: AgentClient, objective: string) {
  const run = client.startRun(objective, { onSuspend: answers });
  const events: AgentEvent[] = [];
  for await (const event of run.events) events.push(event);
  const result = await run.result;
  return { shape: shape(events), result };
}

const checks = {
  async conformance() {
    let index = 0;
    return runInteractionStoreConformance(() => createIndexedDbInteractionStore({ databaseName: `conformance-${index++}` }));
  },
  async local(objective: string) {
    return play(localClient('local-run'), objective);
  },
  async remote(objective: string) {
    return play(createBrowserAgentClient({ runIn: 'server', baseUrl: location.origin }), objective);
  },
  /** Starts a local run and leaves it suspended at its first question; returns the interaction id. */
  async suspendLocally(objective: string) {
    const run = localClient('reload').startRun(objective);
    for await (const event of run.events) {
      if (event.type === 'waitForInput') return event.interactionId;
    }
    throw new Error('the run never asked for input');
  },
  /** After a reload: resumes the saved run from IndexedDB and finishes it. */
  async resumeLocally(interactionId: string) {
    const run = localClient('reload').resumeRun(interactionId, answers({ type: 'waitForInput' } as AgentEvent), { onSuspend: answers });
    const types: string[] = [];
    for await (const event of run.events) types.push(event.type);
    const outcome = await run.result.then(
      (result) => ({ result }),
      (error: Error) => ({ error: error.message }),
    );
    return { types, ...outcome };
  },
};

(globalThis as unknown as { checks: typeof checks }).checks = checks;
