import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { defineFunction, resume, run, Suspend, type AgentEvent, type BackendClient, type FunctionGroup, type InteractionStore, type RunOptions } from '@org/core';
import { z } from 'zod';
import { createAnthropicBackendClient, createOpenAiCompatibleBackendClient, createOpenAiResponsesBackendClient } from '@org/core/http';
import openAiMultistep from '../../../fixtures/openai/responses-reasoning-summary-function-calls-multistep.jsonl?raw';
import anthropicThinkingTool from '../../../fixtures/anthropic/messages-thinking-then-tool-use.SPLICED.jsonl?raw';
import anthropicServerTools from '../../../fixtures/anthropic/messages-web-fetch-error-then-tool-use.jsonl?raw';
import anthropicParallel from '../../../fixtures/anthropic/messages-parallel-tool-use-x3.jsonl?raw';
import anthropicThinkingText from '../../../fixtures/anthropic/messages-thinking-signature-text.jsonl?raw';
import deepseek from '../../../fixtures/openai-compat/deepseek-reasoner-reasoning-content-tool-call.jsonl?raw';
import ollamaParallel from '../../../fixtures/openai-compat/ollama-v1-parallel-tool-calls.sse?raw';
import chatText from '../../../fixtures/openai-compat/openai-chat-text-usage.sse?raw';
import { createDurableObjectInteractionStore } from './durable-object-interaction-store.js';
import { createKvInteractionStore } from './kv-interaction-store.js';

// The same replay as the Node adapter's, inside workerd: the provider clients translate requests
// and streams in the Workers runtime, the suspended run is saved in a Worker store, and the model
// is a fetch function that answers each request with the next recorded stream.

const lines = (text: string) => text.split('\n').filter((line) => line.trim().length > 0);
const typedSse = (text: string) => lines(text).map((line) => `event: ${(JSON.parse(line) as { type: string }).type}\ndata: ${line}\n\n`).join('');
const dataSse = (text: string) => lines(text).map((line) => `data: ${line}\n\n`).join('');
const events = (text: string) => lines(text).map((line) => JSON.parse(line) as Record<string, unknown>);
const splitResponses = (text: string) =>
  lines(text).reduce<string[]>((streams, line) => {
    if ((JSON.parse(line) as { type: string }).type === 'response.created' || streams.length === 0) streams.push('');
    streams[streams.length - 1] += `${line}\n`;
    return streams;
  }, []);

/** Content blocks of an Anthropic capture with their deltas applied. */
function anthropicBlocks(text: string): Array<Record<string, unknown>> {
  const blocks: Array<Record<string, unknown> & { json?: string }> = [];
  for (const event of events(text)) {
    const index = event.index as number;
    if (event.type === 'content_block_start') blocks[index] = { ...(event.content_block as object) };
    if (event.type !== 'content_block_delta') continue;
    const block = blocks[index] as Record<string, unknown> & { json?: string };
    const delta = event.delta as Record<string, string>;
    if (delta.type === 'thinking_delta') block.thinking = `${String(block.thinking)}${delta.thinking}`;
    if (delta.type === 'signature_delta') block.signature = delta.signature;
    if (delta.type === 'text_delta') block.text = `${String(block.text)}${delta.text}`;
    if (delta.type === 'input_json_delta') block.json = `${block.json ?? ''}${delta.partial_json}`;
  }
  return blocks.map(({ json, ...block }) => (json === undefined ? block : { ...block, input: json.trim() ? JSON.parse(json) : {} }));
}

interface Scenario {
  name: string;
  model: string;
  streams: string[];
  createBackend(fetch: typeof globalThis.fetch): BackendClient;
  functionNames: string[];
  suspending: string;
  finalText: string;
  check(requests: string[]): void;
}

const openAiStreams = splitResponses(openAiMultistep);
const [openAiReasoning, openAiCall] = events(openAiStreams[0] ?? '')
  .filter((event) => event.type === 'response.output_item.done')
  .map((event) => event.item as Record<string, unknown>);
const deepseekReasoning = events(deepseek)
  .map((chunk) => (chunk.choices as Array<{ delta: { reasoning_content?: string | null } }>)[0]?.delta.reasoning_content ?? '')
  .join('');
const MOCK_URL = 'https://provider.test/v1';

const SCENARIOS: Scenario[] = [
  {
    name: 'OpenAI Responses',
    model: 'gpt-5.1-codex-max',
    streams: openAiStreams.map(typedSse),
    createBackend: (fetch) => createOpenAiResponsesBackendClient({ apiKey: 'sk-replay-0123456789', fetch, baseUrl: MOCK_URL }),
    functionNames: ['calculator'],
    suspending: 'calculator',
    finalText: 'The final result is **570**.',
    check(requests) {
      for (const body of requests.slice(1)) {
        expect(body).toContain(JSON.stringify(openAiReasoning));
        expect(body).toContain(JSON.stringify(openAiCall));
        expect(body).toContain('{"type":"function_call_output","call_id":"call_AB6AaRZ1FYZB2RwS6A5vbdqn"');
      }
    },
  },
  {
    name: 'Anthropic Messages',
    model: 'claude-sonnet-4-5',
    streams: [anthropicThinkingTool, anthropicServerTools, anthropicParallel, anthropicThinkingText].map(typedSse),
    createBackend: (fetch) => createAnthropicBackendClient({ apiKey: 'sk-ant-replay-0123456789', fetch, baseUrl: MOCK_URL }),
    functionNames: ['json', 'display_products', 'searchDocs'],
    suspending: 'json',
    finalText: '925 ÷ 5 = 185',
    check(requests) {
      const [thinking, toolUse] = anthropicBlocks(anthropicThinkingTool);
      const server = anthropicBlocks(anthropicServerTools);
      for (const body of requests.slice(1)) expect(body).toContain(JSON.stringify([thinking, toolUse]));
      for (const body of requests.slice(2)) expect(body).toContain(`${JSON.stringify(server[1])},${JSON.stringify(server[2])}`);
    },
  },
  {
    name: 'OpenAI-compatible (Ollama)',
    model: 'qwen2.5-coder:7b',
    streams: [dataSse(deepseek), ollamaParallel, chatText],
    createBackend: (fetch) => createOpenAiCompatibleBackendClient({ baseUrl: MOCK_URL, fetch, providerName: 'Ollama' }),
    functionNames: ['weather', 'run_command'],
    suspending: 'weather',
    finalText: chatText
      .split('\n')
      .filter((line) => line.startsWith('data: {'))
      .map((line) => (JSON.parse(line.slice(6)) as { choices: Array<{ delta: { content?: string | null } }> }).choices[0]?.delta.content ?? '')
      .join(''),
    check(requests) {
      for (const body of requests.slice(1)) {
        expect(body).toContain(`"reasoning_content":${JSON.stringify(deepseekReasoning)}`);
        expect(body).toContain('{"role":"tool","tool_call_id":"call_00_ioIn7yN9p1ZOMNpDLwd4MgAF"');
      }
      expect(requests[2]).toContain('{"role":"tool","tool_call_id":"call_rk2xye1l"');
    },
  },
];

function toolGroup(scenario: Scenario, ask: boolean): FunctionGroup {
  return {
    name: 'replay',
    instruction: 'Use the tools.',
    functions: scenario.functionNames.map((name) =>
      defineFunction({
        name,
        description: `The ${name} tool.`,
        parameters: z.looseObject({}),
        async handler(args) {
          if (ask && name === scenario.suspending) {
            throw new Suspend({ type: 'waitForInput', requestId: `confirm-${name}`, prompt: { role: 'user', parts: [{ text: `Run ${name}?` }] }, inputType: 'any' });
          }
          return { tool: name, args };
        },
        async resume(response) {
          return { tool: name, confirmed: response };
        },
      }),
    ),
  };
}

async function drain(stream: AsyncIterable<AgentEvent>): Promise<AgentEvent[]> {
  const collected: AgentEvent[] = [];
  for await (const event of stream) collected.push(event);
  return collected;
}

const STORES: Array<[string, () => InteractionStore]> = [
  ['Durable Object store', () => createDurableObjectInteractionStore(env.INTERACTIONS)],
  ['KV store', () => createKvInteractionStore(env.INTERACTIONS_KV)],
];

describe('recorded provider streams through run, a Worker store and resume, in workerd', () => {
  it('runs in the Workers runtime', () => {
    expect((globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent).toBe('Cloudflare-Workers');
  });

  for (const scenario of SCENARIOS) {
    for (const [storeName, createStore] of STORES) {
      it(`${scenario.name} (${storeName}): the request after the resume carries the earlier turns' metadata byte for byte`, async () => {
        const requests: string[] = [];
        const model: typeof fetch = async (input, init) => {
          const request = new Request(input, init);
          expect(request.url.startsWith(MOCK_URL)).toBe(true);
          requests.push(await request.text());
          const stream = scenario.streams[requests.length - 1];
          return stream === undefined ? new Response('no more recorded streams', { status: 500 }) : new Response(stream, { headers: { 'content-type': 'text/event-stream' } });
        };
        const options = (ask: boolean): RunOptions => ({ mode: 'chat', model: scenario.model, defaultFunctionGroups: false, functionGroups: [toolGroup(scenario, ask)] });

        const first = await drain(run({ segments: [{ type: 'text', text: 'Work it out with the tools.' }] }, { backend: scenario.createBackend(model), store: createStore() }, options(true)));
        const suspended = first.at(-1) as { type: string; interactionId: string };
        expect(suspended.type).toBe('waitForInput');
        expect(await createStore().get(suspended.interactionId)).toBeDefined();

        const second = await drain(
          resume(suspended.interactionId, { input: { role: 'user', parts: [{ text: 'yes' }] } }, { backend: scenario.createBackend(model), store: createStore() }, options(false)),
        );
        expect(second.filter((event) => event.type === 'error')).toEqual([]);
        expect(second.at(-1)).toEqual({ type: 'complete', result: { success: true, outcomes: { role: 'model', parts: [{ text: scenario.finalText }] } } });
        expect(requests).toHaveLength(scenario.streams.length);
        scenario.check(requests);
      });
    }
  }
});
