// @ts-check
// Our runtime as a user writes it in Node: run() from @org/core in chat mode with one function
// group (get_weather), the Gemini backend client over the Node adapter's pooled undici fetch
// (createNodeFetch), and the in-memory interaction store. BENCH_FETCH=global swaps in Node's
// global fetch. With BENCH_BACKEND=in-process the model answers from prepared chunks instead.
// BENCH_VARIANT=prefix-on / prefix-off: the default function groups besides get_weather (the
// instruction and declarations of a real agent), with Gemini prefix caching on or off.
import { defineFunction, run } from '@org/core';
import { z } from 'zod';
import { createGeminiBackendClient, createPrefixCache } from '@org/core/http';
import { createMemoryInteractionStore } from '@org/core/testing';
import { contenderSettings, inProcessBackend, runContender } from './contender.mjs';

const settings = contenderSettings();
const prompt =
  'What is the weather in City 1, City 2, City 3 and City 4? Look each one up with get_weather, one at a time.';
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

const inProcess = settings.backend === 'in-process' ? inProcessBackend(settings) : undefined;
// Loaded only when used, so the in-process and global-fetch variants do not pay for its import.
const nodeFetch =
  inProcess || process.env.BENCH_FETCH === 'global' ? undefined : (await import('@org/adapter-node')).createNodeFetch();
const variant = process.env.BENCH_VARIANT ?? '';
const backend =
  inProcess ??
  createGeminiBackendClient({
    apiKey: 'bench',
    fetch: nodeFetch ?? fetch,
    baseUrl: `${settings.mockUrl}/v1beta`,
    prefixCache: variant === 'prefix-on' ? createPrefixCache() : false,
  });
const ports = { backend, store: createMemoryInteractionStore() };
/** @type {import('@org/core').RunOptions} */
const options = {
  mode: 'chat',
  model: settings.model,
  maxTurns: settings.turns,
  functionGroups: [weather],
  defaultFunctionGroups: variant.startsWith('prefix-'),
};

async function runOnce() {
  let answer;
  for await (const event of run({ segments: [{ type: 'text', text: prompt }] }, ports, options)) {
    if (event.type === 'complete') answer = event.result.outcomes?.parts.map((part) => part.text ?? '').join('');
    else if (event.type === 'error') throw new Error(event.message);
  }
  if (answer === undefined) throw new Error('the run ended without a result');
  return answer;
}

await runContender(settings, runOnce, { backendStats: () => inProcess?.stats, close: () => nodeFetch?.close() ?? Promise.resolve() });
