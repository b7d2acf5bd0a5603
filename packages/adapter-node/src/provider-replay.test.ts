import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { defineFunction, resume, run, Suspend, type AgentEvent, type AgentPorts, type BackendClient, type FunctionGroup, type RunOptions } from '@org/core';
import { z } from 'zod';
import { createAnthropicBackendClient, createOpenAiCompatibleBackendClient, createOpenAiResponsesBackendClient } from '@org/core/http';
import { createFileInteractionStore } from './file-interaction-store.js';
import { createNodeFetch, type NodeFetch } from './node-fetch.js';
import { serve, type RunningServer } from './node-listener.js';

// Each provider's recorded streams are replayed by a loopback server, one stream per model request:
// a run with tool turns, a suspend saved in a file store, a resume by a fresh process-like set of
// ports, and a final answer. The requests the server received show what went back to the model.

const fixture = (name: string) => readFileSync(new URL(`../../../fixtures/${name}`, import.meta.url), 'utf8');
const lines = (text: string) => text.split('\n').filter((line) => line.trim().length > 0);
/** A capture whose source stripped the `event:` lines, framed again as the provider sent it. */
const typedSse = (text: string) => lines(text).map((line) => `event: ${(JSON.parse(line) as { type: string }).type}\ndata: ${line}\n\n`).join('');
const dataSse = (text: string) => lines(text).map((line) => `data: ${line}\n\n`).join('');
const events = (text: string) => lines(text).map((line) => JSON.parse(line) as Record<string, unknown>);
/** Splits a capture of several responses at each `response.created`. */
const splitResponses = (text: string) =>
  lines(text).reduce<string[]>((streams, line) => {
    if ((JSON.parse(line) as { type: string }).type === 'response.created' || streams.length === 0) streams.push('');
    streams[streams.length - 1] += `${line}\n`;
    return streams;
  }, []);

interface Scenario {
  name: string;
  model: string;
  streams: string[];
  createBackend(fetch: typeof globalThis.fetch, baseUrl: string): BackendClient;
  /** Functions the recorded model calls; the first call of `suspending` waits for the user. */
  functionNames: string[];
  suspending: string;
  thoughts: string[];
  finalText: string;
  /** What the request sent after the resume (and the ones after it) must carry, byte for byte. */
  check(requests: string[]): void;
}

const openAiStreams = splitResponses(fixture('openai/responses-reasoning-summary-function-calls-multistep.jsonl'));
const openAiItems = events(openAiStreams[0] ?? '').filter((event) => event.type === 'response.output_item.done').map((event) => event.item as Record<string, unknown>);

const anthropicThinkingTool = fixture('anthropic/messages-thinking-then-tool-use.SPLICED.jsonl');
const anthropicServerTools = fixture('anthropic/messages-web-fetch-error-then-tool-use.jsonl');
/** The content blocks of a capture, with their deltas applied. */
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

const deepseek = fixture('openai-compat/deepseek-reasoner-reasoning-content-tool-call.jsonl');
const deepseekReasoning = events(deepseek)
  .map((chunk) => (chunk.choices as Array<{ delta: { reasoning_content?: string | null } }>)[0]?.delta.reasoning_content ?? '')
  .join('');
const chatText = fixture('openai-compat/openai-chat-text-usage.sse');
const chatAnswer = chatText
  .split('\n')
  .filter((line) => line.startsWith('data: {'))
  .map((line) => (JSON.parse(line.slice(6)) as { choices: Array<{ delta: { content?: string | null } }> }).choices[0]?.delta.content ?? '')
  .join('');

const SCENARIOS: Scenario[] = [
  {
    name: 'OpenAI Responses',
    model: 'gpt-5.1-codex-max',
    streams: openAiStreams.map(typedSse),
    createBackend: (fetch, baseUrl) => createOpenAiResponsesBackendClient({ apiKey: 'sk-replay-0123456789', fetch, baseUrl }),
    functionNames: ['calculator'],
    suspending: 'calculator',
    thoughts: ["**Calculating step-by-step using calculator**\n\nI'll compute 12 plus 7, then multiply the result by 3, and finally multiply that by 10, reporting the final product."],
    finalText: 'The final result is **570**.',
    check(requests) {
      const [reasoning, call] = openAiItems;
      expect(String((reasoning as { encrypted_content: string }).encrypted_content)).toMatch(/^gAAAAA/);
      for (const body of requests.slice(1)) {
        expect(body).toContain(JSON.stringify(reasoning));
        expect(body).toContain(JSON.stringify(call));
        expect(body).toContain('{"type":"function_call_output","call_id":"call_AB6AaRZ1FYZB2RwS6A5vbdqn"');
      }
      expect(requests[3]).toContain('{"type":"function_call_output","call_id":"call_Zl5vIMnD7dVAjgU6FkhmiCZh"');
    },
  },
  {
    name: 'Anthropic Messages',
    model: 'claude-sonnet-4-5',
    streams: [anthropicThinkingTool, anthropicServerTools, fixture('anthropic/messages-parallel-tool-use-x3.jsonl'), fixture('anthropic/messages-thinking-signature-text.jsonl')].map(typedSse),
    createBackend: (fetch, baseUrl) => createAnthropicBackendClient({ apiKey: 'sk-ant-replay-0123456789', fetch, baseUrl }),
    functionNames: ['json', 'display_products', 'searchDocs'],
    suspending: 'json',
    thoughts: ['The previous result was 925. Now I need to divide that by 5.\n\n925 ÷ 5 = 185', 'The previous result was 925. Now I need to divide that by 5.\n\n925 ÷ 5 = 185'],
    finalText: '925 ÷ 5 = 185',
    check(requests) {
      const [thinking, toolUse] = anthropicBlocks(anthropicThinkingTool);
      const server = anthropicBlocks(anthropicServerTools);
      for (const body of requests.slice(1)) {
        expect(body).toContain(JSON.stringify([thinking, toolUse]));
        expect(body).toContain('{"type":"tool_result","tool_use_id":"toolu_01KFbKqPYSuAKujiL6mTfzYA"');
      }
      for (const body of requests.slice(2)) expect(body).toContain(`${JSON.stringify(server[1])},${JSON.stringify(server[2])}`);
      const last = JSON.parse(requests[3] ?? '{}') as { messages: Array<{ role: string; content: Array<{ type: string; tool_use_id?: string }> }> };
      expect(last.messages.at(-1)?.content.map((block) => block.tool_use_id)).toEqual([
        'toolu_01LtEf4h1QW7KCKLsYMuhTNB',
        'toolu_016tfZE7otAFSBjhc67wu189',
        'toolu_01XkU35z8BVWqqc9tijDuLrA',
      ]);
    },
  },
  {
    name: 'OpenAI-compatible (Ollama)',
    model: 'qwen2.5-coder:7b',
    streams: [dataSse(deepseek), fixture('openai-compat/ollama-v1-parallel-tool-calls.sse'), chatText],
    createBackend: (fetch, baseUrl) => createOpenAiCompatibleBackendClient({ baseUrl, fetch, providerName: 'Ollama' }),
    functionNames: ['weather', 'run_command'],
    suspending: 'weather',
    thoughts: [deepseekReasoning],
    finalText: chatAnswer,
    check(requests) {
      for (const body of requests.slice(1)) {
        const messages = (JSON.parse(body) as { messages: Array<Record<string, unknown>> }).messages;
        const assistant = messages.find((message) => message.role === 'assistant');
        expect(assistant?.reasoning_content).toBe(deepseekReasoning);
        expect(body).toContain(`"reasoning_content":${JSON.stringify(deepseekReasoning)}`);
        expect(body).toContain('"tool_calls":[{"id":"call_00_ioIn7yN9p1ZOMNpDLwd4MgAF"');
        expect(body).toContain('{"role":"tool","tool_call_id":"call_00_ioIn7yN9p1ZOMNpDLwd4MgAF"');
      }
      const tools = (JSON.parse(requests[2] ?? '{}') as { messages: Array<{ role: string; tool_call_id?: string }> }).messages.filter((message) => message.role === 'tool');
      expect(tools.map((message) => message.tool_call_id)).toEqual(['call_00_ioIn7yN9p1ZOMNpDLwd4MgAF', 'call_wteop8bt', 'call_rk2xye1l']);
    },
  },
];

/** The functions the recorded models call; with `ask`, `suspending` asks the user before it answers. */
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

let cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

describe('recorded provider streams through run, a file store and resume', () => {
  for (const scenario of SCENARIOS) {
    it(`${scenario.name}: two tool turns, a suspend and a resume keep the provider's metadata byte for byte`, async () => {
      const requests: string[] = [];
      const mock: RunningServer = await serve({
        handler: async (request) => {
          requests.push(await request.text());
          const stream = scenario.streams[requests.length - 1];
          if (stream === undefined) return new Response('no more recorded streams', { status: 500 });
          return new Response(stream, { headers: { 'content-type': 'text/event-stream' } });
        },
      });
      cleanup.push(() => mock.close());
      const directory = await mkdtemp(path.join(os.tmpdir(), 'org-provider-replay-'));
      cleanup.push(() => rm(directory, { recursive: true, force: true }));
      const options = (ask: boolean): RunOptions => ({ mode: 'chat', model: scenario.model, defaultFunctionGroups: false, functionGroups: [toolGroup(scenario, ask)] });
      // Each half gets its own fetch, client and store, as two processes sharing only the folder would.
      const portsOf = (): AgentPorts & { fetch: NodeFetch } => {
        const fetch = createNodeFetch();
        cleanup.push(() => fetch.close());
        return { fetch, backend: scenario.createBackend(fetch, `${mock.url}/v1`), store: createFileInteractionStore({ directory }) };
      };

      const first = await drain(run({ segments: [{ type: 'text', text: 'Work it out with the tools.' }] }, portsOf(), options(true)));
      const suspended = first.at(-1);
      expect(suspended?.type).toBe('waitForInput');
      const interactionId = (suspended as { interactionId: string }).interactionId;
      expect(await createFileInteractionStore({ directory }).get(interactionId)).toBeDefined();
      expect(first.find((event) => event.type === 'functionCall')).toMatchObject({ name: scenario.suspending });

      const second = await drain(resume(interactionId, { input: { role: 'user', parts: [{ text: 'yes' }] } }, portsOf(), options(false)));
      expect(second.filter((event) => event.type === 'error')).toEqual([]);
      expect(second.slice(-2)).toEqual([{ type: 'finish' }, { type: 'complete', result: { success: true, outcomes: { role: 'model', parts: [{ text: scenario.finalText }] } } }]);
      expect([...first, ...second].filter((event) => event.type === 'thought').map((event) => (event as { text: string }).text)).toEqual(scenario.thoughts);
      expect([...first, ...second].filter((event) => event.type === 'sendRequest')).toHaveLength(scenario.streams.length);

      expect(requests).toHaveLength(scenario.streams.length);
      scenario.check(requests);
    });
  }
});
