// @ts-check
// Our runtime served over HTTP as a Node user deploys it: createAgentHandler from
// @org/core/http behind serve() from @org/adapter-node, with the same run options and backend as
// `ours.mjs`. A separate client process (`agent-client.mjs`) drives it over loopback, so this
// process's CPU is the server's alone. It prints `LISTENING <url>`; on SIGTERM it reports its
// figures: `first` when the second run arrives (the first one has been served), `last` at exit.
import { createNodeFetch, serve } from '@org/adapter-node';
import { defineFunction } from '@org/core';
import { z } from 'zod';
import { createAgentHandler, createGeminiBackendClient } from '@org/core/http';
import { createMemoryInteractionStore } from '@org/core/testing';
import { contenderSettings, report, snapshot } from './contender.mjs';

const settings = contenderSettings();
const weather = {
  name: 'weather',
  functions: [
    defineFunction({
      name: 'get_weather',
      description: 'Current weather for a city.',
      parameters: z.object({ city: z.string() }),
      handler: async () => ({ tempC: 21 }),
    }),
  ],
};
const nodeFetch = createNodeFetch();
const store = createMemoryInteractionStore();
const handler = createAgentHandler({
  createPorts: () => ({
    backend: createGeminiBackendClient({ apiKey: 'bench', fetch: nodeFetch, baseUrl: `${settings.mockUrl}/v1beta` }),
    store,
  }),
  runOptions: () => ({
    mode: 'chat',
    model: settings.model,
    maxTurns: settings.turns,
    functionGroups: [weather],
    defaultFunctionGroups: false,
  }),
});

let runs = 0;
/** @type {import('./contender.mjs').Snapshot | undefined} */
let first;
const server = await serve({
  handler: (request) => {
    runs += 1;
    if (runs === 2) first = snapshot();
    return handler(request);
  },
});
process.stdout.write(`LISTENING ${server.url}\n`);

process.once('SIGTERM', () => {
  const last = snapshot();
  report({ runs, first: first ?? last, last });
  void Promise.all([server.close(), nodeFetch.close()]).then(() => process.exit(0));
});
