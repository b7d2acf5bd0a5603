import { describe, expect, it } from 'vitest';
import { createGeminiBackendClient } from '../http/index.js';
import type { AgentEvent } from '../protocol/events.js';
import { run } from '../run/index.js';
import { createMemoryInteractionStore, createScriptedGemini, functionCallChunk, thoughtChunk } from './index.js';

describe('createScriptedGemini', () => {
  it('plays its turns to the Gemini client over the wire format, records the requests, and says when the script runs out', async () => {
    const gemini = createScriptedGemini([
      [thoughtChunk('Writing'), functionCallChunk('system_write_file', { file_name: 'a.md', content: 'A' })],
      [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Done' })],
    ]);
    const backend = createGeminiBackendClient({
      apiKey: 'k',
      baseUrl: 'http://gemini.test/v1beta',
      fetch: (input, init) => gemini.fetch(new Request(input, init)),
      retry: { maxAttempts: 1 },
    });
    const events: AgentEvent[] = [];
    for await (const event of run({ segments: [{ type: 'text', text: 'Write' }] }, { backend, store: createMemoryInteractionStore() })) events.push(event);
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    expect(events.filter((event) => event.type === 'thought')).toEqual([{ type: 'thought', text: 'Writing' }]);
    expect(gemini.requests.map((request) => request.index)).toEqual([0, 1]);
    expect(gemini.requests[1]?.body.contents.at(-1)?.parts[0]?.functionResponse).toMatchObject({ name: 'system_write_file', response: { file_path: '/mnt/a.md' } });

    const over = await gemini.fetch(new Request('http://gemini.test/v1beta/models/m:streamGenerateContent?alt=sse', { method: 'POST', body: '{"contents":[]}' }));
    expect(over.status).toBe(500);
    expect(await over.json()).toMatchObject({ error: { message: 'The scripted Gemini has no turn 3' } });
    expect((await gemini.fetch(new Request('http://gemini.test/v1beta/models'))).status).toBe(404);
  });
});
