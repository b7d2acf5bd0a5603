// Benchmark contender: @org/core's run() in chat mode with one function group (get_weather),
// over the Gemini backend client and Node's global fetch.
// Env: MOCK_URL, N (200), MODEL (gemini-2.5-flash), BENCH_CORE_DIST (path to packages/core/dist).
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const MOCK_URL = process.env.MOCK_URL;
const N = Number(process.env.N || 200);
const MODEL = process.env.MODEL || 'gemini-2.5-flash';
const DIST = process.env.BENCH_CORE_DIST;
if (!MOCK_URL) throw new Error('MOCK_URL is required');
if (!DIST) throw new Error('BENCH_CORE_DIST is required');

const core = await import(pathToFileURL(path.join(DIST, 'index.js')).href);
const { createGeminiBackendClient } = await import(pathToFileURL(path.join(DIST, 'http', 'index.js')).href);
const { createMemoryInteractionStore } = await import(pathToFileURL(path.join(DIST, 'testing', 'index.js')).href);
const { run, defineFunction, z } = core;

const PROMPT = 'What is the weather in City 1, City 2, City 3 and City 4? Look each one up with get_weather, one at a time.';
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
const ports = {
  backend: createGeminiBackendClient({ apiKey: 'bench', fetch, baseUrl: `${MOCK_URL}/v1beta` }),
  store: createMemoryInteractionStore(),
};
const options = { mode: 'chat', model: MODEL, functionGroups: [weather], defaultFunctionGroups: false };

async function runOnce() {
  let answer;
  for await (const event of run({ segments: [{ type: 'text', text: PROMPT }] }, ports, options)) {
    if (event.type === 'complete') answer = event.result.outcomes?.parts.map((part) => part.text ?? '').join('');
    if (event.type === 'error') throw new Error(event.message);
  }
  if (answer === undefined) throw new Error('run ended without a result');
  return answer;
}

let answer;
for (let i = 0; i < N; i++) answer = await runOnce();
console.log(answer);
