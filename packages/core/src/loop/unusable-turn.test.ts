import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineFunction, type FunctionGroup } from '../functions/index.js';
import type { JsonObject } from '../protocol/content.js';
import type { BackendClient } from '../ports/index.js';
import type { AgentEvent } from '../protocol/events.js';
import type { GenerateContentResponse } from '../protocol/gemini.js';
import { run, type RunOptions } from '../run/index.js';
import {
  createMemoryInteractionStore,
  createScriptedBackendClient,
  functionCallChunk,
  textChunk,
  thoughtChunk,
  usageChunk,
  type ScriptedTurn,
} from '../testing/index.js';

async function collect(events: AsyncIterable<AgentEvent>): Promise<AgentEvent[]> {
  const all: AgentEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

const fixture = (name: string) =>
  JSON.parse(readFileSync(new URL(`../../../../fixtures/gemini/${name}`, import.meta.url), 'utf8')) as GenerateContentResponse;
/** A recorded turn with a candidate and no content at all (finish reason `MAX_TOKENS`). */
const EMPTY_TURN = fixture('generate-max-tokens-no-parts-gemini-2.5-pro.json');
/** A recorded answer blocked for safety: `content: {}`. */
const SAFETY_TURN = fixture('generate-finish-reason-safety-empty-content-gemini-1.5-flash.json');

/** A malformed call as Gemini reports it: no content, the reason and a message. */
const MALFORMED: GenerateContentResponse[] = [
  {
    candidates: [{ finishReason: 'MALFORMED_FUNCTION_CALL', finishMessage: 'Malformed function call: print(default_api.system_list_files(', index: 0 }],
    usageMetadata: { promptTokenCount: 40, totalTokenCount: 40 },
  } as GenerateContentResponse,
];
/** A stream that carries no candidate at all. */
const NO_CANDIDATES: GenerateContentResponse[] = [{ usageMetadata: { promptTokenCount: 40, totalTokenCount: 40 } } as GenerateContentResponse];
/** An empty answer: a candidate whose content has no parts. */
const NO_PARTS: GenerateContentResponse[] = [{ candidates: [{ content: { role: 'model', parts: [] }, finishReason: 'STOP', index: 0 }] } as GenerateContentResponse];
const FULFIL: GenerateContentResponse[] = [
  functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Done', href: '/' }, { thoughtSignature: 'sig' }),
  usageChunk(),
];

const start = { segments: [{ type: 'text' as const, text: 'Tidy up' }] };
const types = (events: AgentEvent[]) => events.map((event) => event.type);

async function runScript(script: ScriptedTurn[], options: RunOptions = {}) {
  const backend = createScriptedBackendClient(script);
  const events = await collect(run(start, { backend, store: createMemoryInteractionStore() }, options));
  return { backend, events };
}

describe('turns with nothing usable', () => {
  it('asks again quietly after an empty turn: one sendRequest and one usage report for the turn', async () => {
    const { backend, events } = await runScript([[EMPTY_TURN], FULFIL]);
    expect(backend.requests).toHaveLength(2);
    expect(backend.requests[1]?.body).toEqual(backend.requests[0]?.body);
    expect(types(events)).toEqual(['start', 'sendRequest', 'functionCall', 'usageMetadata', 'functionResult', 'turnComplete', 'finish', 'complete']);
    expect(events.find((event) => event.type === 'usageMetadata')).toMatchObject({ metadata: { promptTokenCount: 10 } });
  });

  it('asks again quietly after a stream without candidates', async () => {
    const { backend, events } = await runScript([NO_CANDIDATES, NO_CANDIDATES, FULFIL]);
    expect(backend.requests).toHaveLength(3);
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
  });

  it('ends with a coded error when the answer stays empty, long before the turn cap', async () => {
    const { backend, events } = await runScript([NO_PARTS, NO_PARTS, NO_PARTS, FULFIL], { maxTurns: 50 });
    expect(backend.requests).toHaveLength(3);
    expect(types(events)).toEqual(['start', 'sendRequest', 'finish', 'error', 'complete']);
    expect(events.at(-2)).toEqual({
      type: 'error',
      message: 'Agent unable to proceed: the model returned a turn with no content 3 times in a row',
      code: 'MODEL_ERROR',
    });
  });

  it('names a stream without candidates in the error when it never gets one', async () => {
    const { events } = await runScript([NO_CANDIDATES, NO_CANDIDATES, NO_CANDIDATES]);
    expect(events.at(-2)).toEqual({
      type: 'error',
      message: 'Agent unable to proceed: no candidates in Gemini response 3 times in a row',
      code: 'MODEL_ERROR',
    });
  });

  it('counts a turn of thoughts without an answer as empty', async () => {
    const { backend, events } = await runScript([[thoughtChunk('Hmm')], FULFIL]);
    expect(backend.requests).toHaveLength(2);
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
  });

  it('retries a malformed call quietly and keeps the history as it was', async () => {
    const { backend, events } = await runScript([MALFORMED, FULFIL]);
    expect(backend.requests[1]?.body.contents).toEqual(backend.requests[0]?.body.contents);
    expect(events.filter((event) => event.type === 'sendRequest')).toHaveLength(1);
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
  });

  it('ends six malformed turns in a row with a coded error, the objective untouched and one correction of its own', async () => {
    const { backend, events } = await runScript([MALFORMED, MALFORMED, MALFORMED, MALFORMED, MALFORMED, MALFORMED, FULFIL]);
    expect(backend.requests).toHaveLength(6);
    const objective = backend.requests[0]?.body.contents[0];
    const last = backend.requests[5]?.body.contents ?? [];
    expect(last[0]).toEqual(objective);
    expect(last).toHaveLength(2);
    expect(last[1]).toEqual({
      role: 'user',
      parts: [
        {
          text: 'Your last function call was malformed and was not run (Malformed function call: print(default_api.system_list_files(). Call the function again with valid JSON arguments that match its declaration.',
        },
      ],
    });
    expect(types(events)).toEqual(['start', 'sendRequest', 'usageMetadata', 'sendRequest', 'usageMetadata', 'finish', 'error', 'complete']);
    expect(events.at(-2)).toEqual({
      type: 'error',
      message: 'Agent unable to proceed: the model made a malformed function call 6 times in a row (Malformed function call: print(default_api.system_list_files()',
      code: 'MODEL_ERROR',
    });
    expect(events.at(-1)).toEqual({ type: 'complete', result: { success: false } });
  });

  it('gives a run that recovers after the correction a fresh count', async () => {
    const listFiles = [functionCallChunk('system_list_files', { status_update: 'Looking' }, { thoughtSignature: 'sig-1' })];
    const script = [MALFORMED, MALFORMED, MALFORMED, listFiles, MALFORMED, MALFORMED, FULFIL];
    const { backend, events } = await runScript(script);
    expect(backend.requests).toHaveLength(7);
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
  });

  it('only appends to the history: every content sent goes out again, the same object and unchanged, in every later request', async () => {
    const listFiles = [functionCallChunk('system_list_files', { status_update: 'Looking' }, { thoughtSignature: 'sig-1' })];
    const plan = [MALFORMED, MALFORMED, MALFORMED, listFiles, MALFORMED, MALFORMED, FULFIL];
    const sent: Array<{ contents: readonly object[]; json: string[] }> = [];
    const script: ScriptedTurn[] = plan.map((chunks) => (request) => {
      const contents = request.body.contents ?? [];
      sent.push({ contents, json: contents.map((content) => JSON.stringify(content)) });
      return chunks;
    });
    const { events } = await runScript(script);
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    // The correction after three malformed turns is a content of its own.
    expect(sent.at(-1)?.contents.length).toBeGreaterThan(sent[0]?.contents.length ?? 0);
    for (let index = 1; index < sent.length; index += 1) {
      const before = sent[index - 1] as (typeof sent)[number];
      const after = sent[index] as (typeof sent)[number];
      before.contents.forEach((content, position) => {
        expect(after.contents[position], `request ${index}, contents[${position}]`).toBe(content);
        expect(JSON.stringify(content), `contents[${position}] changed after it was sent`).toBe(before.json[position]);
      });
    }
  });

  it('applies the same rules in chat mode', async () => {
    const recovered = await runScript([NO_PARTS, [textChunk('All tidy.')]], { mode: 'chat' });
    expect(recovered.events.at(-1)).toEqual({ type: 'complete', result: { success: true, outcomes: { role: 'model', parts: [{ text: 'All tidy.' }] } } });
    const failed = await runScript([MALFORMED, MALFORMED, MALFORMED, MALFORMED, MALFORMED, MALFORMED], { mode: 'chat' });
    expect(failed.backend.requests).toHaveLength(6);
    expect(failed.events.at(-2)).toMatchObject({ type: 'error', code: 'MODEL_ERROR' });
  });

  it('stops waiting to retry when the run is cancelled', async () => {
    const controller = new AbortController();
    const scripted = createScriptedBackendClient([]);
    let requests = 0;
    const backend: BackendClient = {
      ...scripted,
      // The turn comes back empty, then the user cancels while the loop waits to ask again.
      async *streamGenerateContent() {
        requests += 1;
        yield* NO_PARTS;
        controller.abort();
      },
    };
    const events = await collect(run(start, { backend, store: createMemoryInteractionStore() }, { signal: controller.signal }));
    expect(requests).toBe(1);
    expect(types(events)).toEqual(['start', 'sendRequest']);
  });
});

/** A `lookup` function that records the arguments of every call it runs. */
function lookupGroup(): { group: FunctionGroup; received: JsonObject[] } {
  const received: JsonObject[] = [];
  const lookup = defineFunction({
    name: 'lookup',
    description: 'Looks a word up.',
    parameters: z.object({ word: z.string(), lang: z.string().optional() }),
    handler: async (args) => {
      received.push(args);
      return { found: true };
    },
  });
  return { group: { name: 'tools', functions: [lookup] }, received };
}

/** A chunk of candidate 0 with `parts`, and `extra` fields on the candidate. */
const partsChunk = (parts: unknown[], extra: Record<string, unknown> = {}): GenerateContentResponse =>
  ({ candidates: [{ content: { role: 'model', parts }, ...extra }] }) as GenerateContentResponse;

describe('model answers of unusual shape', () => {
  it('ends with a coded error naming the field when the model calls a function without a name, and runs nothing', async () => {
    const { group, received } = lookupGroup();
    const { backend, events } = await runScript([[partsChunk([{ functionCall: { args: { word: 'x' } } }], { finishReason: 'STOP' })], FULFIL], { functionGroups: [group] });
    expect(backend.requests).toHaveLength(1);
    expect(received).toEqual([]);
    expect(events.some((event) => event.type === 'functionCall')).toBe(false);
    expect(events.at(-2)).toEqual({
      type: 'error',
      message: 'Agent error: The model sent a malformed answer: candidates[0].content.parts[0].functionCall.name: missing (a function call needs the name of the function)',
      code: 'MODEL_ERROR',
    });
  });

  it('ends with a coded error, never a silent merge, when the arguments of a call come in two chunks under one id', async () => {
    const { group, received } = lookupGroup();
    const split = [
      partsChunk([{ functionCall: { id: 'c1', name: 'lookup', args: { word: 'x' } } }]),
      partsChunk([{ functionCall: { id: 'c1', args: { lang: 'en' } } }], { finishReason: 'STOP' }),
    ];
    const { backend, events } = await runScript([split, FULFIL], { functionGroups: [group] });
    // The part already announced may have started (read-only calls start at once); its result is
    // set aside, and the model is never told it ran with arguments it did not send.
    expect(received.length).toBeLessThanOrEqual(1);
    expect(backend.requests).toHaveLength(1);
    expect(events.find((event) => event.type === 'functionResult')).toMatchObject({ content: { parts: [{ functionResponse: { response: { error: expect.stringMatching(/set aside/) } } }] } });
    expect(events.at(-2)).toMatchObject({ type: 'error', code: 'MODEL_ERROR', message: expect.stringMatching(/functionCall\.name: missing \(a function call needs the name of the function\)$/) });
  });

  it('runs a call streamed in fragments (Vertex AI) once, with its whole arguments, and sends it back joined with its signature', async () => {
    const { group, received } = lookupGroup();
    const streamed = [
      partsChunk([{ functionCall: { name: 'lookup', willContinue: true }, thoughtSignature: 'c2lnbmVk' }]),
      partsChunk([{ functionCall: { partialArgs: [{ jsonPath: '$.word', stringValue: 'seren', willContinue: true }], willContinue: true } }]),
      partsChunk([{ functionCall: { partialArgs: [{ jsonPath: '$.word', stringValue: 'dipity' }], willContinue: true } }]),
      partsChunk([{ functionCall: {} }]),
      partsChunk([{ text: '' }], { finishReason: 'STOP' }),
    ];
    const { backend, events } = await runScript([streamed, FULFIL], { functionGroups: [group] });
    expect(received).toEqual([{ word: 'serendipity' }]);
    expect(events.filter((event) => event.type === 'functionCall').map((event) => event.type === 'functionCall' && [event.name, event.args])).toEqual([
      ['lookup', { word: 'serendipity' }],
      ['system_objective_fulfilled', { objective_outcome: 'Done', href: '/' }],
    ]);
    expect(backend.requests[1]?.body.contents[1]).toEqual({
      role: 'model',
      parts: [{ functionCall: { name: 'lookup', args: { word: 'serendipity' } }, thoughtSignature: 'c2lnbmVk' }, { text: '' }],
    });
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
  });

  it('says which finish reason left the turn empty: a thinking model that spends its whole budget on thoughts (MAX_TOKENS)', async () => {
    const thinking = [thoughtChunk('Planning the cleanup'), EMPTY_TURN];
    const { backend, events } = await runScript([thinking, thinking, thinking]);
    expect(backend.requests).toHaveLength(3);
    expect(events.at(-2)).toEqual({
      type: 'error',
      message: 'Agent unable to proceed: the model returned a turn with no content 3 times in a row (finishReason MAX_TOKENS)',
      code: 'MODEL_ERROR',
    });
  });

  it('ends at once, without asking again, on an answer blocked for SAFETY (content {}) or RECITATION (after some text)', async () => {
    const safety = await runScript([[SAFETY_TURN], FULFIL]);
    expect(safety.backend.requests).toHaveLength(1);
    expect(safety.events.at(-2)).toEqual({ type: 'error', message: 'Agent error: the response was blocked by safety filters (finishReason SAFETY)', code: 'MODEL_ERROR' });
    const recited = await runScript([[textChunk('Once upon'), partsChunk([{ text: ' a time' }], { finishReason: 'RECITATION' })], FULFIL], { mode: 'chat' });
    expect(recited.backend.requests).toHaveLength(1);
    expect(recited.events.at(-2)).toEqual({
      type: 'error',
      message: 'Agent error: the response was blocked for reciting protected material (finishReason RECITATION)',
      code: 'MODEL_ERROR',
    });
  });

  it('ends at once on an image blocked (IMAGE_SAFETY), and asks again on a finish reason it does not know, even one named like an object property', async () => {
    const image = await runScript([[partsChunk([], { finishReason: 'IMAGE_SAFETY' })], FULFIL]);
    expect(image.backend.requests).toHaveLength(1);
    expect(image.events.at(-2)).toEqual({ type: 'error', message: 'Agent error: the image was blocked by safety filters (finishReason IMAGE_SAFETY)', code: 'MODEL_ERROR' });
    const odd = await runScript([[partsChunk([], { finishReason: 'toString' })], FULFIL]);
    expect(odd.backend.requests).toHaveLength(2);
    expect(odd.events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
  });

  it('asks again quietly when a stream carries only another candidate than the first', async () => {
    const other: GenerateContentResponse = { candidates: [{ index: 1, content: { role: 'model', parts: [{ text: 'B' }] }, finishReason: 'STOP' }] };
    const { backend, events } = await runScript([[other], FULFIL]);
    expect(backend.requests).toHaveLength(2);
    // Asked again unchanged: the other candidate's text never entered the history.
    expect(backend.requests[1]?.body.contents).toEqual(backend.requests[0]?.body.contents);
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
  });
});
