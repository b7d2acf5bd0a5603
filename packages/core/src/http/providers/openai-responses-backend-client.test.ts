import { afterEach, describe, expect, it } from 'vitest';
import { ModelTurnAccumulator } from '../../model/index.js';
import type { LLMContent } from '../../protocol/content.js';
import type { GenerateContentRequest, GenerateContentResponse } from '../../protocol/gemini.js';
import {
  collect,
  fixture,
  jsonlEvents,
  sendJson,
  sendStream,
  splitJsonl,
  sseFromJsonl,
  startMockProvider,
  type MockProvider,
  type MockRoute,
} from '../../../test/provider-replay-server.js';
import type { AgentError } from '../../errors/index.js';
import { retriedByBackend } from '../../loop/model-stream.js';
import { createOpenAiResponsesBackendClient } from './openai-responses-backend-client.js';

const KEY = 'sk-test-0123456789abcdefghij';
let mock: MockProvider | undefined;
afterEach(async () => {
  await mock?.close();
  mock = undefined;
});

async function serve(route: MockRoute): Promise<MockProvider> {
  mock = await startMockProvider(route);
  return mock;
}

const multistep = splitJsonl(fixture('openai', 'responses-reasoning-summary-function-calls-multistep.jsonl'), 'response.created');
const doneItems = (text: string) =>
  jsonlEvents(text)
    .filter((event) => event.type === 'response.output_item.done')
    .map((event) => event.item as Record<string, unknown>);

const CALCULATOR = {
  name: 'calculator',
  description: 'Adds or multiplies two numbers.',
  parametersJsonSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' }, op: { type: 'string' } }, required: ['a', 'b', 'op'] },
};

function body(contents: LLMContent[]): GenerateContentRequest {
  return {
    contents,
    systemInstruction: { role: 'user', parts: [{ text: 'Use the calculator.' }] },
    tools: [{ functionDeclarations: [CALCULATOR] }],
    generationConfig: { temperature: 1, topP: 1, thinkingConfig: { includeThoughts: true, thinkingBudget: -1 } },
  };
}

function fold(chunks: GenerateContentResponse[]) {
  const accumulator = new ModelTurnAccumulator();
  const thoughts: string[] = [];
  for (const chunk of chunks) thoughts.push(...accumulator.push(chunk).thoughts);
  return { turn: accumulator.finish(), thoughts };
}

describe('createOpenAiResponsesBackendClient', () => {
  it('turns a recorded reasoning + function call stream into one thought and one call that keep their items', async () => {
    const provider = await serve((_request, response) => sendStream(response, sseFromJsonl(multistep[0] ?? '')));
    const client = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl });
    const user: LLMContent = { role: 'user', parts: [{ text: 'What is (12 + 7) * 3 * 10?' }] };
    const { turn, thoughts } = fold(await collect(client.streamGenerateContent('gpt-5.1-codex-max', body([user]))));

    const [reasoningItem, callItem] = doneItems(multistep[0] ?? '');
    expect(thoughts).toEqual([
      "**Calculating step-by-step using calculator**\n\nI'll compute 12 plus 7, then multiply the result by 3, and finally multiply that by 10, reporting the final product.",
    ]);
    expect(turn.content.parts).toEqual([
      { thought: true, text: thoughts[0], providerData: { provider: 'openai-responses', item: reasoningItem } },
      { functionCall: { id: 'call_AB6AaRZ1FYZB2RwS6A5vbdqn', name: 'calculator', args: { a: 12, b: 7, op: 'add' } }, providerData: { provider: 'openai-responses', item: callItem } },
    ]);
    expect(turn.functionCalls.map((call) => call.providerId)).toEqual(['call_AB6AaRZ1FYZB2RwS6A5vbdqn']);
    expect(turn.finishReason).toBe('STOP');
    expect(turn.usageMetadata).toEqual({ promptTokenCount: 134, candidatesTokenCount: 28, totalTokenCount: 162 });
    expect(turn.responseId).toBe('resp_01830d662ab3856501693c321345c88190b0de00f3b9975691');

    const sent = provider.requests[0];
    expect(sent?.url).toBe('/v1/responses');
    expect(sent?.headers.authorization).toBe(`Bearer ${KEY}`);
    const request = JSON.parse(sent?.body ?? '{}') as Record<string, unknown>;
    expect(request).toMatchObject({
      model: 'gpt-5.1-codex-max',
      instructions: 'Use the calculator.',
      stream: true,
      store: false,
      include: ['reasoning.encrypted_content'],
      reasoning: { summary: 'auto' },
      tool_choice: 'auto',
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'What is (12 + 7) * 3 * 10?' }] }],
      tools: [{ type: 'function', name: 'calculator', description: CALCULATOR.description, parameters: CALCULATOR.parametersJsonSchema, strict: false }],
    });
    // A reasoning model refuses sampling settings, which the loop always sends.
    expect(request).not.toHaveProperty('temperature');
    expect(request).not.toHaveProperty('top_p');
  });

  it('sends the reasoning and call items of earlier turns back unchanged, with the call output matched by call_id', async () => {
    const provider = await serve((_request, response, index) => sendStream(response, sseFromJsonl(multistep[index] ?? '')));
    const client = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl, model: 'gpt-5.1-codex-max' });
    const contents: LLMContent[] = [{ role: 'user', parts: [{ text: 'What is (12 + 7) * 3 * 10?' }] }];
    const { turn } = fold(await collect(client.streamGenerateContent('gemini-3-flash-preview', body(contents))));
    contents.push(JSON.parse(JSON.stringify(turn.content)) as LLMContent);
    contents.push({ role: 'user', parts: [{ functionResponse: { id: 'call_AB6AaRZ1FYZB2RwS6A5vbdqn', name: 'calculator', response: { result: 19 } } }] });
    await collect(client.streamGenerateContent('gemini-3-flash-preview', body(contents)));

    const second = provider.requests[1]?.body ?? '';
    const [reasoningItem, callItem] = doneItems(multistep[0] ?? '');
    expect(second).toContain(JSON.stringify(reasoningItem));
    expect(second).toContain(JSON.stringify(callItem));
    const input = (JSON.parse(second) as { model: string; input: unknown[] }).input;
    expect(JSON.parse(second)).toMatchObject({ model: 'gpt-5.1-codex-max' });
    expect(input).toEqual([
      { role: 'user', content: [{ type: 'input_text', text: 'What is (12 + 7) * 3 * 10?' }] },
      reasoningItem,
      callItem,
      { type: 'function_call_output', call_id: 'call_AB6AaRZ1FYZB2RwS6A5vbdqn', output: '{"result":19}' },
    ]);
  });

  it('keeps hosted web search items for the next request and reports their progress as metadata', async () => {
    const text = fixture('openai', 'responses-web-search.jsonl');
    const provider = await serve((_request, response) => sendStream(response, sseFromJsonl(text)));
    const client = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl, hostedTools: [{ type: 'web_search' }] });
    const chunks = await collect(client.streamGenerateContent('gpt-5-mini', { contents: [{ role: 'user', parts: [{ text: 'news?' }] }] }));
    const { turn } = fold(chunks);

    const searches = doneItems(text).filter((item) => item.type === 'web_search_call');
    expect(searches.length).toBeGreaterThan(1);
    const kept = turn.content.parts.filter((part) => (part.providerData as { item?: { type?: string } } | undefined)?.item?.type === 'web_search_call');
    expect(kept.map((part) => (part.providerData as { item: unknown }).item)).toEqual(searches);
    // Progress is metadata only: the search parts carry no text, call or media for the model.
    expect(kept.every((part) => Object.keys(part).join() === 'providerData')).toBe(true);
    const progress = chunks.map((chunk) => chunk.candidates?.[0]?.serverToolProgress as { tool: string; status: string } | undefined).filter(Boolean);
    expect(progress).toContainEqual(expect.objectContaining({ tool: 'web_search', status: 'searching' }));
    expect(progress).toContainEqual(expect.objectContaining({ tool: 'web_search', status: 'completed', detail: expect.objectContaining({ action: expect.anything() }) }));
    const answer = turn.content.parts.find((part) => typeof part.text === 'string' && part.text.length > 0 && part.thought !== true);
    expect(answer?.text).toMatch(/\S/);
    expect((turn.candidateMetadata.citationMetadata as { citations: Array<{ uri?: string }> }).citations.length).toBe(12);
    expect(JSON.parse(provider.requests[0]?.body ?? '{}')).toMatchObject({
      include: expect.arrayContaining(['web_search_call.action.sources', 'reasoning.encrypted_content']),
      tools: [{ type: 'web_search' }],
    });

    const followUp = [{ role: 'user' as const, parts: [{ text: 'news?' }] }, turn.content, { role: 'user' as const, parts: [{ text: 'more' }] }];
    await collect(client.streamGenerateContent('gpt-5-mini', { contents: followUp }));
    const input = (JSON.parse(provider.requests[1]?.body ?? '{}') as { input: unknown[] }).input;
    expect(input.filter((item) => (item as { type?: string }).type === 'web_search_call')).toEqual(searches);
  });

  it('makes a generated image a file part and rebuilds the item from it for the next request', async () => {
    const text = fixture('openai', 'responses-image-generation.jsonl');
    const provider = await serve((_request, response) => sendStream(response, sseFromJsonl(text)));
    const client = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl });
    const { turn } = fold(await collect(client.streamGenerateContent('gpt-5', { contents: [{ role: 'user', parts: [{ text: 'draw' }] }] })));
    const item = doneItems(text).find((entry) => entry.type === 'image_generation_call') as Record<string, unknown>;
    const image = turn.content.parts.find((part) => part.inlineData);
    expect(image?.inlineData).toEqual({ mimeType: `image/${String(item.output_format)}`, data: item.result });
    expect((image?.providerData as { item: Record<string, unknown> }).item).not.toHaveProperty('result');

    await collect(client.streamGenerateContent('gpt-5', { contents: [{ role: 'user', parts: [{ text: 'draw' }] }, turn.content, { role: 'user', parts: [{ text: 'again' }] }] }));
    const input = (JSON.parse(provider.requests[1]?.body ?? '{}') as { input: unknown[] }).input;
    expect(input).toContainEqual(item);
  });

  it('maps the recorded mid-stream quota error to RATE_LIMITED without retrying it', async () => {
    const provider = await serve((_request, response) => sendStream(response, sseFromJsonl(fixture('openai', 'responses-error-insufficient-quota.jsonl'))));
    const client = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl, retry: { baseDelayMs: 1, maxDelayMs: 2 } });
    await expect(collect(client.streamGenerateContent('gpt-5', { contents: [] }))).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      message: expect.stringContaining('You exceeded your current quota'),
      details: expect.objectContaining({ providerCode: 'insufficient_quota', retryable: false }),
    });
    expect(provider.requests).toHaveLength(1);
  });

  it('maps the recorded server error with a null code to MODEL_UNAVAILABLE, which pauses a run', async () => {
    const provider = await serve((_request, response) => sendStream(response, sseFromJsonl(fixture('openai', 'responses-error-server-error-null-code.jsonl'))));
    const client = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl });
    await expect(collect(client.streamGenerateContent('gpt-5', { contents: [] }))).rejects.toMatchObject({
      code: 'MODEL_UNAVAILABLE',
      message: expect.stringContaining('Sorry, something went wrong.'),
    });
  });

  it('retries a 429 after the time retry-after asks for, then streams', async () => {
    const provider = await serve((_request, response, index) => {
      if (index === 0) {
        sendJson(response, 429, JSON.stringify({ error: { message: 'Rate limit reached for gpt-5', type: 'requests', code: 'rate_limit_exceeded' } }), { 'retry-after-ms': '5' });
      } else sendStream(response, sseFromJsonl(fixture('openai', 'responses-text-plain.jsonl')));
    });
    const client = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl });
    const { turn } = fold(await collect(client.streamGenerateContent('gpt-4.1-nano', { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] })));
    expect(provider.requests).toHaveLength(2);
    expect(turn.content.parts.map((part) => part.text).join('')).toMatch(/\S/);
  });

  it('gives up on rate limits after the last attempt with RATE_LIMITED and the retry-after it was told', async () => {
    const provider = await serve((_request, response) =>
      sendJson(response, 429, JSON.stringify({ error: { message: 'Rate limit reached', code: 'rate_limit_exceeded' } }), { 'retry-after': '1' }),
    );
    const client = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl, retry: { maxAttempts: 2, maxDelayMs: 5 } });
    await expect(collect(client.streamGenerateContent('gpt-5', { contents: [] }))).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      details: expect.objectContaining({ retryAfterMs: 1000, status: 429 }),
    });
    expect(provider.requests).toHaveLength(2);
  });

  it('says plainly when the conversation no longer fits the context window', async () => {
    const provider = await serve((_request, response) =>
      sendJson(
        response,
        400,
        JSON.stringify({ error: { message: 'Your input exceeds the context window of this model. Please adjust your input and try again.', type: 'invalid_request_error', param: 'input', code: 'context_length_exceeded' } }),
      ),
    );
    const client = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl });
    await expect(collect(client.streamGenerateContent('gpt-5', { contents: [] }))).rejects.toMatchObject({
      code: 'MODEL_ERROR',
      message: expect.stringMatching(/^OpenAI: the conversation is longer than the model's context window/),
      details: expect.objectContaining({ reason: 'context_length_exceeded' }),
    });
  });

  it('never repeats the API key in an error, even when the provider echoes it', async () => {
    const provider = await serve((_request, response) =>
      sendJson(response, 401, JSON.stringify({ error: { message: `Incorrect API key provided: ${KEY}. You can find your API key at https://platform.openai.com/account/api-keys.`, code: 'invalid_api_key' } })),
    );
    const client = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl });
    const error = (await collect(client.streamGenerateContent('gpt-5', { contents: [] })).then(
      () => new Error('no error'),
      (caught: unknown) => caught as Error,
    )) as Error & { details?: unknown };
    expect(error).toMatchObject({ code: 'UNAUTHENTICATED' });
    expect(JSON.stringify({ message: error.message, details: error.details })).not.toContain(KEY);
    expect(error.message).not.toMatch(/sk-test/);
  });

  it('rejects garbage, oversized lines and streams that stop early with coded errors', async () => {
    const garbage = await serve((_request, response) => sendStream(response, 'data: {"type":"response.created","response":{}}\n\ndata: not json at all\n\n'));
    const client = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: garbage.baseUrl });
    await expect(collect(client.streamGenerateContent('gpt-5', { contents: [] }))).rejects.toMatchObject({ code: 'MODEL_ERROR', message: expect.stringContaining('not JSON') });
    await garbage.close();

    mock = await startMockProvider((_request, response) => sendStream(response, `data: {"type":"response.created","delta":"${'x'.repeat(5000)}"}\n\n`));
    const bounded = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: mock.baseUrl, limits: { maxLineBytes: 1024 } });
    await expect(collect(bounded.streamGenerateContent('gpt-5', { contents: [] }))).rejects.toMatchObject({ code: 'MODEL_ERROR', details: expect.objectContaining({ limit: 'maxLineBytes' }) });
    await mock.close();

    const cut = multistep[0]?.split('\n').slice(0, 20).join('\n') ?? '';
    mock = await startMockProvider((_request, response) => sendStream(response, sseFromJsonl(cut)));
    const truncated = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: mock.baseUrl });
    await expect(collect(truncated.streamGenerateContent('gpt-5', { contents: [] }))).rejects.toMatchObject({ code: 'MODEL_UNAVAILABLE' });
  });

  it('abandons an answer that goes silent, as a transient failure', async () => {
    const provider = await serve((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(`data: ${multistep[0]?.split('\n')[0]}\n\n`);
    });
    const client = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl, limits: { idleTimeoutMs: 50 } });
    await expect(collect(client.streamGenerateContent('gpt-5', { contents: [] }))).rejects.toMatchObject({ code: 'MODEL_UNAVAILABLE', message: expect.stringContaining('sent nothing') });
  });

  it('stops at once with ABORTED when the run is cancelled mid-answer', async () => {
    const head = multistep[0]?.split('\n').slice(0, 39).join('\n') ?? '';
    const provider = await serve((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(sseFromJsonl(head));
    });
    const client = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl });
    const controller = new AbortController();
    const seen: GenerateContentResponse[] = [];
    await expect(
      (async () => {
        for await (const chunk of client.streamGenerateContent('gpt-5', { contents: [] }, controller.signal)) {
          seen.push(chunk);
          controller.abort();
        }
      })(),
    ).rejects.toMatchObject({ code: 'ABORTED' });
    expect(seen).toHaveLength(1);
  });

  it('gives two calls of one answer that share a call_id ids of their own, and matches each output to its call', async () => {
    const item = (id: string, args: string) => ({ id, type: 'function_call', status: 'completed', call_id: 'call_0', name: 'calculator', arguments: args });
    const events = [
      { type: 'response.created', response: { id: 'resp_1', model: 'local' } },
      { type: 'response.output_item.done', output_index: 0, item: item('fc_1', '{"a":1,"b":2,"op":"add"}') },
      { type: 'response.output_item.done', output_index: 1, item: item('fc_2', '{"a":3,"b":4,"op":"add"}') },
      { type: 'response.completed', response: { id: 'resp_1', status: 'completed' } },
    ];
    const provider = await serve((_request, response) => sendStream(response, sseFromJsonl(events.map((event) => JSON.stringify(event)).join('\n'))));
    const client = createOpenAiResponsesBackendClient({ baseUrl: provider.baseUrl, fetch });
    const contents: LLMContent[] = [{ role: 'user', parts: [{ text: 'add' }] }];
    const { turn } = fold(await collect(client.streamGenerateContent('local', body(contents))));
    expect(turn.functionCalls.map((call) => call.args)).toEqual([{ a: 1, b: 2, op: 'add' }, { a: 3, b: 4, op: 'add' }]);
    const ids = turn.functionCalls.map((call) => call.providerId ?? '');
    expect(ids[0]).toBe('call_0');
    expect(new Set(ids).size).toBe(2);

    contents.push(turn.content, {
      role: 'user',
      parts: turn.functionCalls.map((call, position) => ({ functionResponse: { id: call.providerId ?? '', name: call.name, response: { result: position } } })),
    });
    await collect(client.streamGenerateContent('local', body(contents)));
    const input = (JSON.parse(provider.requests[1]?.body ?? '{}') as { input: Array<{ type?: string; call_id?: string; output?: string }> }).input;
    const sentCalls = input.filter((entry) => entry.type === 'function_call').map((entry) => entry.call_id);
    const outputs = input.filter((entry) => entry.type === 'function_call_output').map((entry) => [entry.call_id, entry.output]);
    expect(sentCalls).toEqual(ids);
    expect(outputs).toEqual([
      [ids[0], '{"result":0}'],
      [ids[1], '{"result":1}'],
    ]);
  });

  it('keeps a key passed in a header (Azure api-key) out of errors', async () => {
    const azureKey = '3f9a8c7e6d5b4a3928170615f4e3d2c1';
    const provider = await serve((_request, response) => sendJson(response, 401, JSON.stringify({ error: { code: '401', message: `Access denied: key ${azureKey} is invalid` } })));
    const client = createOpenAiResponsesBackendClient({ fetch, baseUrl: provider.baseUrl, headers: { 'api-key': azureKey } });
    const error = await collect(client.streamGenerateContent('gpt-5', { contents: [] })).then(
      () => new Error('no error'),
      (caught: unknown) => caught as Error,
    );
    expect(error).toMatchObject({ code: 'UNAUTHENTICATED', message: expect.stringContaining('Access denied') });
    expect(error.message).not.toContain(azureKey);
  });

  it('says how often it tried a rate limit, so the loop does not ask again but pauses the run', async () => {
    const provider = await serve((_request, response) => sendJson(response, 429, JSON.stringify({ error: { message: 'Rate limit reached', code: 'rate_limit_exceeded' } })));
    const client = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl, retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2 } });
    const error = await collect(client.streamGenerateContent('gpt-5', { contents: [] })).then(
      () => new Error('no error'),
      (caught: unknown) => caught as AgentError,
    );
    expect(provider.requests).toHaveLength(3);
    expect(error).toMatchObject({ code: 'RATE_LIMITED', details: expect.objectContaining({ attempts: 3 }) });
    expect(retriedByBackend(error as AgentError)).toBe(true);
  });

  it('does not wait out a retry-after past its retry budget, so the run pauses instead of looking silent', async () => {
    const provider = await serve((_request, response) =>
      sendJson(response, 429, JSON.stringify({ error: { message: 'Rate limit reached', code: 'rate_limit_exceeded' } }), { 'retry-after': '58' }),
    );
    const client = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl });
    const error = await collect(client.streamGenerateContent('gpt-5', { contents: [] })).then(
      () => new Error('no error'),
      (caught: unknown) => caught as AgentError,
    );
    expect(provider.requests).toHaveLength(1);
    expect(error).toMatchObject({ code: 'RATE_LIMITED', message: expect.stringContaining('would pass the retry budget of 40 s'), details: expect.objectContaining({ attempts: 1, retryable: false }) });
    expect(retriedByBackend(error as AgentError)).toBe(true);
  });

  it('turns arguments that are not JSON into a malformed-call finish instead of running the call', async () => {
    const broken = multistep[1]?.replaceAll('"arguments":"{\\"a\\":19,\\"b\\":3,\\"op\\":\\"multiply\\"}"', '"arguments":"{\\"a\\":19,"') ?? '';
    const provider = await serve((_request, response) => sendStream(response, sseFromJsonl(broken)));
    const client = createOpenAiResponsesBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl });
    const { turn } = fold(await collect(client.streamGenerateContent('gpt-5', { contents: [] })));
    expect(turn.functionCalls).toEqual([]);
    expect(turn.finishReason).toBe('MALFORMED_FUNCTION_CALL');
    expect(turn.candidateMetadata.finishMessage).toMatch(/calculator/);
  });
});
