import { describe, expect, it } from 'vitest';
import { createGeminiBackendClient } from '../http/gemini-backend-client.js';
import { createHttpDriveOperationsClient } from '../http/http-drive-operations-client.js';
import { createFakeGoogleDrive } from './fake-google-drive.js';
import { createUpstreamBackendClient } from '../http/upstream-backend-client.js';
import type { AgentEvent } from '../protocol/events.js';
import { resume, run } from '../run/index.js';
import { createMemoryInteractionStore } from './memory-interaction-store.js';
import { createSimulatedGemini } from './simulated-gemini.js';

async function collect(events: AsyncIterable<AgentEvent>): Promise<AgentEvent[]> {
  const all: AgentEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

function setup() {
  const gemini = createSimulatedGemini();
  const backend = createGeminiBackendClient({
    apiKey: 'simulated',
    baseUrl: 'http://simulated.test/v1beta',
    fetch: (input, init) => gemini.fetch(new Request(input, init)),
  });
  return { gemini, ports: { backend, store: createMemoryInteractionStore() } };
}

describe('simulated Gemini', () => {
  it('thinks, writes a file, asks for a name, and greets with it through the real client path', async () => {
    const { gemini, ports } = setup();
    const first = await collect(run({ segments: [{ type: 'text', text: 'Ask me my name and greet me.' }] }, ports));
    expect(first.filter((event) => event.type === 'functionCall').map((event) => (event as { name: string }).name)).toEqual([
      'system_write_file',
      'chat_request_user_input',
    ]);
    expect(first.some((event) => event.type === 'thought')).toBe(true);
    const suspend = first.at(-1);
    if (suspend?.type !== 'waitForInput') throw new Error(`expected waitForInput, got ${suspend?.type}`);
    const events = await collect(resume(suspend.interactionId as string, { input: { parts: [{ text: 'Ada' }] } }, ports));
    const complete = events.at(-1);
    if (complete?.type !== 'complete') throw new Error(`expected complete, got ${JSON.stringify(complete)}`);
    expect(JSON.stringify(complete.result.outcomes)).toContain('Hello, Ada!');
    expect(complete.result.intermediate?.map((file) => file.path)).toEqual(['/mnt/plan.md']);
    // Every replayed call still carried its signature, or the simulator would have answered 400.
    expect(gemini.requests).toHaveLength(3);
  });

  it('offers choices when asked to choose', async () => {
    const { ports } = setup();
    const first = await collect(run({ segments: [{ type: 'text', text: 'Let me pick a time of day.' }] }, ports));
    const suspend = first.at(-1);
    if (suspend?.type !== 'waitForChoice') throw new Error(`expected waitForChoice, got ${suspend?.type}`);
    const events = await collect(resume(suspend.interactionId as string, { selected: { ids: ['sunset'] } }, ports));
    expect(JSON.stringify(events.at(-1))).toContain('You chose sunset.');
  });

  it('answers 400 with the real error text when a history lost a signature', async () => {
    const gemini = createSimulatedGemini();
    const response = await gemini.fetch(
      new Request('http://simulated.test/v1beta/models/m:streamGenerateContent?alt=sse', {
        method: 'POST',
        body: JSON.stringify({
          contents: [
            { role: 'user', parts: [{ text: 'x' }] },
            { role: 'model', parts: [{ functionCall: { name: 'system_write_file', args: {} } }] },
            { role: 'user', parts: [{ functionResponse: { name: 'system_write_file', response: {} } }] },
          ],
        }),
      }),
    );
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { message: string } }).error.message).toMatch(
      /^Function call is missing a thought_signature in functionCall parts\./,
    );
  });

  it('draws a picture through executeStep and computes the objective\'s arithmetic with a code-execution turn', async () => {
    const gemini = createSimulatedGemini();
    const fetchSimulated = (input: RequestInfo | URL, init?: RequestInit) => gemini.fetch(new Request(input, init));
    const backend = createGeminiBackendClient({
      apiKey: 'simulated',
      baseUrl: 'http://simulated.test/v1beta',
      fetch: fetchSimulated,
      upstream: createUpstreamBackendClient({ baseUrl: 'http://simulated.test', fetch: fetchSimulated, accessToken: 'token' }),
    });
    const events = await collect(
      run({ segments: [{ type: 'text', text: 'Draw a picture of a harbour and compute (12 + 30) * 2 ** 3 with code.' }] }, {
        backend,
        store: createMemoryInteractionStore(),
      }),
    );
    const calls = events.filter((event) => event.type === 'functionCall').map((event) => (event as { name: string }).name);
    expect(calls).toEqual(['system_write_file', 'generate_images', 'generate_and_execute_code', 'system_objective_fulfilled']);
    const updates = events.flatMap((event) => (event.type === 'functionCallUpdate' && event.status ? [event.status] : []));
    expect(updates).toContain('Running code:\n# Draw a picture of a harbour and compute (12 + 30) * 2 ** 3 with code.\nresult = (12 + 30) * 2 ** 3\nprint(result)');
    expect(updates).toContain('Code output:\n336\n');
    const complete = events.at(-1);
    expect(complete?.type).toBe('complete');
    const result = (complete as { result: { outcomes: { parts: Array<{ text?: string; inlineData?: { mimeType: string } }> }; intermediate: Array<{ path: string }> } }).result;
    expect(result.outcomes.parts.map((part) => part.text ?? part.inlineData?.mimeType).join('')).toContain('The computation says: The result is 336.');
    expect(result.intermediate.map((file) => file.path)).toEqual(['/mnt/plan.md', '/mnt/picture.png']);
  });
});

describe('simulated Gemini memory', () => {
  it('keeps only the latest requests, and none when told', async () => {
    const post = (gemini: ReturnType<typeof createSimulatedGemini>) =>
      gemini.fetch(
        new Request('http://sim/v1beta/models/m:streamGenerateContent?alt=sse', {
          method: 'POST',
          body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
        }),
      );
    const bounded = createSimulatedGemini({ keepRequests: 3 });
    for (let index = 0; index < 5; index += 1) await (await post(bounded)).text();
    expect(bounded.requests).toHaveLength(3);
    const none = createSimulatedGemini({ keepRequests: 0 });
    await (await post(none)).text();
    expect(none.requests).toHaveLength(0);
  });
});

describe('simulated Gemini and the memory functions', () => {
  it('keeps a note per run in a memory sheet and reads the notes back, across two runs of one graph', async () => {
    const { ports } = setup();
    const fake = createFakeGoogleDrive();
    const drive = createHttpDriveOperationsClient({
      fetch: (input, init) => fake.fetch(new Request(input, init)),
      getAccessToken: () => 'simulated',
      baseUrls: fake.baseUrls('http://google.test'),
    });
    const request = (text: string) => ({
      segments: [{ type: 'text' as const, text }, { type: 'tool' as const, path: 'function-group/use-memory', title: 'Use Memory' }],
      graph: { url: 'drive:/playground', title: 'Playground' },
    });
    const first = await collect(run(request('Remember that I like tea.'), { ...ports, drive }));
    expect(first.filter((event) => event.type === 'functionCall').map((event) => (event as { name: string }).name)).toEqual([
      'system_write_file',
      'memory_get_metadata',
      'memory_create_sheet',
      'memory_read_sheet',
      'memory_update_sheet',
      'memory_read_sheet',
      'system_objective_fulfilled',
    ]);
    expect(JSON.stringify(first.at(-1))).toContain('I remember 1 note in my memory sheet');
    const second = await collect(run(request('Remember that I like coffee too.'), { ...ports, drive }));
    expect(second.filter((event) => event.type === 'functionCall').map((event) => (event as { name: string }).name)).not.toContain('memory_create_sheet');
    const outcome = JSON.stringify(second.at(-1));
    expect(outcome).toContain('I remember 2 notes');
    expect(outcome).toContain('Remember that I like tea.');
    const values = fake.sheetValues(fake.files()[0]?.id as string, 'memory');
    expect(values?.map((row) => row[1])).toEqual(['note', 'Remember that I like tea.', 'Remember that I like coffee too.']);
  });

  it('does not reach for memory without the memory functions', async () => {
    const { ports } = setup();
    const events = await collect(run({ segments: [{ type: 'text', text: 'Remember that I like tea.' }] }, ports));
    expect(events.some((event) => event.type === 'functionCall' && event.name.startsWith('memory_'))).toBe(false);
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
  });
});
