import { describe, expect, it } from 'vitest';
import type { AgentPorts } from '../ports/index.js';
import { parseSseStream } from '../sse/index.js';
import {
  createMemoryInteractionStore,
  createScriptedBackendClient,
  functionCallChunk,
  thoughtChunk,
} from '../testing/index.js';
import { createAgentHandler } from './agent-handler.js';

const URL_BASE = 'http://agent.test/v1beta1/streamRunAgent?alt=sse';

async function wireEvents(response: Response): Promise<Array<Record<string, Record<string, unknown>>>> {
  const events = [];
  for await (const event of parseSseStream(response.body as ReadableStream<Uint8Array>)) events.push(JSON.parse(event.data));
  return events;
}

function post(body: string, headers: Record<string, string> = {}, url = URL_BASE): Request {
  return new Request(url, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
}

function setup() {
  const store = createMemoryInteractionStore();
  const backend = createScriptedBackendClient((request) => {
    const answer = request.body.contents.at(-1)?.parts[0]?.functionResponse?.response?.user_input;
    return typeof answer === 'string'
      ? [functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${answer}` })]
      : [thoughtChunk('Asking'), functionCallChunk('chat_request_user_input', { user_message: 'Name?' })];
  });
  const tokens: Array<string | undefined> = [];
  const handler = createAgentHandler({
    createPorts: ({ accessToken }): AgentPorts => {
      tokens.push(accessToken);
      return { backend, store };
    },
  });
  return { handler, tokens, backend };
}

describe('createAgentHandler', () => {
  it('streams a run as SSE, suspends, and resumes from a second request', async () => {
    const { handler, tokens } = setup();
    const first = await handler(post(JSON.stringify({ start: { segments: [{ textSegment: { text: 'Greet me' } }] }, accessToken: 'tok' })));
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = await wireEvents(first);
    expect(events.map((event) => Object.keys(event)[0])).toEqual(['start', 'sendRequest', 'thought', 'functionCall', 'waitForInput']);
    const interactionId = events.at(-1)?.waitForInput?.interactionId as string;
    expect(typeof interactionId).toBe('string');

    const resumed = await handler(
      post(JSON.stringify({ resume: { interactionId, response: { input: { parts: [{ text: 'Ada' }] } } } }), { authorization: 'Bearer tok' }),
    );
    const tail = await wireEvents(resumed);
    expect(tail.at(-1)).toMatchObject({ complete: { result: { success: true, outcomes: { parts: [{ text: 'Hello Ada' }] } } } });
    expect(tokens).toEqual(['tok', 'tok']);

    const reused = await handler(post(JSON.stringify({ resume: { interactionId, response: {} } }), { authorization: 'Bearer tok' }));
    expect(await wireEvents(reused)).toEqual([{ error: { message: `Unknown interaction ID: ${interactionId}`, code: 'INTERACTION_NOT_FOUND' } }]);
  });

  it('refuses a resume by another token', async () => {
    const { handler } = setup();
    const events = await wireEvents(await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }], accessToken: 'alice' }))));
    const interactionId = events.at(-1)?.waitForInput?.interactionId as string;
    const stolen = await wireEvents(await handler(post(JSON.stringify({ interactionId, response: {}, accessToken: 'mallory' }))));
    expect(stolen).toEqual([{ error: { message: `Interaction ${interactionId} belongs to another user`, code: 'FORBIDDEN' } }]);
  });

  it('answers a malformed body with 400 JSON naming the field', async () => {
    const { handler } = setup();
    const notJson = await handler(post('{"start":'));
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toMatchObject({ error: { code: 'BAD_REQUEST', status: 400, message: expect.stringMatching(/^\(body\): not valid JSON/) } });
    const badSegment = await handler(post(JSON.stringify({ start: { segments: [{ bogus: {} }] } })));
    expect(badSegment.status).toBe(400);
    expect(await badSegment.json()).toMatchObject({ error: { message: 'start.segments[0]: unknown segment kind "bogus"' } });
  });

  it('refuses an oversized body with 413, unknown paths with 404 and other methods with 405', async () => {
    const store = createMemoryInteractionStore();
    const handler = createAgentHandler({ createPorts: () => ({ backend: createScriptedBackendClient([]), store }), maxBodyBytes: 100 });
    const big = await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x'.repeat(500) }] })));
    expect(big.status).toBe(413);
    expect((await big.json()).error.code).toBe('PAYLOAD_TOO_LARGE');
    expect((await handler(post('{}', {}, 'http://agent.test/v1beta1/other'))).status).toBe(404);
    expect((await handler(new Request(URL_BASE))).status).toBe(405);
  });

  it('serves the /api/agent/run alias', async () => {
    const { handler } = setup();
    const response = await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }] }), {}, 'http://agent.test/api/agent/run'));
    expect(response.status).toBe(200);
    expect((await wireEvents(response)).at(-1)).toHaveProperty('waitForInput');
  });

  it('cancels the run, and its model request, when the client goes away', async () => {
    const store = createMemoryInteractionStore();
    const backend = createScriptedBackendClient([[thoughtChunk('a'), thoughtChunk('b'), thoughtChunk('c'), thoughtChunk('d')]], {
      chunkDelayMs: 40,
    });
    const handler = createAgentHandler({ createPorts: () => ({ backend, store }) });
    const response = await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'slow' }] })));
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    await reader.cancel();
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(backend.abortedCount).toBe(1);
  });

  it('sends keep-alive comments while the run is quiet', async () => {
    const store = createMemoryInteractionStore();
    const backend = createScriptedBackendClient([[thoughtChunk('a')], []], { chunkDelayMs: 120 });
    const handler = createAgentHandler({ createPorts: () => ({ backend, store }), keepAliveMs: 30 });
    const response = await handler(post(JSON.stringify({ segments: [{ type: 'text', text: 'x' }] })));
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!text.includes('"thought"')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    await reader.cancel();
    expect(text).toContain(': keep-alive\n\n');
  });
});
