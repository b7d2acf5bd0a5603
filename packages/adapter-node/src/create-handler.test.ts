import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryInteractionStore, createScriptedBackendClient, functionCallChunk, thoughtChunk } from '@org/core/testing';
import { createHandler } from './create-handler.js';

let server: Server | undefined;
afterEach(async () => {
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = undefined;
});

function chunksOf(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: {'))
    .map((line) => JSON.parse(line.slice(6)) as Record<string, unknown>);
}

describe('createHandler with uiMessageStream', () => {
  it('serves the AI SDK chat endpoint next to the agent protocol over real HTTP: a run, its question, and the answer as a tool output', async () => {
    const store = createMemoryInteractionStore();
    const backend = createScriptedBackendClient((request) => {
      const answer = request.body.contents.at(-1)?.parts[0]?.functionResponse?.response?.user_input;
      return typeof answer === 'string'
        ? [functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${answer}` })]
        : [thoughtChunk('Asking'), functionCallChunk('chat_request_user_input', { user_message: 'Name?' })];
    });
    server = createServer(createHandler({ createPorts: () => ({ backend, store }), uiMessageStream: { path: '/chat' } }));
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const post = (messages: unknown[]) =>
      fetch(`${base}/chat`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer t' }, body: JSON.stringify({ id: 'c1', messages }) });

    const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Greet me' }] };
    const first = await post([user]);
    expect(first.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    const chunks = chunksOf(await first.text());
    const asked = chunks.find((chunk) => chunk.type === 'tool-input-available' && chunk.toolName === 'chat_request_user_input');
    expect(chunks.at(-1)).toEqual({ type: 'finish', finishReason: 'tool-calls' });
    const messageId = (chunks[0] as { messageId: string }).messageId;

    const assistant = {
      id: messageId,
      role: 'assistant',
      parts: [{ type: 'tool-chat_request_user_input', toolCallId: asked?.toolCallId, state: 'output-available', input: asked?.input, output: { input: { parts: [{ text: 'Ada' }] } } }],
    };
    const second = chunksOf(await (await post([user, assistant])).text());
    expect(second).toContainEqual({ type: 'text-delta', id: expect.any(String), delta: 'Hello Ada' });
    expect(second.at(-1)).toEqual({ type: 'finish', finishReason: 'stop' });

    // The agent protocol is still served by the same listener.
    const legacy = await fetch(`${base}/v1beta1/streamRunAgent`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(legacy.status).toBe(400);
  });
});
