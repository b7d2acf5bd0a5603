import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseSseStream } from '@org/core';
import { createAgentHandler } from '@org/core/http';
import { createScriptedBackendClient, functionCallChunk, thoughtChunk } from '@org/core/testing';
import { createFileEventBus, type FileEventBus } from './file-event-bus.js';
import { createFileInteractionStore } from './file-interaction-store.js';
import { createFileSessionLog } from './file-session-log.js';

const folders: string[] = [];
const buses: FileEventBus[] = [];
afterAll(async () => {
  await Promise.all(buses.map((bus) => bus.close()));
  await Promise.all(folders.map((folder) => rm(folder, { recursive: true, force: true })));
});

/** A model that asks for a name, then greets, pausing between chunks. */
const greeter = () =>
  createScriptedBackendClient(
    (request) => {
      const answer = request.body.contents.at(-1)?.parts[0]?.functionResponse?.response?.user_input;
      return typeof answer === 'string'
        ? [thoughtChunk('Greeting'), functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${answer}` })]
        : [thoughtChunk('Asking'), thoughtChunk('Still asking'), functionCallChunk('chat_request_user_input', { user_message: 'Name?' })];
    },
    { chunkDelayMs: 20 },
  );

/** One instance of a deployment: its own log, bus and store objects on the shared folder. */
function instance(folder: string): (request: Request) => Promise<Response> {
  const bus = createFileEventBus({ directory: path.join(folder, 'bus') });
  buses.push(bus);
  const store = createFileInteractionStore({ directory: path.join(folder, 'interactions') });
  return createAgentHandler({
    createPorts: () => ({ backend: greeter(), store }),
    sessions: { log: createFileSessionLog({ directory: path.join(folder, 'sessions') }), bus },
  });
}

const BASE = 'http://agent.test/v1beta1/sessions/';
const post = (route: string, body: object) =>
  new Request(`${BASE}${route}`, { method: 'POST', body: JSON.stringify({ ...body, accessToken: 'tok' }), headers: { 'content-type': 'application/json' } });

async function eventsOf(response: Response): Promise<Array<{ id: number; data: string }>> {
  const events: Array<{ id: number; data: string }> = [];
  for await (const message of parseSseStream(response.body as ReadableStream<Uint8Array>)) {
    if (message.event === 'event') events.push({ id: Number(message.id), data: message.data });
  }
  return events;
}
const typeOf = (data: string) => Object.keys(JSON.parse(data) as object)[0];

describe('sessions on a shared folder', () => {
  it('are started on one instance, followed live and resumed on another, every event once and in order', async () => {
    const folder = await mkdtemp(path.join(os.tmpdir(), 'org-file-sessions-'));
    folders.push(folder);
    const [a, b] = [instance(folder), instance(folder)];

    const created = await a(post('new', { segments: [{ textSegment: { text: 'Greet me' } }] }));
    const { sessionId } = (await created.json()) as { sessionId: string };
    // B follows the segment A runs: its events reach B through the folder while they happen.
    const first = await eventsOf(await b(new Request(`${BASE}${sessionId}?alt=sse`)));
    expect(typeOf(first.at(-1)?.data ?? '{}')).toBe('waitForInput');

    expect(await (await b(post(`${sessionId}:resume`, { input: { role: 'user', parts: [{ text: 'Ada' }] } }))).json()).toEqual({ ok: true });
    const cursor = first.at(-1)?.id as number;
    const second = await eventsOf(await a(new Request(`${BASE}${sessionId}?alt=sse&after=${cursor}`)));
    expect(second.map((event) => typeOf(event.data)).slice(-2)).toEqual(['finish', 'complete']);
    expect(JSON.parse(second.at(-1)?.data ?? '{}').complete.result.outcomes.parts[0].text).toBe('Hello Ada');

    const ids = [...first, ...second].map((event) => event.id);
    expect(ids).toEqual(Array.from({ length: ids.length }, (_, index) => index));
    const status = (await (await a(new Request(`${BASE}${sessionId}/status`))).json()) as Record<string, unknown>;
    expect(status).toEqual({ sessionId, status: 'completed', eventCount: ids.length });
  }, 30_000);
});
