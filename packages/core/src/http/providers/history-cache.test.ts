import { describe, expect, it } from 'vitest';
import type { LLMContent } from '../../protocol/content.js';
import type { GenerateContentRequest } from '../../protocol/gemini.js';
import type { BackendClient } from '../../ports/index.js';
import { createAnthropicBackendClient, toAnthropicRequest } from './anthropic-backend-client.js';
import { createOpenAiCompatibleBackendClient, toChatCompletionsRequest } from './openai-compatible-backend-client.js';
import { createOpenAiResponsesBackendClient, toOpenAiResponsesRequest } from './openai-responses-backend-client.js';

const IMAGE = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=';

/** One more exchange of a tool loop, with each provider's own data on the model's parts. */
function exchange(turn: number): LLMContent[] {
  return [
    {
      role: 'model',
      parts: [
        { text: `Thinking about city ${turn}.`, thought: true, providerData: { provider: 'openai-compatible', reasoningField: 'reasoning_content' } },
        { text: `Reasoning ${turn}.`, thought: true, providerData: { provider: 'openai-responses', item: { type: 'reasoning', id: `rs_${turn}`, summary: [], encrypted_content: `enc${turn}` } } },
        { text: `Signed thought ${turn}.`, thought: true, providerData: { provider: 'anthropic', block: { type: 'thinking', thinking: `Signed thought ${turn}.`, signature: `sig${turn}` } } },
        { providerData: { provider: 'anthropic', container: { id: `container_${turn}`, expires_at: '2999-01-01T00:00:00Z' } } },
        { text: `Looking up city ${turn}.` },
        { functionCall: { id: `call_${turn}`, name: 'get_weather', args: { city: `City ${turn}` } } },
      ],
    },
    { role: 'user', parts: [{ functionResponse: { id: `call_${turn}`, name: 'get_weather', response: { tempC: 20 + turn } } }] },
  ];
}

function body(contents: LLMContent[]): GenerateContentRequest {
  return {
    contents: contents.slice(),
    systemInstruction: { role: 'user', parts: [{ text: 'You are "careful".\nAnswer briefly.' }] },
    tools: [{ functionDeclarations: [{ name: 'get_weather', description: 'Weather.', parametersJsonSchema: { type: 'object', properties: { city: { type: 'string' } } } }] }],
    generationConfig: { temperature: 1, maxOutputTokens: 2048 },
  };
}

/** A client whose every request is refused, after its body was kept. */
function capturing(create: (fetch: typeof globalThis.fetch) => BackendClient): { client: BackendClient; sent: string[] } {
  const sent: string[] = [];
  const fetch = (async (_url: string, init: RequestInit) => {
    sent.push(init.body as string);
    return new Response('{"error":{"message":"stop here"}}', { status: 400, headers: { 'content-type': 'application/json' } });
  }) as typeof globalThis.fetch;
  return { client: create(fetch), sent };
}

async function send(client: BackendClient, request: GenerateContentRequest): Promise<void> {
  await expect(async () => {
    for await (const _chunk of client.streamGenerateContent('some-model', request)) {
      // Never reached.
    }
  }).rejects.toThrow();
}

const providers = [
  {
    name: 'OpenAI-compatible',
    create: (fetch: typeof globalThis.fetch) => createOpenAiCompatibleBackendClient({ baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'k', fetch }),
    whole: (request: GenerateContentRequest) => toChatCompletionsRequest('some-model', request),
  },
  {
    name: 'OpenAI Responses',
    create: (fetch: typeof globalThis.fetch) => createOpenAiResponsesBackendClient({ baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'k', fetch }),
    whole: (request: GenerateContentRequest) => toOpenAiResponsesRequest('some-model', request),
  },
  {
    name: 'Anthropic',
    create: (fetch: typeof globalThis.fetch) => createAnthropicBackendClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'k', fetch }),
    whole: (request: GenerateContentRequest) => toAnthropicRequest('some-model', request),
  },
];

describe.each(providers)('$name client, request after request of a growing history', ({ create, whole }) => {
  it('sends each request exactly as the history translated whole', async () => {
    const { client, sent } = capturing(create);
    const contents: LLMContent[] = [{ role: 'user', parts: [{ text: 'Weather in "every" city?\n' }, { inlineData: { mimeType: 'image/png', data: IMAGE } }] }];
    const expected: string[] = [];
    for (let turn = 1; turn <= 6; turn += 1) {
      const request = body(contents);
      await send(client, request);
      expected.push(JSON.stringify(whole(request)));
      contents.push(...exchange(turn));
    }
    expect(sent).toEqual(expected);
    expect(JSON.parse(sent.at(-1) as string)).toBeTypeOf('object');
  });

  it('translates again a content whose parts were replaced, or that moved', async () => {
    const { client, sent } = capturing(create);
    const first: LLMContent = { role: 'user', parts: [{ text: 'First question.' }] };
    // Calls without ids get ids made from their content's index.
    const call: LLMContent = { role: 'model', parts: [{ functionCall: { name: 'get_weather', args: { city: 'Oslo' } } }] };
    const answer: LLMContent = { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { tempC: 3 } } }] };
    const contents: LLMContent[] = [first, call, answer];
    const expected = [JSON.stringify(whole(body(contents)))];
    await send(client, body(contents));
    first.parts = [{ text: 'The question, reworded.' }];
    expected.push(JSON.stringify(whole(body(contents))));
    await send(client, body(contents));
    const moved: LLMContent[] = [{ role: 'user', parts: [{ text: 'Before everything.' }] }, ...exchange(1), ...contents];
    expected.push(JSON.stringify(whole(body(moved))));
    await send(client, body(moved));
    expect(sent).toEqual(expected);
    expect(sent[1]).toContain('The question, reworded.');
    expect(sent[1]).not.toContain('First question.');
    expect(sent[2]).not.toBe(sent[1]);
  });
});

describe('Anthropic client, a history whose neighbours share a role', () => {
  it('merges them into one message as the whole translation does', async () => {
    const { client, sent } = capturing((fetch) => createAnthropicBackendClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'k', fetch }));
    const contents: LLMContent[] = [
      { role: 'user', parts: [{ text: 'Hello.' }] },
      ...exchange(1),
      { role: 'user', parts: [{ text: 'And tomorrow?' }] },
    ];
    const request = body(contents);
    await send(client, request);
    await send(client, request);
    // A text before the tool results it is merged with: the results still open the message.
    const [call, answer] = exchange(2) as [LLMContent, LLMContent];
    const later = body([...contents, call, { role: 'user', parts: [{ text: 'Note this first.' }] }, answer]);
    await send(client, later);
    const expected = [request, request, later].map((each) => JSON.stringify(toAnthropicRequest('some-model', each)));
    expect(sent).toEqual(expected);
    type Messages = { messages: Array<{ role: string; content: Array<{ type: string }> }> };
    const messages = (JSON.parse(expected[0] as string) as Messages).messages;
    expect(messages.map((message) => message.role)).toEqual(['user', 'assistant', 'user']);
    expect(messages[2]?.content.map((block) => block.type)).toEqual(['tool_result', 'text']);
    const laterMessages = (JSON.parse(expected[2] as string) as Messages).messages;
    expect(laterMessages.at(-1)?.content.map((block) => block.type)).toEqual(['tool_result', 'text']);
  });
});
