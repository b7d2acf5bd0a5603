// @ts-check
// Our runtime as a contender of an external agent-loop harness (BENCH_HARNESS): the same setup
// as `contenders/ours.mjs`, written to that harness's contract. It is copied into the harness's
// contenders folder, so it loads the built packages by path: BENCH_CORE_DIST and
// BENCH_ADAPTER_NODE_DIST name their dist folders. Env from the harness: MOCK_URL, N, MODEL.
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const mockUrl = process.env.MOCK_URL;
const runs = Number(process.env.N || 200);
const model = process.env.MODEL || 'gemini-2.5-flash';
const coreDist = process.env.BENCH_CORE_DIST;
const adapterDist = process.env.BENCH_ADAPTER_NODE_DIST;
if (!mockUrl || !coreDist || !adapterDist) throw new Error('MOCK_URL, BENCH_CORE_DIST and BENCH_ADAPTER_NODE_DIST are required');
/**
 * @param {string} folder
 * @param {string} file
 * @returns {Promise<any>}
 */
const load = (folder, file) => import(pathToFileURL(path.join(folder, file)).href);

const { run, defineFunction, z } = await load(coreDist, 'index.js');
const { createGeminiBackendClient } = await load(coreDist, 'http/index.js');
const { createMemoryInteractionStore } = await load(coreDist, 'testing/index.js');
const { createNodeFetch } = await load(adapterDist, 'index.js');

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
const nodeFetch = createNodeFetch();
const ports = {
  backend: createGeminiBackendClient({ apiKey: 'bench', fetch: nodeFetch, baseUrl: `${mockUrl}/v1beta` }),
  store: createMemoryInteractionStore(),
};
const options = { mode: 'chat', model, functionGroups: [weather], defaultFunctionGroups: false };

async function runOnce() {
  let answer;
  for await (const event of run({ segments: [{ type: 'text', text: prompt }] }, ports, options)) {
    if (event.type === 'complete') answer = event.result.outcomes?.parts.map((/** @type {{ text?: string }} */ part) => part.text ?? '').join('');
    else if (event.type === 'error') throw new Error(event.message);
  }
  if (answer === undefined) throw new Error('the run ended without a result');
  return answer;
}

let answer;
for (let index = 0; index < runs; index += 1) answer = await runOnce();
await nodeFetch.close();
console.log(answer);
