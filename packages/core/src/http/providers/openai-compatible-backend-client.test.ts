import { afterEach, describe, expect, it } from 'vitest';
import { ModelTurnAccumulator } from '../../model/index.js';
import type { LLMContent } from '../../protocol/content.js';
import type { GenerateContentRequest, GenerateContentResponse } from '../../protocol/gemini.js';
import { collect, fixture, jsonlEvents, sendJson, sendStream, sseDataOnly, startMockProvider, type MockProvider, type MockRoute } from '../../../test/provider-replay-server.js';
import { createOpenAiCompatibleBackendClient, toChatCompletionsRequest } from './openai-compatible-backend-client.js';

let mock: MockProvider | undefined;
afterEach(async () => {
  await mock?.close();
  mock = undefined;
});

async function serve(route: MockRoute): Promise<MockProvider> {
  mock = await startMockProvider(route);
  return mock;
}

function fold(chunks: GenerateContentResponse[]) {
  const accumulator = new ModelTurnAccumulator();
  const thoughts: string[] = [];
  for (const chunk of chunks) thoughts.push(...accumulator.push(chunk).thoughts);
  return { turn: accumulator.finish(), thoughts };
}

async function turnOf(stream: string, model = 'local-model') {
  const provider = await serve((_request, response) => sendStream(response, stream));
  const client = createOpenAiCompatibleBackendClient({ baseUrl: provider.baseUrl, fetch });
  const result = fold(await collect(client.streamGenerateContent(model, { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] })));
  await provider.close();
  mock = undefined;
  return result;
}

const WEATHER: GenerateContentRequest['tools'] = [
  { functionDeclarations: [{ name: 'weather', description: 'Weather in a place.', parametersJsonSchema: { type: 'object', properties: { location: { type: 'string' } } } }] },
];

describe('createOpenAiCompatibleBackendClient', () => {
  it('turns reasoning_content into one thought that remembers its field, and keeps the call id', async () => {
    const text = fixture('openai-compat', 'deepseek-reasoner-reasoning-content-tool-call.jsonl');
    const reasoning = jsonlEvents(text)
      .map((chunk) => ((chunk.choices as Array<{ delta: { reasoning_content?: string | null } }>)[0]?.delta.reasoning_content ?? ''))
      .join('');
    const { turn, thoughts } = await turnOf(sseDataOnly(text));
    expect(thoughts).toEqual([reasoning]);
    expect(turn.content.parts).toEqual([
      { thought: true, text: reasoning, providerData: { provider: 'openai-compatible', reasoningField: 'reasoning_content' } },
      { functionCall: { id: 'call_00_ioIn7yN9p1ZOMNpDLwd4MgAF', name: 'weather', args: { location: 'San Francisco' } } },
    ]);
    expect(turn.usageMetadata).toEqual({ promptTokenCount: 339, candidatesTokenCount: 44, thoughtsTokenCount: 39, cachedContentTokenCount: 320, totalTokenCount: 422 });
  });

  it('puts together calls streamed by index, whole, without an index, and without arguments on the first chunk', async () => {
    const openai = await turnOf(fixture('openai-compat', 'openai-chat-tool-calls-parallel.sse'));
    expect(openai.turn.functionCalls.map((call) => [call.providerId, call.name])).toEqual([
      ['call_JMW1whyEaYG438VE1OIflxA2', 'GetWeatherArgs'],
      ['call_DNYTawLBoN8fj3KN6qU9N1Ou', 'get_stock_price'],
    ]);
    expect(openai.turn.functionCalls[0]?.args).toEqual({ city: 'Edinburgh', country: 'GB', units: 'c' });

    const ollama = await turnOf(fixture('openai-compat', 'ollama-v1-parallel-tool-calls.sse'));
    expect(ollama.turn.functionCalls.map((call) => [call.providerId, call.args])).toEqual([
      ['call_wteop8bt', { command: 'ls' }],
      ['call_rk2xye1l', { command: 'ls -l' }],
    ]);

    const mistral = await turnOf(sseDataOnly(fixture('openai-compat', 'mistral-tool-call-no-index.jsonl')));
    expect(mistral.turn.functionCalls.map((call) => [call.providerId, call.args])).toEqual([['gSIMJiOkT', { location: 'San Francisco' }]]);

    const vllm = await turnOf(fixture('openai-compat', 'vllm-qwen-tool-call.sse'));
    expect(vllm.turn.functionCalls.map((call) => [call.providerId, call.name, call.args])).toEqual([
      ['chatcmpl-tool-ca99dda515524c6abe47d1ea22813507', 'run_command', { command: 'ls' }],
    ]);

    const xai = await turnOf(sseDataOnly(fixture('openai-compat', 'xai-grok-reasoning-content-tool-call.jsonl')));
    expect(xai.turn.functionCalls.map((call) => [call.providerId, call.args])).toEqual([['call_79382389', { location: 'San Francisco' }]]);
    expect(xai.turn.usageMetadata).toMatchObject({ candidatesTokenCount: 26, thoughtsTokenCount: 227 });

    const llama = await turnOf(sseDataOnly(fixture('openai-compat', 'llama-server-qwen3coder-tool-call.jsonl')));
    expect(llama.turn.functionCalls).toHaveLength(1);
    expect(llama.turn.functionCalls[0]?.name).toBe('run_command');
  });

  it('merges a text stream into one part and reads the usage chunk that has no choices', async () => {
    const { turn } = await turnOf(fixture('openai-compat', 'openai-chat-text-usage.sse'));
    expect(turn.content.parts).toHaveLength(1);
    expect(turn.content.parts[0]?.text).toMatch(/\S/);
    expect(turn.finishReason).toBe('STOP');
    expect(turn.usageMetadata?.promptTokenCount).toBeGreaterThan(0);
  });

  it('sends reasoning back under its own field, with tool calls and tool messages matched by id', async () => {
    const text = fixture('openai-compat', 'deepseek-reasoner-reasoning-content-tool-call.jsonl');
    const provider = await serve((_request, response) => sendStream(response, sseDataOnly(text)));
    const client = createOpenAiCompatibleBackendClient({ baseUrl: provider.baseUrl, fetch, apiKey: 'sk-compat-0123456789', model: 'deepseek-reasoner' });
    const contents: LLMContent[] = [{ role: 'user', parts: [{ text: 'Weather in SF?' }] }];
    const body = (): GenerateContentRequest => ({ contents, tools: WEATHER, systemInstruction: { parts: [{ text: 'Be brief.' }] }, generationConfig: { temperature: 1, topP: 1 } });
    const { turn, thoughts } = fold(await collect(client.streamGenerateContent('gemini-3-flash-preview', body())));
    contents.push(JSON.parse(JSON.stringify(turn.content)) as LLMContent, {
      role: 'user',
      parts: [{ functionResponse: { id: 'call_00_ioIn7yN9p1ZOMNpDLwd4MgAF', name: 'weather', response: { celsius: 14 } } }],
    });
    await collect(client.streamGenerateContent('gemini-3-flash-preview', body()));
    expect(provider.requests[0]?.headers.authorization).toBe('Bearer sk-compat-0123456789');
    const second = JSON.parse(provider.requests[1]?.body ?? '{}') as Record<string, unknown>;
    expect(second).toMatchObject({
      model: 'deepseek-reasoner',
      stream: true,
      stream_options: { include_usage: true },
      temperature: 1,
      top_p: 1,
      tool_choice: 'auto',
      tools: [{ type: 'function', function: { name: 'weather', description: 'Weather in a place.', parameters: { type: 'object', properties: { location: { type: 'string' } } } } }],
    });
    expect(second.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Weather in SF?' },
      {
        role: 'assistant',
        content: '',
        reasoning_content: thoughts[0],
        tool_calls: [{ id: 'call_00_ioIn7yN9p1ZOMNpDLwd4MgAF', type: 'function', function: { name: 'weather', arguments: '{"location":"San Francisco"}' } }],
      },
      { role: 'tool', tool_call_id: 'call_00_ioIn7yN9p1ZOMNpDLwd4MgAF', content: '{"celsius":14}' },
    ]);
  });

  it('gives calls without ids an id that their responses get too', () => {
    const request = toChatCompletionsRequest('m', {
      contents: [
        { role: 'user', parts: [{ text: 'go' }] },
        { role: 'model', parts: [{ functionCall: { name: 'a', args: {} } }, { functionCall: { name: 'b', args: {} } }] },
        { role: 'user', parts: [{ functionResponse: { name: 'a', response: { ok: 1 } } }, { functionResponse: { name: 'b', response: { ok: 2 } } }] },
      ],
    });
    const messages = request.messages as Array<{ tool_calls?: Array<{ id: string }>; tool_call_id?: string }>;
    expect(messages[1]?.tool_calls?.map((call) => call.id)).toEqual(['call_1_0', 'call_1_1']);
    expect(messages.slice(2).map((message) => message.tool_call_id)).toEqual(['call_1_0', 'call_1_1']);
  });

  it('maps an error chunk in the stream and an HTTP error body of vLLM to coded errors', async () => {
    await serve((_request, response) =>
      sendStream(response, 'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\ndata: {"error":{"message":"model overloaded","type":"server_error","code":503}}\n\n'),
    );
    const client = createOpenAiCompatibleBackendClient({ baseUrl: mock?.baseUrl ?? '', fetch, providerName: 'vLLM' });
    await expect(collect(client.streamGenerateContent('m', { contents: [] }))).rejects.toMatchObject({ code: 'MODEL_UNAVAILABLE', message: 'vLLM stream error 503: model overloaded' });
    await mock?.close();

    mock = await startMockProvider((_request, response) =>
      sendJson(response, 400, JSON.stringify({ object: 'error', message: "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens.", type: 'BadRequestError', param: null, code: 400 })),
    );
    const small = createOpenAiCompatibleBackendClient({ baseUrl: mock.baseUrl, fetch });
    await expect(collect(small.streamGenerateContent('m', { contents: [] }))).rejects.toMatchObject({ code: 'MODEL_ERROR', details: expect.objectContaining({ reason: 'context_length_exceeded' }) });
  });

  it('treats a stream that ends without a finish as lost, so the run can resume', async () => {
    const cut = fixture('openai-compat', 'openai-chat-tool-call-single.sse').split('\n\n').slice(0, 4).join('\n\n');
    await serve((_request, response) => sendStream(response, `${cut}\n\n`));
    const client = createOpenAiCompatibleBackendClient({ baseUrl: mock?.baseUrl ?? '', fetch });
    await expect(collect(client.streamGenerateContent('m', { contents: [] }))).rejects.toMatchObject({ code: 'MODEL_UNAVAILABLE' });
  });

  it('puts together parallel calls whose argument deltas interleave by index', async () => {
    const call = (index: number, fields: object) => ({ choices: [{ index: 0, delta: { tool_calls: [{ index, ...fields }] }, finish_reason: null }] });
    const { turn } = await turnOf(
      sseDataOnly(
        [
          call(0, { id: 'call_a', type: 'function', function: { name: 'weather', arguments: '' } }),
          call(1, { id: 'call_b', type: 'function', function: { name: 'time', arguments: '' } }),
          call(0, { function: { arguments: '{"location":' } }),
          call(1, { function: { arguments: '{"zone":' } }),
          call(0, { function: { arguments: '"Paris"}' } }),
          call(1, { function: { arguments: '"CET"}' } }),
          { choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
        ]
          .map((chunk) => JSON.stringify(chunk))
          .join('\n'),
      ) + 'data: [DONE]\n\n',
    );
    expect(turn.functionCalls.map((entry) => [entry.providerId, entry.name, entry.args])).toEqual([
      ['call_a', 'weather', { location: 'Paris' }],
      ['call_b', 'time', { zone: 'CET' }],
    ]);
    expect(turn.finishReason).toBe('STOP');
  });

  it('gives each call of a turn its own id when the server repeats one, and runs a repeated whole call once', async () => {
    const call = (index: number, id: string, name: string, args: string) => ({
      choices: [{ index: 0, delta: { tool_calls: [{ index, id, type: 'function', function: { name, arguments: args } }] }, finish_reason: null }],
    });
    const stream = [
      call(0, 'call_0', 'weather', '{"location":"Paris"}'),
      call(1, 'call_0', 'weather', '{"location":"Rome"}'),
      // A server that sends a whole call again: still one call.
      call(0, 'call_0', 'weather', '{"location":"Paris"}'),
      // Another id at a taken index: another call.
      call(0, 'call_7', 'weather', '{"location":"Oslo"}'),
      { choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
    ];
    const { turn } = await turnOf(sseDataOnly(stream.map((chunk) => JSON.stringify(chunk)).join('\n')));
    expect(turn.functionCalls.map((entry) => entry.args)).toEqual([{ location: 'Paris' }, { location: 'Rome' }, { location: 'Oslo' }]);
    const [first, second, third] = turn.functionCalls.map((entry) => entry.providerId);
    expect([first, third]).toEqual(['call_0', 'call_7']);
    expect(second).toMatch(/^call_/);
    expect(second).not.toBe(first);
  });

  it('counts an error chunk whose code is an HTTP status by that status: a 502 is transient', async () => {
    await serve((_request, response) => sendStream(response, 'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\ndata: {"error":{"message":"Upstream error","code":502}}\n\n'));
    const client = createOpenAiCompatibleBackendClient({ baseUrl: mock?.baseUrl ?? '', fetch, providerName: 'OpenRouter' });
    await expect(collect(client.streamGenerateContent('m', { contents: [] }))).rejects.toMatchObject({
      code: 'MODEL_UNAVAILABLE',
      details: expect.objectContaining({ retryable: true }),
    });
  });

  it('shows a refusal as the answer rather than an empty turn', async () => {
    const chunks = [
      { choices: [{ index: 0, delta: { role: 'assistant', content: null, refusal: '' }, finish_reason: null }] },
      { choices: [{ index: 0, delta: { refusal: "I'm sorry, " }, finish_reason: null }] },
      { choices: [{ index: 0, delta: { refusal: "I can't help with that." }, finish_reason: null }] },
      { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
    ];
    const { turn } = await turnOf(sseDataOnly(chunks.map((chunk) => JSON.stringify(chunk)).join('\n')));
    expect(turn.content.parts).toEqual([{ text: "I'm sorry, I can't help with that." }]);
  });

  it('refuses a base URL that is not http(s)', () => {
    expect(() => createOpenAiCompatibleBackendClient({ baseUrl: 'localhost:11434', fetch })).toThrow(expect.objectContaining({ code: 'BAD_REQUEST' }));
  });
});
