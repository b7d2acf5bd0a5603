import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineFunction } from '../../functions/index.js';
import { ModelTurnAccumulator } from '../../model/index.js';
import type { LLMContent } from '../../protocol/content.js';
import type { AgentEvent } from '../../protocol/events.js';
import type { GenerateContentRequest, GenerateContentResponse } from '../../protocol/gemini.js';
import {
  collect,
  fixture,
  jsonlEvents,
  sendJson,
  sendStream,
  sseFromJsonl,
  startMockProvider,
  type MockProvider,
  type MockRoute,
} from '../../../test/provider-replay-server.js';
import { run } from '../../run/index.js';
import { createMemoryInteractionStore } from '../../testing/index.js';
import { createAnthropicBackendClient, toAnthropicRequest } from './anthropic-backend-client.js';

const KEY = 'sk-ant-api03-test-0123456789';
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

/** The blocks of a capture as the API would list them in `message.content` (deltas applied). */
function finalBlocks(text: string): Array<Record<string, unknown>> {
  const blocks = new Map<number, Record<string, unknown> & { json?: string }>();
  for (const event of jsonlEvents(text)) {
    const index = event.index as number;
    if (event.type === 'content_block_start') blocks.set(index, { ...(event.content_block as object) });
    if (event.type === 'content_block_delta') {
      const block = blocks.get(index) as Record<string, unknown> & { json?: string };
      const delta = event.delta as Record<string, string>;
      if (delta.type === 'thinking_delta') block.thinking = `${block.thinking as string}${delta.thinking}`;
      if (delta.type === 'signature_delta') block.signature = delta.signature;
      if (delta.type === 'input_json_delta') block.json = `${block.json ?? ''}${delta.partial_json}`;
      if (delta.type === 'text_delta') block.text = `${block.text as string}${delta.text}`;
    }
  }
  return [...blocks.values()].map(({ json, ...block }) => (json === undefined ? block : { ...block, input: json.trim() ? JSON.parse(json) : {} }));
}

const TOOLS: GenerateContentRequest['tools'] = [
  {
    functionDeclarations: [
      { name: 'json', description: 'Answers with JSON.', parametersJsonSchema: { type: 'object', properties: { elements: { type: 'array' } } } },
      { name: 'display_products', description: 'Shows products.', parametersJsonSchema: { type: 'object', properties: {} } },
    ],
  },
];

function body(contents: LLMContent[]): GenerateContentRequest {
  return {
    contents,
    systemInstruction: { role: 'user', parts: [{ text: 'Be brief.' }] },
    tools: TOOLS,
    generationConfig: { temperature: 1, topP: 1, thinkingConfig: { includeThoughts: true, thinkingBudget: -1 } },
  };
}

describe('createAnthropicBackendClient', () => {
  it('keeps a thinking block with its signature on its thought, and the tool use id on its call', async () => {
    const text = fixture('anthropic', 'messages-thinking-then-tool-use.SPLICED.jsonl');
    const provider = await serve((_request, response) => sendStream(response, sseFromJsonl(text)));
    const client = createAnthropicBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl, betas: ['a-1', 'b-2'] });
    const { turn, thoughts } = fold(await collect(client.streamGenerateContent('claude-sonnet-4-5', body([{ role: 'user', parts: [{ text: 'Divide 925 by 5' }] }]))));
    const [thinking, toolUse] = finalBlocks(text);

    expect(thoughts).toEqual(['The previous result was 925. Now I need to divide that by 5.\n\n925 ÷ 5 = 185']);
    expect(turn.content.parts).toEqual([
      { thought: true, text: thoughts[0], providerData: { provider: 'anthropic', block: thinking } },
      {
        functionCall: { id: 'toolu_01KFbKqPYSuAKujiL6mTfzYA', name: 'json', args: { elements: [{ location: 'San Francisco', temperature: 58, condition: 'sunny' }] } },
        providerData: { provider: 'anthropic', block: toolUse },
      },
    ]);
    expect((thinking as { signature: string }).signature).toMatch(/^EvQBCkYICxgCKkAxhD4N/);
    expect(turn.finishReason).toBe('STOP');
    expect(turn.usageMetadata).toEqual({ promptTokenCount: 849, candidatesTokenCount: 47, totalTokenCount: 896 });

    const sent = provider.requests[0];
    expect(sent?.url).toBe('/v1/messages');
    expect(sent?.headers).toMatchObject({ 'x-api-key': KEY, 'anthropic-version': '2023-06-01', 'anthropic-beta': 'a-1,b-2' });
    const request = JSON.parse(sent?.body ?? '{}') as Record<string, unknown>;
    expect(request).toEqual({
      model: 'claude-sonnet-4-5',
      max_tokens: 16000,
      stream: true,
      system: 'Be brief.',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Divide 925 by 5' }] }],
      tools: [
        { name: 'json', description: 'Answers with JSON.', input_schema: { type: 'object', properties: { elements: { type: 'array' } } } },
        { name: 'display_products', description: 'Shows products.', input_schema: { type: 'object', properties: {} } },
      ],
      tool_choice: { type: 'auto' },
      thinking: { type: 'enabled', budget_tokens: 4096 },
    });
  });

  it('sends the thinking and tool use blocks back unchanged, with the tool result first in the next user message', async () => {
    const text = fixture('anthropic', 'messages-thinking-then-tool-use.SPLICED.jsonl');
    const provider = await serve((_request, response) => sendStream(response, sseFromJsonl(text)));
    const client = createAnthropicBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl });
    const contents: LLMContent[] = [{ role: 'user', parts: [{ text: 'Divide 925 by 5' }] }];
    const { turn } = fold(await collect(client.streamGenerateContent('claude-sonnet-4-5', body(contents))));
    contents.push(JSON.parse(JSON.stringify(turn.content)) as LLMContent, {
      role: 'user',
      parts: [{ functionResponse: { id: 'toolu_01KFbKqPYSuAKujiL6mTfzYA', name: 'json', response: { ok: true } } }, { text: 'Go on.' }],
    });
    await collect(client.streamGenerateContent('claude-sonnet-4-5', body(contents)));
    const second = provider.requests[1]?.body ?? '';
    const [thinking, toolUse] = finalBlocks(text);
    expect(second).toContain(JSON.stringify(thinking));
    expect((JSON.parse(second) as { messages: unknown[] }).messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Divide 925 by 5' }] },
      { role: 'assistant', content: [thinking, toolUse] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01KFbKqPYSuAKujiL6mTfzYA', content: '{"ok":true}' }, { type: 'text', text: 'Go on.' }] },
    ]);
  });

  it('reads whitespace-padded lines and three parallel calls in order', async () => {
    const provider = await serve((_request, response) => sendStream(response, sseFromJsonl(fixture('anthropic', 'messages-parallel-tool-use-x3.jsonl'))));
    const client = createAnthropicBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl });
    const { turn } = fold(await collect(client.streamGenerateContent('claude-sonnet-4-5', body([{ role: 'user', parts: [{ text: 'search' }] }]))));
    expect(turn.functionCalls.map((call) => [call.providerId, call.args])).toEqual([
      ['toolu_01LtEf4h1QW7KCKLsYMuhTNB', { query: 'alpha' }],
      ['toolu_016tfZE7otAFSBjhc67wu189', { query: 'beta' }],
      ['toolu_01XkU35z8BVWqqc9tijDuLrA', { query: 'gamma' }],
    ]);
    // The `caller` the 2026 API adds goes back with the block.
    expect((turn.content.parts[0]?.providerData as { block: Record<string, unknown> }).block.caller).toEqual({ type: 'direct' });
  });

  it('keeps server tool blocks for the next request, reports them as progress, and runs only the client call', async () => {
    const text = fixture('anthropic', 'messages-web-fetch-error-then-tool-use.jsonl');
    const provider = await serve((_request, response) => sendStream(response, sseFromJsonl(text)));
    const client = createAnthropicBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl, serverTools: [{ type: 'web_fetch_20250910', name: 'web_fetch' }] });
    const chunks = await collect(client.streamGenerateContent('claude-sonnet-4-5', body([{ role: 'user', parts: [{ text: 'steps' }] }])));
    const { turn } = fold(chunks);
    expect(turn.functionCalls.map((call) => [call.providerId, call.name, call.args])).toEqual([['toolu_01FUuDcCDweLziH8QvQFQLtV', 'display_products', {}]]);
    const blocks = finalBlocks(text);
    const server = turn.content.parts.filter((part) => !part.functionCall && part.providerData).map((part) => (part.providerData as { block: unknown }).block);
    expect(server).toEqual([blocks[1], blocks[2]]);
    const progress = chunks.map((chunk) => chunk.candidates?.[0]?.serverToolProgress).filter(Boolean);
    expect(progress).toEqual([
      { provider: 'anthropic', tool: 'web_fetch', id: 'srvtoolu_01J1EKYpi3LLtWHmtZnY1gto', status: 'in_progress' },
      { provider: 'anthropic', tool: 'web_fetch', id: 'srvtoolu_01J1EKYpi3LLtWHmtZnY1gto', status: 'running', detail: { input: { url: 'https://httpbin.org/status/500' } } },
      {
        provider: 'anthropic',
        tool: 'web_fetch',
        id: 'srvtoolu_01J1EKYpi3LLtWHmtZnY1gto',
        status: 'failed',
        detail: { content: { type: 'web_fetch_tool_result_error', error_code: 'url_not_accessible' } },
      },
    ]);
    expect(JSON.parse(provider.requests[0]?.body ?? '{}').tools).toContainEqual({ type: 'web_fetch_20250910', name: 'web_fetch' });
  });

  it('keeps cited text with its citations and the code execution container for the next request', async () => {
    const search = fixture('anthropic', 'messages-web-search-citations.jsonl');
    mock = await startMockProvider((_request, response) => sendStream(response, sseFromJsonl(search)));
    const client = createAnthropicBackendClient({ apiKey: KEY, fetch, baseUrl: mock.baseUrl });
    const { turn } = fold(await collect(client.streamGenerateContent('claude-sonnet-4', { contents: [{ role: 'user', parts: [{ text: 'news' }] }] })));
    const cited = turn.content.parts.filter((part) => (part.providerData as { block?: { citations?: unknown[] } } | undefined)?.block?.citations);
    expect(cited.length).toBeGreaterThan(0);
    for (const part of cited) {
      const block = (part.providerData as { block: { text: string; citations: Array<{ type: string; encrypted_index: string }> } }).block;
      expect(block.text).toBe(part.text);
      expect(block.citations[0]).toMatchObject({ type: 'web_search_result_location', encrypted_index: expect.any(String) });
    }
    await mock.close();

    const code = fixture('anthropic', 'messages-code-execution-20250825-bash-texteditor.jsonl');
    mock = await startMockProvider((_request, response) => sendStream(response, sseFromJsonl(code)));
    const coder = createAnthropicBackendClient({ apiKey: KEY, fetch, baseUrl: mock.baseUrl });
    const { turn: coded } = fold(await collect(coder.streamGenerateContent('claude-sonnet-4-5', { contents: [{ role: 'user', parts: [{ text: 'fib' }] }] })));
    const next = toAnthropicRequest('claude-sonnet-4-5', { contents: [{ role: 'user', parts: [{ text: 'fib' }] }, coded.content, { role: 'user', parts: [{ text: 'again' }] }] }, {}, Date.parse('2025-10-14T10:00:00Z'));
    expect(next.container).toBe('container_011CU6pTr2hLT47seQ5Xs4yj');
    const assistant = (next.messages as Array<{ role: string; content: Array<{ type: string }> }>)[1];
    expect(assistant?.content.map((block) => block.type)).toEqual([
      'text',
      'server_tool_use',
      'text_editor_code_execution_tool_result',
      'text',
      'server_tool_use',
      'bash_code_execution_tool_result',
      'text',
    ]);
    const expired = toAnthropicRequest('claude-sonnet-4-5', { contents: [{ role: 'user', parts: [{ text: 'fib' }] }, coded.content] }, {}, Date.parse('2025-10-15T00:00:00Z'));
    expect(expired).not.toHaveProperty('container');
  });

  it('gives two tool uses of one answer that share an id ids of their own, in the block sent back too', async () => {
    const toolUse = (index: number, json: string) => [
      { type: 'content_block_start', index, content_block: { type: 'tool_use', id: 'toolu_same', name: 'json', input: {} } },
      { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: json } },
      { type: 'content_block_stop', index },
    ];
    const events = [
      { type: 'message_start', message: { id: 'msg_1', model: 'local', usage: { input_tokens: 5, output_tokens: 1 } } },
      ...toolUse(0, '{"elements":[1]}'),
      ...toolUse(1, '{"elements":[2]}'),
      { type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 9 } },
      { type: 'message_stop' },
    ];
    const provider = await serve((_request, response) => sendStream(response, sseFromJsonl(events.map((event) => JSON.stringify(event)).join('\n'))));
    const client = createAnthropicBackendClient({ fetch, baseUrl: provider.baseUrl });
    const contents: LLMContent[] = [{ role: 'user', parts: [{ text: 'two' }] }];
    const { turn } = fold(await collect(client.streamGenerateContent('claude-sonnet-4-5', body(contents))));
    expect(turn.functionCalls.map((call) => call.args)).toEqual([{ elements: [1] }, { elements: [2] }]);
    const ids = turn.functionCalls.map((call) => call.providerId ?? '');
    expect(ids[0]).toBe('toolu_same');
    expect(new Set(ids).size).toBe(2);

    contents.push(turn.content, {
      role: 'user',
      parts: turn.functionCalls.map((call, position) => ({ functionResponse: { id: call.providerId ?? '', name: call.name, response: { result: position } } })),
    });
    await collect(client.streamGenerateContent('claude-sonnet-4-5', body(contents)));
    const messages = (JSON.parse(provider.requests[1]?.body ?? '{}') as { messages: Array<{ content: Array<{ type: string; id?: string; tool_use_id?: string }> }> }).messages;
    expect(messages[1]?.content.filter((block) => block.type === 'tool_use').map((block) => block.id)).toEqual(ids);
    expect(messages[2]?.content.map((block) => block.tool_use_id)).toEqual(ids);
  });

  it('answers at the turn cap after tool use: the functions called go along as tools the model may not call', async () => {
    // As the API does: a history with tool blocks needs tools in the request.
    const provider = await serve((request, response) => {
      const sent = JSON.parse(request.body) as { tools?: unknown[]; messages: Array<{ content: Array<{ type: string }> }> };
      const toolBlocks = sent.messages.some((message) => message.content.some((block) => block.type === 'tool_use' || block.type === 'tool_result'));
      if (toolBlocks && !sent.tools) {
        sendJson(response, 400, JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: 'Requests which include `tool_use` or `tool_result` blocks must define tools.' } }));
      } else {
        sendStream(response, sseFromJsonl(fixture('anthropic', toolBlocks ? 'messages-text-plain.jsonl' : 'messages-text-then-tool-use.jsonl')));
      }
    });
    const json = defineFunction({ name: 'json', description: 'Answers with JSON.', parameters: z.object({ elements: z.array(z.unknown()) }), handler: async () => ({ shown: true }) });
    const backend = createAnthropicBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl });
    const events: AgentEvent[] = [];
    const ports = { backend, store: createMemoryInteractionStore() };
    for await (const event of run({ segments: [{ type: 'text', text: 'Show the weather.' }] }, ports, { mode: 'chat', maxTurns: 1, defaultFunctionGroups: false, functionGroups: [{ name: 'json', functions: [json] }] })) {
      events.push(event);
    }
    expect(events.filter((event) => event.type === 'error')).toEqual([]);
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: false, outcomes: { parts: [{ text: expect.stringMatching(/^Hello! I'm doing well/) }] } } });
    const last = JSON.parse(provider.requests[1]?.body ?? '{}') as Record<string, unknown>;
    expect(last.tools).toEqual([{ name: 'json', description: 'Not available in this turn.', input_schema: { type: 'object' } }]);
    expect(last.tool_choice).toEqual({ type: 'none' });
  });

  it('goes on with a turn the API paused, sending what it said so far back as the last assistant message, and ends it once', async () => {
    const first = fixture('anthropic', 'messages-web-search-citations.jsonl').replace('"stop_reason":"end_turn"', '"stop_reason":"pause_turn"');
    expect(first).toContain('pause_turn');
    const provider = await serve((_request, response, index) => sendStream(response, sseFromJsonl(index === 0 ? first : fixture('anthropic', 'messages-text-plain.jsonl'))));
    const client = createAnthropicBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl, serverTools: [{ type: 'web_search_20250305', name: 'web_search' }] });
    const chunks = await collect(client.streamGenerateContent('claude-sonnet-4-5', body([{ role: 'user', parts: [{ text: 'Tech news today?' }] }])));
    const { turn } = fold(chunks);

    expect(provider.requests).toHaveLength(2);
    expect(chunks.filter((chunk) => chunk.candidates?.[0]?.finishReason !== undefined)).toHaveLength(1);
    expect(turn.finishReason).toBe('STOP');
    const text = turn.content.parts.map((part) => (part.thought ? '' : (part.text ?? ''))).join('');
    expect(text).toMatch(/^Based on my search results/);
    expect(text).toMatch(/Is there anything I can help you with\?$/);

    type Sent = { messages: Array<{ role: string; content: Array<Record<string, unknown>> }> };
    const sentFirst = JSON.parse(provider.requests[0]?.body ?? '{}') as Sent;
    const again = JSON.parse(provider.requests[1]?.body ?? '{}') as Sent;
    expect(again.messages.slice(0, -1)).toEqual(sentFirst.messages);
    const paused = again.messages.at(-1);
    expect(paused?.role).toBe('assistant');
    const [searchCall, searchResult] = finalBlocks(first);
    expect(paused?.content.slice(0, 2)).toEqual([searchCall, searchResult]);
    expect(paused?.content.some((block) => Array.isArray(block.citations) && block.citations.length > 0)).toBe(true);
    expect({ ...again, messages: [] }).toEqual({ ...sentFirst, messages: [] });
  });

  it('ends a turn the API keeps pausing after five continuations, as it stands', async () => {
    const paused = fixture('anthropic', 'messages-text-plain.jsonl').replace('"stop_reason":"end_turn"', '"stop_reason":"pause_turn"');
    const provider = await serve((_request, response) => sendStream(response, sseFromJsonl(paused)));
    const client = createAnthropicBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl });
    const { turn } = fold(await collect(client.streamGenerateContent('claude-sonnet-4-5', body([{ role: 'user', parts: [{ text: 'Hi' }] }]))));
    expect(provider.requests).toHaveLength(6);
    expect(turn.finishReason).toBe('STOP');
    expect(turn.usageMetadata).toMatchObject({ promptTokenCount: 6 * 12, candidatesTokenCount: 6 * 30 });
  });

  it('turns the error event in the middle of a stream into MODEL_UNAVAILABLE', async () => {
    const provider = await serve((_request, response) => sendStream(response, fixture('anthropic', 'messages-error-overloaded-midstream.SYNTHETIC.sse')));
    const client = createAnthropicBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl });
    await expect(collect(client.streamGenerateContent('claude-sonnet-4-5', { contents: [] }))).rejects.toMatchObject({
      code: 'MODEL_UNAVAILABLE',
      message: 'Anthropic stream error overloaded_error: Overloaded',
      details: expect.objectContaining({ requestId: 'req_SYNTHETIC000000000000000' }),
    });
  });

  it('maps HTTP errors by their type: overload is retried, a long prompt is a clear error', async () => {
    const provider = await serve((_request, response, index) => {
      if (index === 0) sendJson(response, 529, JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' }, request_id: 'req_1' }));
      else sendJson(response, 400, JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: 'prompt is too long: 210000 tokens > 200000 maximum' } }));
    });
    const client = createAnthropicBackendClient({ apiKey: KEY, fetch, baseUrl: provider.baseUrl, retry: { baseDelayMs: 1, maxDelayMs: 2 } });
    await expect(collect(client.streamGenerateContent('claude-sonnet-4-5', { contents: [] }))).rejects.toMatchObject({
      code: 'MODEL_ERROR',
      message: "Anthropic: the conversation is longer than the model's context window (prompt is too long: 210000 tokens > 200000 maximum)",
    });
    expect(provider.requests).toHaveLength(2);
  });

  it('leaves thinking out when the request forces a function call, and sampling settings out when thinking', () => {
    const forced = toAnthropicRequest('claude-sonnet-4-5', { ...body([{ role: 'user', parts: [{ text: 'x' }] }]), toolConfig: { functionCallingConfig: { mode: 'ANY' } } });
    expect(forced).toMatchObject({ tool_choice: { type: 'any' }, temperature: 1 });
    expect(forced).not.toHaveProperty('thinking');
    expect(forced).not.toHaveProperty('top_p');
    const thinking = toAnthropicRequest('claude-sonnet-4-5', body([{ role: 'user', parts: [{ text: 'x' }] }]));
    expect(thinking).not.toHaveProperty('temperature');
    const old = toAnthropicRequest('claude-3-5-haiku-latest', body([{ role: 'user', parts: [{ text: 'x' }] }]));
    expect(old).not.toHaveProperty('thinking');
    expect(old.max_tokens).toBe(8192);
  });

  it('names the part it cannot send', () => {
    const contents: LLMContent[] = [{ role: 'user', parts: [{ text: 'see' }, { fileData: { fileUri: 'https://generativelanguage.googleapis.com/v1beta/files/abc', mimeType: 'image/png' } }] }];
    expect(() => toAnthropicRequest('claude-sonnet-4-5', { contents })).toThrow(expect.objectContaining({ code: 'BAD_REQUEST', message: expect.stringMatching(/^contents\[0\]\.parts\[1\]\.fileData: /) }));
  });
});
