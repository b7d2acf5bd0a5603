import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AgentError } from '../errors/index.js';
import { defineFunction, Suspend, type FunctionGroup } from '../functions/index.js';
import { createClaimedInteraction } from '../interactions/index.js';
import type { AgentPorts, BackendClient, InteractionStore } from '../ports/index.js';
import type { GenerateContentResponse } from '../protocol/gemini.js';
import type { JsonObject, LLMContent } from '../protocol/content.js';
import type { ResumeResponse } from '../protocol/resume-responses.js';
import type { RunEvent } from '../protocol/run-events.js';
import {
  createMemoryInteractionStore,
  createScriptedBackendClient,
  functionCallChunk,
  thoughtChunk,
} from '../testing/index.js';
import { answered, responsesIn } from '../../test/function-responses.js';
import { checkpointState } from '../../test/saved-states.js';
import type { InteractionState } from './interaction-state.js';
import { resume, run, type RunOptions } from './index.js';

async function collect(events: AsyncIterable<RunEvent>): Promise<RunEvent[]> {
  const all: RunEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

const start = (text: string) => ({ segments: [{ type: 'text' as const, text }] });
const fast: RunOptions = { modelPolicy: { baseDelayMs: 1, maxDelayMs: 5 } };


const done = (text: string) => [functionCallChunk('system_objective_fulfilled', { objective_outcome: text })];

describe('never lose a run', () => {
  it('keeps a resumed run whose client left resumable under the same id, and applies the answer once', async () => {
    const controller = new AbortController();
    const backend = createScriptedBackendClient(async (request) => {
      if (!answered(request, 'chat_request_user_input')) {
        return [functionCallChunk('chat_request_user_input', { user_message: 'Your name?', input_type: 'text' })];
      }
      // The first resumed request: the client goes away while the model is answering.
      if (backend.requests.length === 2) {
        controller.abort();
        return [thoughtChunk('thinking…'), thoughtChunk('still thinking…')];
      }
      return done('Hello!');
    }, { chunkDelayMs: 5 });
    const ports: AgentPorts = { backend, store: createMemoryInteractionStore() };
    const suspended = (await collect(run(start('Greet me'), ports))).at(-1);
    if (suspended?.type !== 'waitForInput') throw new Error('expected waitForInput');
    const id = suspended.interactionId;

    const cut = await collect(resume(id, { input: { role: 'user', parts: [{ text: 'Ada' }] } }, ports, { signal: controller.signal }));
    expect(cut.map((event) => event.type)).not.toContain('complete');

    const again = await collect(resume(id, { input: { role: 'user', parts: [{ text: 'Eve' }] } }, ports));
    expect(again.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    const last = backend.requests.at(-1);
    const inputs = responsesIn(last).filter((response) => response.name === 'chat_request_user_input');
    expect(inputs).toEqual([{ name: 'chat_request_user_input', response: { user_input: 'Ada' } }]);
    // Finished: the id is gone.
    expect((await collect(resume(id, {}, ports))).at(-1)).toMatchObject({ type: 'error', code: 'INTERACTION_NOT_FOUND' });
  });

  it('goes on from the last checkpoint after a crash: recorded calls keep their results, an interrupted side effect is reported, the rest run again', async () => {
    const ran = { lookup: 0, send_email: 0 };
    const tools: FunctionGroup = {
      name: 'tools',
      functions: [
        defineFunction({
          name: 'lookup',
          description: 'Looks a word up.',
          parameters: z.object({ word: z.string() }),
          handler: async ({ word }) => {
            ran.lookup += 1;
            return { meaning: `meaning of ${word}` };
          },
        }),
        defineFunction({
          name: 'send_email',
          description: 'Sends an email.',
          parameters: z.object({ to: z.string() }),
          sideEffects: true,
          handler: async () => {
            ran.send_email += 1;
            return { sent: true };
          },
        }),
      ],
    };
    const store = createMemoryInteractionStore();
    const objective: LLMContent = { role: 'user', parts: [{ text: '<objective>Do it</objective>' }] };
    const modelTurn: LLMContent = {
      role: 'model',
      parts: [
        { functionCall: { name: 'lookup', args: { word: 'alpha' } }, thoughtSignature: 'sig' },
        { functionCall: { name: 'send_email', args: { to: 'ada@example.com' } } },
        { functionCall: { name: 'lookup', args: { word: 'beta' } } },
      ],
    };
    const state: InteractionState = checkpointState({
      contents: [objective, modelTurn],
      turnCount: 1,
      turn: {
        calls: [
          { callId: 'c1', name: 'lookup', args: { word: 'alpha' }, response: { meaning: 'recorded meaning' } },
          { callId: 'c2', name: 'send_email', args: { to: 'ada@example.com' }, started: true },
          { callId: 'c3', name: 'lookup', args: { word: 'beta' } },
        ],
      },
    });
    // A process claimed the run, wrote this checkpoint, and died: its short lease runs out.
    await createClaimedInteraction(store, 'crashed', state, { owner: 'alice', leaseMs: 20 });
    const backend = createScriptedBackendClient([done('All done')]);
    const ports: AgentPorts = { backend, store };
    const busy = await collect(resume('crashed', {}, ports, { owner: 'alice', functionGroups: [tools] }));
    expect(busy).toEqual([expect.objectContaining({ type: 'error', code: 'CONFLICT' })]);
    await new Promise((resolve) => setTimeout(resolve, 30));

    const events = await collect(resume('crashed', {}, ports, { owner: 'alice', functionGroups: [tools] }));
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    expect(backend.requests).toHaveLength(1);
    expect(responsesIn(backend.requests[0])).toEqual([
      { name: 'lookup', response: { meaning: 'recorded meaning' } },
      { name: 'send_email', response: { error: expect.stringContaining('was running when the run stopped and was not run again') } },
      { name: 'lookup', response: { meaning: 'meaning of beta' } },
    ]);
    expect(ran).toEqual({ lookup: 1, send_email: 0 });
    // The model's own turn went back unchanged, signature included.
    expect(backend.requests[0]?.body.contents[1]).toEqual(modelTurn);
  });

  it('retries a model stream that breaks off mid-answer, then pauses with a code and an id, and resuming completes', async () => {
    let broken = true;
    const requests: unknown[] = [];
    const backend = flakyBackend(async function* (body) {
      requests.push(body);
      yield thoughtChunk('Starting…');
      if (broken) throw new AgentError('MODEL_UNAVAILABLE', 'The answer from Gemini broke off: terminated');
      yield* done('Recovered');
    });
    const ports: AgentPorts = { backend, store: createMemoryInteractionStore() };
    const events = await collect(run(start('Work'), ports, fast));
    const error = events.at(-1);
    expect(error).toMatchObject({ type: 'error', code: 'MODEL_UNAVAILABLE', interactionId: expect.any(String) });
    expect(requests).toHaveLength(3);
    broken = false;
    const resumed = await collect(resume((error as { interactionId: string }).interactionId, {}, ports, fast));
    expect(resumed.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
  });

  it('gives each call announced from an answer that broke off a result that says so, before the answer asked again', async () => {
    let attempts = 0;
    const backend = flakyBackend(async function* (body) {
      if (JSON.stringify(body).includes('"word":"beta"')) {
        yield* done('Looked up');
        return;
      }
      attempts += 1;
      yield functionCallChunk('lookup', { word: attempts === 1 ? 'alpha' : 'beta' });
      if (attempts === 1) throw new AgentError('MODEL_UNAVAILABLE', 'The answer from Gemini broke off: terminated');
    });
    const tools: FunctionGroup = {
      name: 'words',
      functions: [
        defineFunction({ name: 'lookup', description: 'Looks a word up.', parameters: z.object({ word: z.string() }), handler: async ({ word }) => ({ meaning: word }) }),
      ],
    };
    const events = await collect(run(start('Look a word up'), { backend, store: createMemoryInteractionStore() }, { ...fast, functionGroups: [tools] }));
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    const calls = events.filter((event): event is Extract<RunEvent, { type: 'functionCall' }> => event.type === 'functionCall' && event.name === 'lookup');
    const ids = calls.map((event) => event.callId);
    const results = events.filter((event): event is Extract<RunEvent, { type: 'functionResult' }> => event.type === 'functionResult' && ids.includes(event.callId));
    expect(calls).toHaveLength(2);
    // Every announced call has its result; the first one's says it was set aside, and came before the second call.
    expect(results.map((event) => event.callId)).toEqual(calls.map((event) => event.callId));
    expect(results[0]?.content.parts[0]?.functionResponse?.response).toEqual({ error: "The model's answer broke off before it finished, so this call was set aside" });
    expect(events.indexOf(results[0] as RunEvent)).toBeLessThan(events.indexOf(calls[1] as RunEvent));
    expect(results[1]?.content.parts[0]?.functionResponse?.response).toEqual({ meaning: 'beta' });
  });

  it('never runs a side-effecting call of an answer that broke off: the answer sent again runs it once', async () => {
    for (const options of [fast, { ...fast, interactionId: 'broken-answer' }]) {
      const sent: string[] = [];
      const store = createMemoryInteractionStore();
      /** With checkpoints: what the record said of the call when it started. */
      let recordedAtStart: unknown;
      const tools: FunctionGroup = {
        name: 'mail',
        functions: [
          defineFunction({
            name: 'send_email',
            description: 'Sends an email.',
            parameters: z.object({ to: z.string() }),
            sideEffects: true,
            handler: async ({ to }) => {
              sent.push(to);
              const saved = await store.get('broken-answer');
              if (saved?.state !== undefined) recordedAtStart = (JSON.parse(saved.state) as InteractionState).turn?.calls;
              return { sent: true };
            },
          }),
        ],
      };
      let attempts = 0;
      const backend = flakyBackend(async function* (body) {
        if (JSON.stringify(body).includes('"sent":true')) {
          yield* done('Sent');
          return;
        }
        attempts += 1;
        // The model's ids may repeat from one attempt to the next.
        yield functionCallChunk('send_email', { to: 'ada@example.com' }, { id: 'call-1' });
        if (attempts === 1) throw new AgentError('MODEL_UNAVAILABLE', 'The answer from Gemini broke off: terminated');
      });
      const events = await collect(run(start('Email Ada'), { backend, store }, { ...options, functionGroups: [tools] }));
      expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
      expect(attempts).toBe(2);
      expect(sent).toEqual(['ada@example.com']);
      // The record said it had started, and nothing of the broken answer: a crash now would not run it again.
      if (options.interactionId !== undefined) {
        expect(recordedAtStart).toEqual([{ callId: expect.any(String), providerId: 'call-1', name: 'send_email', args: { to: 'ada@example.com' }, started: true }]);
      }
    }
  });

  it('ends a model request that stalls, retries it, then pauses with TIMEOUT', async () => {
    let requests = 0;
    const backend = flakyBackend(async function* (_body, signal) {
      requests += 1;
      yield thoughtChunk('Let me think…');
      // Never another chunk: only the abort ends the wait.
      await new Promise((resolve) => signal?.addEventListener('abort', resolve, { once: true }));
    });
    const ports: AgentPorts = { backend, store: createMemoryInteractionStore() };
    const events = await collect(run(start('Work'), ports, { modelPolicy: { idleTimeoutMs: 30, baseDelayMs: 1 } }));
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'TIMEOUT', interactionId: expect.any(String) });
    expect(requests).toBe(3);
  });

  it('lets only the owner resume when a hundred strangers race for the same run, and calls the model once', async () => {
    const backend = createScriptedBackendClient(async (request) =>
      answered(request, 'chat_request_user_input')
        ? done('Hello owner')
        : [functionCallChunk('chat_request_user_input', { user_message: 'Your name?' })],
    );
    const ports: AgentPorts = { backend, store: createMemoryInteractionStore() };
    const suspended = (await collect(run(start('Greet me'), ports, { owner: 'owner' }))).at(-1);
    if (suspended?.type !== 'waitForInput') throw new Error('expected waitForInput');
    const answer: ResumeResponse = { input: { role: 'user', parts: [{ text: 'Ada' }] } };
    const attempts = [
      ...Array.from({ length: 100 }, (_, index) => collect(resume(suspended.interactionId, answer, ports, { owner: `stranger-${index}` }))),
      collect(resume(suspended.interactionId, answer, ports, { owner: 'owner' })),
    ];
    const outcomes = await Promise.all(attempts);
    const owners = outcomes.at(-1) as RunEvent[];
    expect(owners.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    expect(outcomes.slice(0, 100).every((events) => events.length === 1 && events[0]?.type === 'error' && events[0].code === 'FORBIDDEN')).toBe(true);
    expect(backend.requests).toHaveLength(2);
  });

  it('stops a resumed run with CONFLICT when another process takes its record over, and leaves the record to it', async () => {
    let id = '';
    let store: InteractionStore = createMemoryInteractionStore();
    const backend = createScriptedBackendClient(async (request) => {
      if (!answered(request, 'chat_request_user_input')) return [functionCallChunk('chat_request_user_input', { user_message: 'Your name?' })];
      // Another process claims the record (as after an expired lease) while the model answers.
      const record = await store.get(id);
      if (record) await store.set(id, { meta: '{"taken":true}' }, record.version);
      return [thoughtChunk('one'), thoughtChunk('two'), thoughtChunk('three'), ...done('Hello')];
    }, { chunkDelayMs: 20 });
    store = createMemoryInteractionStore();
    const ports: AgentPorts = { backend, store };
    const suspended = (await collect(run(start('Greet me'), ports))).at(-1);
    if (suspended?.type !== 'waitForInput') throw new Error('expected waitForInput');
    id = suspended.interactionId;
    // A short lease: its heartbeat finds the record changed within a few milliseconds.
    const events = await collect(resume(id, { input: { role: 'user', parts: [{ text: 'Ada' }] } }, ports, { leaseMs: 15 }));
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'CONFLICT' });
    expect(events.some((event) => event.type === 'complete')).toBe(false);
    expect((await store.get(id))?.meta).toBe('{"taken":true}');
  });

  it('refuses to resume a record whose meta was edited into a form it never writes, claiming nothing', async () => {
    const backend = createScriptedBackendClient(() => [functionCallChunk('chat_request_user_input', { user_message: 'Your name?' })]);
    const store = createMemoryInteractionStore();
    const ports: AgentPorts = { backend, store };
    for (const meta of ['{"owner":5}', '{"lease":{"token":"t","until":"soon"}}', '{"sessionId":["s"]}']) {
      const suspended = (await collect(run(start('Greet me'), ports))).at(-1);
      if (suspended?.type !== 'waitForInput') throw new Error('expected waitForInput');
      const id = suspended.interactionId;
      const record = await store.get(id);
      await store.set(id, { meta }, record?.version ?? null);
      const events = await collect(resume(id, { input: { role: 'user', parts: [{ text: 'Ada' }] } }, ports));
      expect(events.at(-1), meta).toMatchObject({ type: 'error', code: 'STORE_ERROR', message: `Interaction ${id} has a record this runtime cannot read` });
      expect((await store.get(id))?.meta, meta).toBe(meta);
    }
  });

  it('refuses a second simultaneous resume with CONFLICT', async () => {
    const backend = createScriptedBackendClient(async (request) =>
      answered(request, 'chat_request_user_input')
        ? done('Hello')
        : [functionCallChunk('chat_request_user_input', { user_message: 'Your name?' })],
      { chunkDelayMs: 20 },
    );
    const ports: AgentPorts = { backend, store: createMemoryInteractionStore() };
    const suspended = (await collect(run(start('Greet me'), ports))).at(-1);
    if (suspended?.type !== 'waitForInput') throw new Error('expected waitForInput');
    const answer: ResumeResponse = { input: { role: 'user', parts: [{ text: 'Ada' }] } };
    const [first, second] = await Promise.all([
      collect(resume(suspended.interactionId, answer, ports)),
      collect(resume(suspended.interactionId, answer, ports)),
    ]);
    const codes = [first, second].map((events) => events.at(-1)).map((event) => (event?.type === 'error' ? event.code : event?.type));
    expect(codes.sort()).toEqual(['CONFLICT', 'complete']);
  });

  it('keeps a resumed run resumable after a fatal model error, under the same id', async () => {
    let refuse = true;
    const backend = createScriptedBackendClient(async (request) => {
      if (!answered(request, 'chat_request_user_input')) return [functionCallChunk('chat_request_user_input', { user_message: 'Name?' })];
      if (refuse) {
        refuse = false;
        throw new AgentError('MODEL_ERROR', 'Request contains an invalid argument.');
      }
      return done('Hello again');
    });
    const ports: AgentPorts = { backend, store: createMemoryInteractionStore() };
    const suspended = (await collect(run(start('Greet me'), ports))).at(-1);
    if (suspended?.type !== 'waitForInput') throw new Error('expected waitForInput');
    const failed = await collect(resume(suspended.interactionId, { input: { parts: [{ text: 'Ada' }] } }, ports));
    expect(failed.slice(-3)).toEqual([
      { type: 'finish' },
      { type: 'error', message: 'Agent error: Request contains an invalid argument.', code: 'MODEL_ERROR', interactionId: suspended.interactionId },
      { type: 'complete', result: { success: false } },
    ]);
    const retried = await collect(resume(suspended.interactionId, {}, ports));
    expect(retried.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
  });

  it('keeps checkpoints from the first turn when a run is given an id, so a stopped run goes on', async () => {
    const controller = new AbortController();
    const backend = createScriptedBackendClient(async (request) => {
      if (!answered(request, 'system_write_file')) {
        return [functionCallChunk('system_write_file', { file_name: 'notes', content: 'first turn' })];
      }
      if (backend.requests.length === 2) {
        controller.abort();
        return [thoughtChunk('…')];
      }
      return done('Wrote <file src="/mnt/notes.txt" />');
    }, { chunkDelayMs: 5 });
    const ports: AgentPorts = { backend, store: createMemoryInteractionStore() };
    const stopped = await collect(run(start('Write notes'), ports, { interactionId: 'session-1', signal: controller.signal }));
    expect(stopped.map((event) => event.type)).not.toContain('complete');
    const resumed = await collect(resume('session-1', {}, ports));
    const complete = resumed.at(-1);
    expect(complete).toMatchObject({ type: 'complete', result: { success: true } });
    expect(JSON.stringify(complete)).toContain('first turn');
    expect(backend.requests.filter((request) => !answered(request, 'system_write_file'))).toHaveLength(1);
  });

  it('records each answer as it comes while other calls of the turn run, and writes nothing twice', async () => {
    const waiting = new Map<string, () => void>();
    const later = (name: string) =>
      defineFunction({
        name,
        description: 'Answers when the test lets it.',
        parameters: z.object({}),
        handler: () => new Promise<JsonObject>((resolve) => waiting.set(name, () => resolve({ [name]: true }))),
      });
    const tools: FunctionGroup = {
      name: 'tools',
      functions: [
        defineFunction({ name: 'quick', description: 'Answers at once.', parameters: z.object({}), handler: async () => ({ quick: true }) }),
        later('medium'),
        later('slow'),
      ],
    };
    const memory = createMemoryInteractionStore();
    /** Each write of a state: per call of the turn in flight, whether its answer was in; `boundary` between turns. */
    const writes: Array<Record<string, boolean> | 'boundary'> = [];
    const store: InteractionStore = {
      get: (id) => memory.get(id),
      delete: (id, expected) => memory.delete(id, expected),
      set(id, write, expected) {
        if (write.state !== undefined) {
          const calls = (JSON.parse(write.state) as InteractionState).turn?.calls;
          writes.push(calls ? Object.fromEntries(calls.map((call) => [call.name, call.response !== undefined])) : 'boundary');
        }
        return memory.set(id, write, expected);
      },
    };
    const settle = async (count: number): Promise<void> => {
      for (let wait = 0; writes.length < count; wait += 1) {
        if (wait > 400) throw new Error(`expected ${count} writes, got ${JSON.stringify(writes)}`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    };
    // Chunks come a few milliseconds apart, so a call that answers at once does so while its turn streams.
    const backend = createScriptedBackendClient(
      [
        [functionCallChunk('quick', {}), functionCallChunk('medium', {}), functionCallChunk('slow', {})],
        [functionCallChunk('quick', {}), thoughtChunk('Waiting for the answer.')],
        [...done('All answered'), thoughtChunk('Done.')],
      ],
      { chunkDelayMs: 5 },
    );
    const events = collect(run(start('Ask them all'), { backend, store }, { interactionId: 'three-calls', functionGroups: [tools] }));
    // The run's first state, then the model's turn with what answered while it streamed.
    await settle(2);
    expect(writes).toEqual(['boundary', { quick: true, medium: false, slow: false }]);
    (waiting.get('medium') as () => void)();
    await settle(3);
    expect(writes[2]).toEqual({ quick: true, medium: true, slow: false });
    (waiting.get('slow') as () => void)();
    expect((await events).at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    // The last answer is written with the turn's end; a turn whose calls all answered while the
    // model streamed is written once, at its end; the last turn ends the run and writes nothing.
    expect(writes.slice(3)).toEqual(['boundary', 'boundary']);
  });
});

/** A memory store that fails every write of a state over a held record (a checkpoint) while `broken.on` is set. */
function checkpointsFailWhile(broken: { on: boolean }) {
  const memory = createMemoryInteractionStore();
  const store: InteractionStore = {
    get: (id) => memory.get(id),
    delete: (id, expected) => memory.delete(id, expected),
    async set(id, write, expected) {
      if (broken.on && write.state !== undefined && expected !== null) throw Object.assign(new Error('connection reset'), { code: 'ECONNRESET' });
      return memory.set(id, write, expected);
    },
  };
  return { store, memory };
}

describe('an answer the store could not save', () => {
  const answer: ResumeResponse = { input: { role: 'user', parts: [{ text: 'Ada' }] } };

  it('says the answer was not saved and to answer again, and the question waits unchanged for it', async () => {
    const broken = { on: false };
    const { store, memory } = checkpointsFailWhile(broken);
    const backend = createScriptedBackendClient((request) =>
      answered(request, 'chat_request_user_input') ? done('Hello Ada') : [functionCallChunk('chat_request_user_input', { user_message: 'Your name?' })],
    );
    const ports: AgentPorts = { backend, store };
    const question = (await collect(run(start('Greet me'), ports))).at(-1);
    if (question?.type !== 'waitForInput') throw new Error('expected waitForInput');
    const id = question.interactionId;
    const saved = (await memory.get(id))?.state;

    broken.on = true;
    const failed = await collect(resume(id, answer, ports));
    expect(failed.at(-1)).toEqual({
      type: 'error',
      message: `Could not checkpoint interaction ${id} (ECONNRESET) (the answer was not saved: interaction ${id} still waits for it; resume it with the answer again)`,
      code: 'STORE_ERROR',
      interactionId: id,
    });
    expect(failed.some((event) => event.type === 'complete' || event.type === 'finish')).toBe(false);
    expect(backend.requests).toHaveLength(1);
    broken.on = false;

    // The record is the question, as it was before the answer.
    expect((await memory.get(id))?.state).toBe(saved);

    const answeredAgain = await collect(resume(id, answer, ports));
    expect(answeredAgain.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    const heard = responsesIn(backend.requests.at(-1)).filter((response) => response.name === 'chat_request_user_input');
    expect(heard).toEqual([{ name: 'chat_request_user_input', response: { user_input: 'Ada' } }]);
  });

  it('runs nothing a consent allowed when the store could not record it, and the consent asked again runs it once', async () => {
    const charged: number[] = [];
    const charge = defineFunction({
      name: 'charge_card',
      description: 'Charges the card, once the user agreed.',
      parameters: z.object({ cents: z.number() }),
      sideEffects: true,
      async precondition(_args, context) {
        if (!context.consentsGranted.has('GET_ANY_WEBPAGE')) {
          throw new Suspend({ type: 'queryConsent', requestId: 'consent-1', consentType: 'GET_ANY_WEBPAGE', scope: {}, graphId: 'g' }, { precondition: true });
        }
      },
      handler: async ({ cents }) => {
        charged.push(cents);
        return { charged: cents };
      },
    });
    const options: RunOptions = { functionGroups: [{ name: 'card', functions: [charge] }] };
    const broken = { on: false };
    const { store } = checkpointsFailWhile(broken);
    const backend = createScriptedBackendClient((request) => (answered(request, 'charge_card') ? done('Charged') : [functionCallChunk('charge_card', { cents: 500 })]));
    const ports: AgentPorts = { backend, store };
    const asked = (await collect(run(start('Charge 5 euros'), ports, options))).at(-1);
    if (asked?.type !== 'queryConsent') throw new Error(`expected queryConsent, got ${asked?.type}`);
    const id = asked.interactionId;

    broken.on = true;
    const failed = await collect(resume(id, { consent: true }, ports, options));
    expect(failed).toEqual([
      {
        type: 'error',
        message: `Could not checkpoint interaction ${id} (ECONNRESET) (the answer was not saved: interaction ${id} still waits for it; resume it with the answer again)`,
        code: 'STORE_ERROR',
        interactionId: id,
      },
    ]);
    expect(charged).toEqual([]);
    broken.on = false;

    const consented = await collect(resume(id, { consent: true }, ports, options));
    expect(consented.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    expect(charged).toEqual([500]);
    expect(responsesIn(backend.requests.at(-1)).find((response) => response.name === 'charge_card')?.response).toEqual({ charged: 500 });
  });
});

/** A backend whose model turn is an async generator of chunks (so it can break or stall mid-answer). */
function flakyBackend(
  turn: (body: unknown, signal: AbortSignal | undefined) => AsyncGenerator<GenerateContentResponse>,
): BackendClient {
  const unsupported = () => Promise.reject(new AgentError('NOT_IMPLEMENTED', 'not in this test'));
  return {
    streamGenerateContent: (_model, body, signal) => turn(body, signal),
    executeStep: unsupported,
    uploadGeminiFile: unsupported,
    uploadBlobFile: unsupported,
  };
}
