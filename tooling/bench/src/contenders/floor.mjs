// @ts-check
// The floor: the least a correct client can do, with no library. It keeps the growing history
// by hand, sends it whole every turn, keeps every part the model sent (so thought signatures go
// back unchanged), and runs the tool. Against the mock it uses the global fetch, splits the SSE
// stream on blank lines and parses each event with JSON.parse; in process it reads the prepared
// chunks directly.
import { contenderSettings, inProcessBackend, runContender } from './contender.mjs';

const settings = contenderSettings();
const url = `${settings.mockUrl}/v1beta/models/${settings.model}:streamGenerateContent?alt=sse`;
const prompt =
  'What is the weather in City 1, City 2, City 3 and City 4? Look each one up with get_weather, one at a time.';
const tools = [
  {
    functionDeclarations: [
      {
        name: 'get_weather',
        description: 'Current weather for a city.',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
    ],
  },
];
const getWeather = async (/** @type {unknown} */ _args) => ({ tempC: 21 });

/**
 * @param {ReadableStream<Uint8Array>} body
 * @returns {AsyncGenerator<any>}
 */
async function* events(body) {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const bytes of body) {
    buffer += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = buffer.indexOf('\r\n\r\n')) !== -1) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 4);
      for (const line of event.split('\r\n')) if (line.startsWith('data: ')) yield JSON.parse(line.slice(6));
    }
  }
}

/**
 * @param {object} body
 * @returns {AsyncGenerator<any>}
 */
async function* overHttp(body) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-goog-api-key': 'bench' },
    body: JSON.stringify(body),
  });
  if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  yield* events(response.body);
}

const backend = settings.backend === 'in-process' ? inProcessBackend(settings) : undefined;
const turn = backend ? (/** @type {object} */ body) => backend.streamGenerateContent(settings.model, body) : overHttp;

async function runOnce() {
  /** @type {Array<{ role: string, parts: object[] }>} */
  const contents = [{ role: 'user', parts: [{ text: prompt }] }];
  for (let step = 0; step < settings.turns; step += 1) {
    const body = { contents, tools, generationConfig: { thinkingConfig: { includeThoughts: true } } };
    /** @type {any[]} */
    const parts = [];
    for await (const chunk of turn(body)) {
      const received = chunk.candidates?.[0]?.content?.parts;
      if (received) for (const part of received) parts.push(part);
    }
    contents.push({ role: 'model', parts });
    const calls = parts.filter((part) => part.functionCall);
    if (calls.length === 0) return parts.filter((part) => part.text && !part.thought).map((part) => part.text).join('');
    const responses = [];
    for (const { functionCall } of calls) {
      responses.push({ functionResponse: { name: functionCall.name, response: await getWeather(functionCall.args) } });
    }
    contents.push({ role: 'user', parts: responses });
  }
  throw new Error(`no answer after ${settings.turns} turns`);
}

await runContender(settings, runOnce, { backendStats: () => backend?.stats });
