import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineFunction } from '../functions/index.js';
import type { AgentPorts } from '../ports/index.js';
import type { LLMContent } from '../protocol/content.js';
import type { AgentEvent } from '../protocol/events.js';
import { resume, run, type RunOptions } from './index.js';
import {
  createMemoryInteractionStore,
  createScriptedBackendClient,
  functionCallChunk,
  textChunk,
  thoughtChunk,
  usageChunk,
  type ScriptedRequest,
} from '../testing/index.js';

async function collect(events: AsyncIterable<AgentEvent>): Promise<AgentEvent[]> {
  const all: AgentEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

const start = (text: string) => ({ segments: [{ type: 'text' as const, text }] });
const lastContent = (request: ScriptedRequest): LLMContent | undefined => request.body.contents.at(-1);

describe('run() and resume()', () => {
  it('asks the user, suspends, resumes once with the answer, and completes with the written file', async () => {
    const backend = createScriptedBackendClient([
      [
        thoughtChunk('I should write a greeting and ask for a name.'),
        functionCallChunk('system_write_file', { file_name: 'greeting.md', content: 'Hello there' }, { thoughtSignature: 'sig-1' }),
        functionCallChunk('chat_request_user_input', { user_message: 'What is your name?', input_type: 'text' }),
        usageChunk(),
      ],
      [
        functionCallChunk(
          'system_objective_fulfilled',
          { objective_outcome: 'Greeted Ada: <file src="/mnt/greeting.md" />' },
          { thoughtSignature: 'sig-2' },
        ),
      ],
    ]);
    const ports: AgentPorts = { backend, store: createMemoryInteractionStore() };

    const first = await collect(run(start('Greet the user by name'), ports));
    expect(first.map((event) => event.type)).toEqual([
      'start',
      'sendRequest',
      'thought',
      'functionCall',
      'functionCall',
      'usageMetadata',
      'functionResult',
      'waitForInput',
    ]);
    const suspend = first.at(-1);
    if (suspend?.type !== 'waitForInput') throw new Error('expected waitForInput');
    expect(suspend.inputType).toBe('edit_note');
    expect(suspend.prompt.parts[0]?.text).toBe('What is your name?');
    expect(typeof suspend.interactionId).toBe('string');
    const interactionId = suspend.interactionId as string;

    const second = await collect(resume(interactionId, { input: { role: 'user', parts: [{ text: 'Ada' }] } }, ports));
    expect(second.map((event) => event.type)).toEqual([
      'sendRequest',
      'functionCall',
      'functionResult',
      'turnComplete',
      'finish',
      'complete',
    ]);
    const complete = second.at(-1);
    if (complete?.type !== 'complete') throw new Error('expected complete');
    expect(complete.result.success).toBe(true);
    expect(JSON.stringify(complete.result.outcomes)).toContain('Greeted Ada');
    expect(JSON.stringify(complete.result.outcomes)).toContain('Hello there');
    expect(complete.result.intermediate).toEqual([{ path: '/mnt/greeting.md', content: { text: 'Hello there' } }]);

    // The second request carries the signed call back and answers both calls in call order.
    const request = backend.requests[1];
    if (!request) throw new Error('expected a second request');
    const modelTurn = request.body.contents[1];
    expect(modelTurn?.parts.find((part) => part.functionCall?.name === 'system_write_file')?.thoughtSignature).toBe('sig-1');
    expect(lastContent(request)?.parts.map((part) => part.functionResponse)).toEqual([
      { name: 'system_write_file', response: { file_path: '/mnt/greeting.md' } },
      { name: 'chat_request_user_input', response: { user_input: 'Ada' } },
    ]);

    // Single use: a second resume is refused by name.
    expect(await collect(resume(interactionId, { input: { parts: [{ text: 'Eve' }] } }, ports))).toEqual([
      { type: 'error', message: `Unknown interaction ID: ${interactionId}`, code: 'INTERACTION_NOT_FOUND' },
    ]);
  });

  it('gives each call its own callId when the model uses the same id every turn, and sends the model its id back', async () => {
    const sentBack: unknown[] = [];
    const backend = createScriptedBackendClient(async (request) => {
      const last = lastContent(request);
      for (const part of last?.parts ?? []) if (part.functionResponse) sentBack.push(part.functionResponse.id);
      if (request.index === 0) return [functionCallChunk('system_write_file', { file_name: 'a.md', content: 'one' }, { id: 'call_0' })];
      if (request.index === 1) return [functionCallChunk('chat_request_user_input', { user_message: 'Name?', input_type: 'text' }, { id: 'call_0' })];
      return [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Done' }, { id: 'call_0' })];
    });
    const ports: AgentPorts = { backend, store: createMemoryInteractionStore() };
    const first = await collect(run(start('Write, ask, finish'), ports));
    const suspend = first.at(-1);
    if (suspend?.type !== 'waitForInput') throw new Error(`expected waitForInput, got ${suspend?.type}`);
    const second = await collect(resume(suspend.interactionId as string, { input: { role: 'user', parts: [{ text: 'Ada' }] } }, ports));
    expect(second.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    const calls = [...first, ...second].filter((event) => event.type === 'functionCall');
    expect(calls.map((event) => event.name)).toEqual(['system_write_file', 'chat_request_user_input', 'system_objective_fulfilled']);
    expect(new Set(calls.map((event) => event.callId)).size).toBe(3);
    expect(calls.map((event) => event.callId)).not.toContain('call_0');
    // Each result names its own call (the question's answer came from the user), and the model got
    // its own id back every time.
    const results = [...first, ...second].filter((event) => event.type === 'functionResult').map((event) => event.callId);
    expect(results).toEqual([calls[0]?.callId, calls[2]?.callId]);
    expect(sentBack).toEqual(['call_0', 'call_0']);
  });

  it('ends a run whose history could not be sent before announcing the request', async () => {
    // The model signs its second call but not its first: the next request would be refused.
    const backend = createScriptedBackendClient([
      [
        functionCallChunk('system_write_file', { file_name: 'a.md', content: 'a' }),
        functionCallChunk('system_write_file', { file_name: 'b.md', content: 'b' }, { thoughtSignature: 'sig' }),
      ],
    ]);
    const events = await collect(run(start('Write two files'), { backend, store: createMemoryInteractionStore() }));
    expect(events.filter((event) => event.type === 'sendRequest')).toHaveLength(1);
    expect(events.find((event) => event.type === 'error')).toMatchObject({ code: 'INVALID_HISTORY', message: expect.stringContaining('lost its thoughtSignature') });
    expect(backend.requests).toHaveLength(1);
  });

  it('keeps ten suspended runs apart when they are resumed in random order', async () => {
    const backend = createScriptedBackendClient((request) => {
      const answer = lastContent(request)?.parts[0]?.functionResponse?.response?.user_input;
      if (typeof answer === 'string') {
        return [functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${answer}` })];
      }
      return [functionCallChunk('chat_request_user_input', { user_message: 'Name?' })];
    });
    const ports: AgentPorts = { backend, store: createMemoryInteractionStore() };
    const suspended = await Promise.all(
      Array.from({ length: 10 }, async (_, index) => {
        const events = await collect(run(start(`Greet person ${index}`), ports));
        const last = events.at(-1);
        if (last?.type !== 'waitForInput' || !last.interactionId) throw new Error('expected a suspend');
        return { index, interactionId: last.interactionId };
      }),
    );
    expect(new Set(suspended.map((entry) => entry.interactionId)).size).toBe(10);
    const shuffled = [...suspended].sort(() => Math.random() - 0.5);
    const outcomes = await Promise.all(
      shuffled.map(async ({ index, interactionId }) => {
        const events = await collect(resume(interactionId, { input: { parts: [{ text: `person-${index}` }] } }, ports));
        const last = events.at(-1);
        return { index, text: last?.type === 'complete' ? last.result.outcomes?.parts[0]?.text : undefined };
      }),
    );
    for (const { index, text } of outcomes) expect(text).toBe(`Hello person-${index}`);
  });

  it('turns a throwing handler into an error for the model and a $error result into a fatal end', async () => {
    const tools = {
      name: 'tools',
      functions: [
        defineFunction({
          name: 'flaky',
          description: 'Fails.',
          parameters: z.object({}),
          handler: async () => {
            throw new Error('disk on fire');
          },
        }),
        defineFunction({ name: 'fatal', description: 'Ends.', parameters: z.object({}), handler: async () => ({ $error: 'quota exhausted' }) }),
      ],
    };
    const backend = createScriptedBackendClient([[functionCallChunk('flaky')], [functionCallChunk('fatal')]]);
    const events = await collect(run(start('x'), { backend, store: createMemoryInteractionStore() }, { functionGroups: [tools] }));
    const flakyResult = events.find((event) => event.type === 'functionResult');
    expect(flakyResult).toMatchObject({ content: { parts: [{ functionResponse: { name: 'flaky', response: { error: 'disk on fire' } } }] } });
    expect(events.slice(-3)).toEqual([
      { type: 'finish' },
      { type: 'error', message: 'quota exhausted', code: 'INTERNAL' },
      { type: 'complete', result: { success: false } },
    ]);
  });

  it('passes a stop to a function still running after the model answered', async () => {
    let sawStop = false;
    let started = (): void => undefined;
    const running = new Promise<void>((resolve) => (started = resolve));
    const slow = defineFunction({
      name: 'slow_lookup',
      description: 'Looks something up slowly.',
      parameters: z.object({}),
      handler: async (_args, context) => {
        started();
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 2_000);
          context.signal.addEventListener('abort', () => {
            sawStop = true;
            clearTimeout(timer);
            resolve();
          });
        });
        return { found: true };
      },
    });
    const backend = createScriptedBackendClient([[functionCallChunk('slow_lookup')]]);
    const controller = new AbortController();
    const events: AgentEvent[] = [];
    const done = (async () => {
      for await (const event of run(start('look it up'), { backend, store: createMemoryInteractionStore() }, { functionGroups: [{ name: 'lookup', functions: [slow] }], signal: controller.signal })) {
        events.push(event);
      }
    })();
    await running;
    // The answer is in: the call runs on its own now.
    await new Promise((resolve) => setTimeout(resolve, 20));
    controller.abort();
    await done;
    expect(sawStop).toBe(true);
    expect(events.some((event) => event.type === 'complete')).toBe(false);
  });

  it('ends a runaway loop at the turn cap with one tool-free turn', async () => {
    const looping = createScriptedBackendClient((request) =>
      request.body.tools ? [functionCallChunk('system_list_files', { status_update: 'looking' })] : [thoughtChunk('out of turns')],
    );
    const options: RunOptions = { maxTurns: 3 };
    const events = await collect(run(start('loop forever'), { backend: looping, store: createMemoryInteractionStore() }, options));
    expect(looping.requests).toHaveLength(4);
    expect(looping.requests[3]?.body.tools).toBeUndefined();
    expect(events.some((event) => event.type === 'thought' && event.text.startsWith('Turn limit reached (3 turns)'))).toBe(true);
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: false } });
  });

  it('runs no call the model makes in the tool-free last turn anyway', async () => {
    let runs = 0;
    const note = defineFunction({
      name: 'take_note',
      description: 'Notes something down.',
      parameters: z.object({ text: z.string() }),
      handler: async () => {
        runs += 1;
        return { noted: true };
      },
    });
    const stubborn = createScriptedBackendClient((request) =>
      request.body.tools
        ? [functionCallChunk('take_note', { text: 'again' })]
        : [functionCallChunk('take_note', { text: 'one more' }), textChunk('Out of turns.')],
    );
    const options: RunOptions = { maxTurns: 2, functionGroups: [{ name: 'notes', functions: [note] }] };
    const events = await collect(run(start('keep noting'), { backend: stubborn, store: createMemoryInteractionStore() }, options));
    expect(stubborn.requests).toHaveLength(3);
    expect(events.filter((event) => event.type === 'functionCall')).toHaveLength(2);
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: false } });
    // Give a call started in the background time to run before counting.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(runs).toBe(2);
  });

  it('cancels the model request when the consumer stops reading', async () => {
    const backend = createScriptedBackendClient([[thoughtChunk('a'), thoughtChunk('b'), thoughtChunk('c'), thoughtChunk('d')]], {
      chunkDelayMs: 30,
    });
    const events = run(start('slow'), { backend, store: createMemoryInteractionStore() });
    for await (const event of events) if (event.type === 'thought') break;
    await expect.poll(() => backend.abortedCount, { timeout: 5_000 }).toBe(1);
  });

  it('cancels the model request when the consumer of a resume stops right after the request event', async () => {
    let requestEnded!: () => void;
    const ended = new Promise<void>((resolve) => (requestEnded = resolve));
    const store = createMemoryInteractionStore();
    const asking = createScriptedBackendClient([[functionCallChunk('chat_request_user_input', { user_message: 'Name?' })]]);
    const first = await collect(run(start('ask'), { backend: asking, store }));
    const id = (first.at(-1) as { interactionId: string }).interactionId;
    const hanging: AgentPorts['backend'] = {
      ...asking,
      async *streamGenerateContent(_model, _body, signal) {
        // A model that never answers: only the run's cancellation ends this request.
        await new Promise<void>((resolve) => {
          if (signal?.aborted) resolve();
          else signal?.addEventListener('abort', () => resolve(), { once: true });
        });
        requestEnded();
      },
    };
    const events = resume(id, { input: { parts: [{ text: 'Ada' }] } }, { backend: hanging, store });
    for (let next = await events.next(); !next.done && next.value.type !== 'sendRequest'; next = await events.next());
    await events.return(undefined);
    // Without the cancellation the request would stay open until the model's idle timeout (60 s).
    await ended;
  });

  it('starts nothing before the first next(), and a run left before it never asks the model', async () => {
    const backend = createScriptedBackendClient([[thoughtChunk('unused')]]);
    const events = run(start('never read'), { backend, store: createMemoryInteractionStore() });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(backend.requests).toHaveLength(0);
    expect(await events.return(undefined)).toEqual({ done: true, value: undefined });
    expect(await events.next()).toEqual({ done: true, value: undefined });
    expect(backend.requests).toHaveLength(0);
  });

  it('ends a next() that waits on a silent model as soon as the consumer leaves, and cancels the request', async () => {
    let requestEnded!: () => void;
    const ended = new Promise<void>((resolve) => (requestEnded = resolve));
    const silent: AgentPorts['backend'] = {
      ...createScriptedBackendClient([]),
      async *streamGenerateContent(_model, _body, signal) {
        await new Promise<void>((resolve) => {
          if (signal?.aborted) resolve();
          else signal?.addEventListener('abort', () => resolve(), { once: true });
        });
        requestEnded();
      },
    };
    const events = run(start('wait'), { backend: silent, store: createMemoryInteractionStore() });
    for (let next = await events.next(); !next.done && next.value.type !== 'sendRequest'; next = await events.next());
    // The consumer is waiting for the model's first chunk when it leaves (a client gone).
    const waiting = events.next();
    expect(await events.return(undefined)).toEqual({ done: true, value: undefined });
    expect(await waiting).toEqual({ done: true, value: undefined });
    await ended;
    expect(await events.next()).toEqual({ done: true, value: undefined });
  });

  it('throw() ends the run, cancels its model request and rejects with the error given', async () => {
    const backend = createScriptedBackendClient([[thoughtChunk('a'), thoughtChunk('b'), thoughtChunk('c')]], { chunkDelayMs: 30 });
    const events = run(start('stop me'), { backend, store: createMemoryInteractionStore() });
    for (let next = await events.next(); !next.done && next.value.type !== 'thought'; next = await events.next());
    await expect(events.throw(new Error('the reader failed'))).rejects.toThrow('the reader failed');
    await expect.poll(() => backend.abortedCount, { timeout: 5_000 }).toBe(1);
    expect(await events.next()).toEqual({ done: true, value: undefined });
  });

  it('answers next() calls made together with the events in order, then done', async () => {
    const script = () => createScriptedBackendClient([[thoughtChunk('one'), thoughtChunk('two'), functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Done' })]]);
    const ports = () => ({ backend: script(), store: createMemoryInteractionStore() });
    const expected = (await collect(run(start('together'), ports()))).map((event) => event.type);
    expect(expected).toContain('thought');
    const events = run(start('together'), ports());
    const results = await Promise.all(Array.from({ length: expected.length + 3 }, () => events.next()));
    expect(results.map((result) => (result.done ? 'done' : result.value.type))).toEqual([...expected, 'done', 'done', 'done']);
  });

  it('delivers thousands of events in order to a reader slower than the run', async () => {
    const thoughts = Array.from({ length: 5_000 }, (_, index) => thoughtChunk(`step ${index}`));
    const backend = createScriptedBackendClient([[...thoughts, textChunk('Done.')]]);
    const texts: string[] = [];
    for await (const event of run(start('think a lot'), { backend, store: createMemoryInteractionStore() }, { mode: 'chat' })) {
      if (event.type === 'thought') texts.push(event.text);
      // The run goes on emitting while the reader waits for another task now and then.
      if (texts.length % 100 === 0) await new Promise((resolve) => setTimeout(resolve, 0));
    }
    expect(texts).toEqual(Array.from({ length: 5_000 }, (_, index) => `step ${index}`));
  });

  it('refuses a resume by a different owner and keeps the run for its owner', async () => {
    const backend = createScriptedBackendClient([
      [functionCallChunk('chat_request_user_input', { user_message: 'Name?' })],
      [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'done' })],
    ]);
    const ports: AgentPorts = { backend, store: createMemoryInteractionStore() };
    const first = await collect(run(start('x'), ports, { owner: 'alice' }));
    const id = (first.at(-1) as { interactionId: string }).interactionId;
    expect(await collect(resume(id, { input: { parts: [{ text: 'Mallory' }] } }, ports, { owner: 'mallory' }))).toEqual([
      { type: 'error', message: `Interaction ${id} belongs to another user`, code: 'FORBIDDEN' },
    ]);
    const events = await collect(resume(id, { input: { parts: [{ text: 'Alice' }] } }, ports, { owner: 'alice' }));
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
  });

  it('maps a choice answer to the selected ids (W4)', async () => {
    const backend = createScriptedBackendClient([
      [functionCallChunk('chat_present_choices', { user_message: 'Pick', choices: [{ id: 'a', label: 'A' }, { id: 'b', label: 'B' }] })],
      [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'ok' })],
    ]);
    const ports: AgentPorts = { backend, store: createMemoryInteractionStore() };
    const first = await collect(run(start('choose'), ports));
    const suspend = first.at(-1);
    expect(suspend).toMatchObject({ type: 'waitForChoice', selectionMode: 'single', layout: 'list' });
    await collect(resume((suspend as { interactionId: string }).interactionId, { selected: { ids: ['b'] } }, ports));
    expect(lastContent(backend.requests[1] as ScriptedRequest)?.parts[0]?.functionResponse?.response).toEqual({ selected: ['b'] });
  });

  it('chat mode ends on a turn without function calls, with the answer as the outcome', async () => {
    const backend = createScriptedBackendClient([
      [functionCallChunk('system_list_files', { status_update: 'Looking' })],
      [thoughtChunk('Nothing to do'), { candidates: [{ content: { role: 'model', parts: [{ text: 'All ' }] } }] }, { candidates: [{ content: { role: 'model', parts: [{ text: 'done.' }] }, finishReason: 'STOP' }] }],
    ]);
    const events = await collect(run(start('Say done'), { backend, store: createMemoryInteractionStore() }, { mode: 'chat' }));
    expect(backend.requests[0]?.body.toolConfig).toBeUndefined();
    expect(events.find((event) => event.type === 'functionCallUpdate')).toMatchObject({ status: 'Looking' });
    expect(events.slice(-2)).toEqual([
      { type: 'finish' },
      { type: 'complete', result: { success: true, outcomes: { role: 'model', parts: [{ text: 'All done.' }] } } },
    ]);
  });

  it('runs a function declared parallel: false only after the calls before it finish', async () => {
    const order: string[] = [];
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    const group = {
      name: 'timing',
      functions: [
        defineFunction({ name: 'slow', description: '', parameters: z.object({}), handler: async () => { order.push('slow:start'); await sleep(50); order.push('slow:end'); return {}; } }),
        defineFunction({ name: 'alone', description: '', parallel: false, parameters: z.object({}), handler: async () => { order.push('alone'); return {}; } }),
      ],
    };
    const backend = createScriptedBackendClient([
      [functionCallChunk('slow'), functionCallChunk('alone')],
      [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'ok' })],
    ]);
    await collect(run(start('x'), { backend, store: createMemoryInteractionStore() }, { functionGroups: [group] }));
    expect(order).toEqual(['slow:start', 'slow:end', 'alone']);
  });
});
