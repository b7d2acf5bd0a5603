import { createServer, type Server } from 'node:http';
import type { AgentPorts } from '@org/core';
import { createHttpDriveOperationsClient } from '@org/core/http';
import { createFakeGoogleDrive, createMemoryInteractionStore, createScriptedBackendClient, functionCallChunk, thoughtChunk } from '@org/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { createHandler, type NodeHandlerOptions } from './create-handler.js';
import { serve, type RunningServer } from './node-listener.js';

const servers: Array<RunningServer | Server> = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    if ('url' in server) await server.close();
    else {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }
});

async function listen(options: NodeHandlerOptions): Promise<string> {
  const server = createServer(createHandler(options));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

async function runMemory(url: string, accessToken?: string): Promise<Array<Record<string, Record<string, unknown>>>> {
  const response = await fetch(`${url}/v1beta1/streamRunAgent?alt=sse`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(accessToken ? { authorization: `Bearer ${accessToken}` } : {}) },
    body: JSON.stringify({
      start: {
        segments: [{ textSegment: { text: 'Remember the score' } }, { toolSegment: { path: 'function-group/use-memory', title: 'Use Memory' } }],
        graph: { url: 'drive:/node-graph', title: 'Node graph' },
      },
    }),
  });
  return (await response.text())
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice(6)));
}

function memoryPorts(): () => AgentPorts {
  const store = createMemoryInteractionStore();
  return () => ({
    store,
    backend: createScriptedBackendClient([
      [functionCallChunk('memory_create_sheet', { name: 'Scores', columns: ['player', 'score'], status_update: '' })],
      [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Saved' })],
    ]),
  });
}

describe('createHandler: Google Drive from the caller token', () => {
  it('gives a run with a token a Drive client bound to it, at the configured base URLs', async () => {
    const fake = createFakeGoogleDrive({ accessToken: 'ya29.user' });
    const google = await serve({ handler: (request) => fake.fetch(request) });
    servers.push(google);
    const url = await listen({ createPorts: memoryPorts(), drive: { baseUrls: fake.baseUrls(google.url) } });

    const events = await runMemory(url, 'ya29.user');
    expect(events.at(-1)).toMatchObject({ complete: { result: { success: true } } });
    expect(fake.files()).toEqual([expect.objectContaining({ name: 'Memory for Node graph', appProperties: { 'google-drive-connector': 'sheetnode-graphnode-graph' } })]);
    expect(fake.sheets(fake.files()[0]?.id as string)?.map((sheet) => sheet.title)).toEqual(['intro', '__chat_log__', 'Scores']);
    expect(fake.requests.every((request) => request.status < 400)).toBe(true);

    // No token, no Drive: the run says why memory cannot work.
    const anonymous = await runMemory(url);
    expect(anonymous.at(-1)?.error).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('no Drive client') });
  });

  it('leaves Drive out with drive: false, and keeps a Drive client the ports bring', async () => {
    const off = await listen({ createPorts: memoryPorts(), drive: false });
    expect((await runMemory(off, 'ya29.user')).at(-1)?.error).toMatchObject({ code: 'BAD_REQUEST' });

    const fake = createFakeGoogleDrive();
    const google = await serve({ handler: (request) => fake.fetch(request) });
    servers.push(google);
    const own = createHttpDriveOperationsClient({ fetch, getAccessToken: () => 'service-token', baseUrls: fake.baseUrls(google.url) });
    const ports = memoryPorts();
    const url = await listen({ createPorts: () => ({ ...ports(), drive: own }), drive: { baseUrls: { drive: 'http://127.0.0.1:9/unused' } } });
    expect((await runMemory(url, 'ya29.user')).at(-1)).toMatchObject({ complete: { result: { success: true } } });
    expect(fake.files()).toHaveLength(1);
  });
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
    const base = await listen({ createPorts: () => ({ backend, store }), uiMessageStream: { path: '/chat' } });
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

describe('createHandler: failures', () => {
  it('answers a request whose ports cannot be built with a coded error naming no file and no key: an SSE error event, or 500 JSON', async () => {
    const url = await listen({
      createPorts: () => {
        throw new Error("ENOENT: no such file or directory, open '/srv/agent/keys.json' (key=AIzaSyA-1234567890abcdefghijklmnopqrstu)");
      },
    });
    const post = (path: string, body: unknown) =>
      fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const start = { start: { segments: [{ textSegment: { text: 'Hi' } }] } };

    const sse = await post('/v1beta1/streamRunAgent?alt=sse', start);
    expect(sse.status).toBe(200);
    const text = await sse.text();
    expect(chunksOf(text)).toEqual([{ error: { code: 'INTERNAL', message: expect.any(String) } }]);
    const json = await post('/v1beta1/streamRunAgent', start);
    expect(json.status).toBe(500);
    const answer = await json.text();
    expect(JSON.parse(answer)).toMatchObject({ error: { code: 'INTERNAL', status: 500 } });
    const session = await post('/v1beta1/sessions/new', start);
    expect(session.status).toBe(500);
    const sessionAnswer = await session.text();
    for (const body of [text, answer, sessionAnswer]) {
      expect(body).not.toMatch(/\/srv\/agent|AIzaSy|\bat [^ ]+ \(/);
    }
  });
});
