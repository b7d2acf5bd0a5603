import { createServer } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgentHandler } from '@org/core/http';
import { createMemoryInteractionStore, createScriptedBackendClient, functionCallChunk, thoughtChunk } from '@org/core/testing';
import { createHandler } from './create-handler.js';
import { serve, type RunningServer } from './node-listener.js';

let server: RunningServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function readEvents(response: Response): Promise<Array<Record<string, Record<string, unknown>>>> {
  const text = await response.text();
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice(6)));
}

describe('adapter-node', () => {
  it('serves a run over real HTTP, and a resume from a second server sharing the store', async () => {
    const store = createMemoryInteractionStore();
    const backend = createScriptedBackendClient((request) => {
      const answer = request.body.contents.at(-1)?.parts[0]?.functionResponse?.response?.user_input;
      return typeof answer === 'string'
        ? [functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${answer}` })]
        : [thoughtChunk('Asking'), functionCallChunk('chat_request_user_input', { user_message: 'Name?' })];
    });
    const createPorts = () => ({ backend, store });
    server = await serve({ handler: createAgentHandler({ createPorts }) });
    const other = createServer(createHandler({ createPorts }));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const otherPort = (other.address() as { port: number }).port;
    try {
      const first = await fetch(`${server.url}/v1beta1/streamRunAgent?alt=sse`, {
        method: 'POST',
        headers: { authorization: 'Bearer t' },
        body: JSON.stringify({ start: { segments: [{ textSegment: { text: 'Greet me' } }] } }),
      });
      expect(first.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const events = await readEvents(first);
      const interactionId = events.at(-1)?.waitForInput?.interactionId as string;
      expect(interactionId).toBeTruthy();
      const second = await fetch(`http://127.0.0.1:${otherPort}/api/agent/run`, {
        method: 'POST',
        headers: { authorization: 'Bearer t' },
        body: JSON.stringify({ resume: { interactionId, response: { input: { parts: [{ text: 'Ada' }] } } } }),
      });
      expect((await readEvents(second)).at(-1)).toMatchObject({ complete: { result: { success: true } } });
    } finally {
      other.closeAllConnections();
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it('answers a malformed body with 400 JSON', async () => {
    server = await serve({
      handler: createAgentHandler({ createPorts: () => ({ backend: createScriptedBackendClient([]), store: createMemoryInteractionStore() }) }),
    });
    const response = await fetch(`${server.url}/v1beta1/streamRunAgent`, { method: 'POST', body: '{"segments": 5}' });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { code: 'BAD_REQUEST', message: expect.stringMatching(/^segments: /) } });
  });

  it('streams events before the run ends and cancels the model request when the client disconnects', async () => {
    const backend = createScriptedBackendClient([[thoughtChunk('a'), thoughtChunk('b'), thoughtChunk('c'), thoughtChunk('d'), thoughtChunk('e')]], {
      chunkDelayMs: 60,
    });
    server = await serve({ handler: createAgentHandler({ createPorts: () => ({ backend, store: createMemoryInteractionStore() }) }) });
    const controller = new AbortController();
    const response = await fetch(`${server.url}/v1beta1/streamRunAgent`, {
      method: 'POST',
      body: JSON.stringify({ segments: [{ type: 'text', text: 'slow' }] }),
      signal: controller.signal,
    });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    while (!text.includes('"thought"')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).toContain('"thought":{"text":"a"}');
    controller.abort();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(backend.abortedCount).toBe(1);
  });
});
