import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { ERROR_CODES } from '../errors/index.js';
import { defineFunction, Suspend, type FunctionGroup } from '../functions/index.js';
import { createClaimedInteraction } from '../interactions/index.js';
import type { AgentPorts, BackendClient, InteractionStore } from '../ports/index.js';
import type { ResumeResponse } from '../protocol/resume-responses.js';
import type { RunEvent } from '../protocol/run-events.js';
import {
  createMemoryInteractionStore,
  createScriptedBackendClient,
  functionCallChunk,
  thoughtChunk,
  type ScriptedRequest,
} from '../testing/index.js';
import { answered, responsesIn } from '../../test/function-responses.js';
import { checkpointState } from '../../test/saved-states.js';
import { INTERACTION_STATE_VERSION, type InteractionState } from './interaction-state.js';
import { resume, run, type RunOptions } from './index.js';

async function collect(events: AsyncIterable<RunEvent>): Promise<RunEvent[]> {
  const all: RunEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const start = (text: string) => ({ segments: [{ type: 'text' as const, text }] });
const done = (text: string) => [functionCallChunk('system_objective_fulfilled', { objective_outcome: text })];
const ask = () => [functionCallChunk('chat_request_user_input', { user_message: 'Your name?' })];
const answer: ResumeResponse = { input: { role: 'user', parts: [{ text: 'Ada' }] } };

const codeOf = (event: RunEvent | undefined) => (event?.type === 'error' ? event.code : event?.type);

/** A side-effecting function that calls `onSend` each time it runs. */
function sendEmail(onSend: () => void) {
  return defineFunction({
    name: 'send_email',
    description: 'Sends an email.',
    parameters: z.object({}),
    sideEffects: true,
    handler: async () => {
      onSend();
      return { sent: true };
    },
  });
}


type Operation = 'get' | 'set' | 'delete';

/**
 * A memory store that fails one chosen operation (counted from 0 across get, set and delete):
 * `before` it is done, or `after` (it was applied, and the caller hears an error anyway).
 */
function failingStore(failAt: number, mode: 'before' | 'after') {
  const memory = createMemoryInteractionStore();
  const log: Operation[] = [];
  const step = async <T>(operation: Operation, action: () => Promise<T>): Promise<T> => {
    const index = log.push(operation) - 1;
    if (index !== failAt) return action();
    if (mode === 'after') await action();
    throw Object.assign(new Error('connection reset'), { code: 'ECONNRESET' });
  };
  const store: InteractionStore = {
    get: (id) => step('get', () => memory.get(id)),
    set: (id, write, expected) => step('set', () => memory.set(id, write, expected)),
    delete: (id, expected) => step('delete', () => memory.delete(id, expected)),
  };
  return { store, memory, log };
}

afterEach(() => {
  vi.useRealTimers();
});

/** Whether a write puts a new state over a held record: a checkpoint (saves and claims are not). */
const isCheckpoint = (write: { state?: string }, expected: string | null) => write.state !== undefined && expected !== null;

/**
 * A memory store that fails checkpoint writes (counted from 0) for which `fails` says so, before
 * applying them; `attempts` counts each checkpoint write tried, failed or not.
 */
function checkpointFailingStore(fails: (index: number) => boolean, onFailure: (id: string) => Promise<void> | void = () => undefined) {
  const memory = createMemoryInteractionStore();
  const counts = { attempts: 0, failed: 0 };
  const store: InteractionStore = {
    get: (id) => memory.get(id),
    delete: (id, expected) => memory.delete(id, expected),
    async set(id, write, expected) {
      if (isCheckpoint(write, expected) && fails(counts.attempts++)) {
        counts.failed += 1;
        await onFailure(id);
        throw Object.assign(new Error('connection reset'), { code: 'ECONNRESET' });
      }
      return memory.set(id, write, expected);
    },
  };
  return { store, memory, counts };
}

describe('durability of runs', () => {
  it('takes a crashed run over exactly once when twenty resumes race after its lease ran out', async () => {
    const store = createMemoryInteractionStore();
    await createClaimedInteraction(store, 'crashed', checkpointState(), { owner: 'alice', leaseMs: 20 });
    const backend = createScriptedBackendClient(() => done('Hello'), { chunkDelayMs: 5 });
    const ports: AgentPorts = { backend, store };
    expect(codeOf((await collect(resume('crashed', {}, ports, { owner: 'alice' }))).at(-1))).toBe('CONFLICT');
    await sleep(30);
    const outcomes = await Promise.all(Array.from({ length: 20 }, () => collect(resume('crashed', {}, ports, { owner: 'alice' }))));
    const codes = outcomes.map((events) => codeOf(events.at(-1)));
    expect(codes.filter((code) => code === 'complete')).toHaveLength(1);
    expect(codes.filter((code) => code === 'CONFLICT')).toHaveLength(19);
    expect(backend.requests).toHaveLength(1);
    expect(codeOf((await collect(resume('crashed', {}, ports, { owner: 'alice' }))).at(-1))).toBe('INTERACTION_NOT_FOUND');
  });

  it('survives the store failing at any one operation of a run, before or after applying it: coded errors, the answer and the side effect once, one completion', async () => {
    let sent = 0;
    const tools: FunctionGroup = {
      name: 'tools',
      functions: [
        defineFunction({ name: 'lookup', description: 'Looks up.', parameters: z.object({}), handler: async () => ({ found: true }) }),
        sendEmail(() => {
          sent += 1;
        }),
      ],
    };
    const script = (request: ScriptedRequest) => {
      if (!answered(request, 'send_email')) return [functionCallChunk('lookup', {}), functionCallChunk('send_email', {})];
      if (!answered(request, 'chat_request_user_input')) return ask();
      return done('Done');
    };
    // Leases are counted on a clock the test moves: no renewal falls inside a run, and a client
    // waits a lease out at once.
    vi.useFakeTimers({ toFake: ['Date'], now: 1_700_000_000_000 });
    const options: RunOptions = { functionGroups: [tools], leaseMs: 60_000, interactionId: 'run-1', modelPolicy: { maxAttempts: 1 } };
    const { interactionId: _first, ...resumeOptions } = options;

    /** Runs, then resumes as a client would (with the id it was last given, waiting out a lease), until the run completes. */
    const drive = async (store: InteractionStore) => {
      sent = 0;
      const backend = createScriptedBackendClient(script);
      const ports: AgentPorts = { backend, store };
      const segments: RunEvent[][] = [await collect(run(start('Email Ada, then greet her'), ports, options))];
      // A start that failed before its first request saved nothing: the client starts again.
      if (!segments[0]?.some((event) => event.type === 'sendRequest') && codeOf((await collect(resume('run-1', {}, ports))).at(-1)) === 'INTERACTION_NOT_FOUND') {
        segments.push(await collect(run(start('Email Ada, then greet her'), ports, options)));
      }
      const ids = new Set(['run-1']);
      let current = 'run-1';
      for (let attempt = 0; attempt < 12; attempt += 1) {
        const last = segments.at(-1)?.at(-1);
        if (last?.type === 'complete' && last.result.success) break;
        const reported = segments.at(-1)?.find((event) => event.type === 'error' && event.interactionId !== undefined);
        if (last?.type === 'waitForInput') current = last.interactionId;
        else if (reported?.type === 'error' && reported.interactionId) current = reported.interactionId;
        else if (last?.type === 'error' && last.code === 'CONFLICT') vi.setSystemTime(Date.now() + 61_000);
        ids.add(current);
        segments.push(await collect(resume(current, answer, ports, resumeOptions)));
      }
      return { segments, ids, backend, ports };
    };

    const clean = failingStore(-1, 'before');
    const reference = await drive(clean.store);
    expect(reference.segments).toHaveLength(2);
    const operations = clean.log.length;
    expect(operations).toBeGreaterThan(8);

    for (const mode of ['before', 'after'] as const) {
      for (let failAt = 0; failAt < operations; failAt += 1) {
        const where = `${mode} ${failAt} (${clean.log[failAt]})`;
        const { store, memory } = failingStore(failAt, mode);
        const { segments, ids, backend, ports } = await drive(store);
        const events = segments.flat();
        // Every failure is coded, and the run completed exactly once.
        for (const event of events) if (event.type === 'error') expect(ERROR_CODES, where).toContain(event.code);
        expect(events.filter((event) => event.type === 'complete' && event.result.success), where).toHaveLength(1);
        expect(segments.at(-1)?.at(-1), where).toMatchObject({ type: 'complete', result: { success: true } });
        // The side effect ran once, and the model heard the answer once.
        expect(sent, where).toBe(1);
        const heard = responsesIn(backend.requests.at(-1)).filter((response) => response.name === 'chat_request_user_input');
        expect(heard, where).toEqual([{ name: 'chat_request_user_input', response: { user_input: 'Ada' } }]);
        // Finished: no id it was ever given resumes it again.
        for (const id of ids) {
          expect(codeOf((await collect(resume(id, answer, { ...ports, store: memory }, resumeOptions))).at(-1)), `${where}: ${id}`).toBe('INTERACTION_NOT_FOUND');
        }
      }
    }
  });

  it('leaves a run whose reader stops at any point resumable, its work kept, with no timer or listener left behind', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const tools: FunctionGroup = {
      name: 'tools',
      functions: [
        defineFunction({
          name: 'wait_a_bit',
          description: 'Takes a moment.',
          parameters: z.object({}),
          handler: async () => {
            await sleep(20);
            return { waited: true };
          },
        }),
      ],
    };
    const script = (request: ScriptedRequest) => {
      if (!answered(request, 'system_write_file')) return [thoughtChunk('Notes first'), functionCallChunk('system_write_file', { file_name: 'notes', content: 'first turn' })];
      if (!answered(request, 'wait_a_bit')) return [thoughtChunk('Now wait'), thoughtChunk('a little'), functionCallChunk('wait_a_bit', {})];
      if (!answered(request, 'chat_request_user_input')) return ask();
      return done('Hello Ada: <file src="/mnt/notes.txt" />');
    };
    const points = ['before the first request', 'while the model streams', 'while a function runs', 'while the question is saved', 'while the record is removed'] as const;
    for (const how of ['break', 'abort'] as const) {
      for (const point of points) {
        const where = `${how} ${point}`;
        const memory = createMemoryInteractionStore();
        let stop: () => void = () => undefined;
        const store: InteractionStore = {
          get: (id) => memory.get(id),
          async set(id, write, expected) {
            if (point === 'while the question is saved' && expected === null && id !== 'stop-1') {
              stop();
              await sleep(5);
            }
            return memory.set(id, write, expected);
          },
          async delete(id, expected) {
            if (point === 'while the record is removed' && id === 'stop-1') {
              stop();
              await sleep(5);
            }
            return memory.delete(id, expected);
          },
        };
        const backend = createScriptedBackendClient(script, { chunkDelayMs: 2 });
        const ports: AgentPorts = { backend, store };
        const controller = new AbortController();
        // The listeners the run keeps on the caller's signal.
        const listening = new Set<unknown>();
        const add = controller.signal.addEventListener.bind(controller.signal);
        const remove = controller.signal.removeEventListener.bind(controller.signal);
        controller.signal.addEventListener = (...args: Parameters<AbortSignal['addEventListener']>) => {
          listening.add(args[1]);
          add(...args);
        };
        controller.signal.removeEventListener = (...args: Parameters<AbortSignal['removeEventListener']>) => {
          listening.delete(args[1]);
          remove(...args);
        };
        const events = run(start('Write notes, wait, then greet me'), ports, { interactionId: 'stop-1', signal: controller.signal, functionGroups: [tools] });
        stop = () => {
          if (how === 'break') void events.return(undefined);
          else controller.abort();
        };
        const seen: RunEvent[] = [];
        for await (const event of events) {
          seen.push(event);
          const calls = seen.filter((candidate) => candidate.type === 'functionCall').length;
          if (point === 'before the first request' && event.type === 'start') stop();
          if (point === 'while the model streams' && event.type === 'thought' && event.text === 'a little') stop();
          if (point === 'while a function runs' && event.type === 'functionCall' && calls === 2) stop();
        }
        // The run notices, and lets go of its record.
        for (let wait = 0; (await memory.get('stop-1'))?.meta.includes('lease') && wait < 100; wait += 1) await sleep(5);
        expect(vi.getTimerCount(), where).toBe(0);
        expect(listening.size, where).toBe(0);

        // What the reader was told, or else the id it started with, goes on to the end.
        const told = seen.at(-1)?.type === 'waitForInput' ? (seen.at(-1) as { interactionId: string }).interactionId : 'stop-1';
        let last = (await collect(resume(told, answer, ports, { functionGroups: [tools] }))).at(-1);
        if (last?.type === 'waitForInput') last = (await collect(resume(last.interactionId, answer, ports, { functionGroups: [tools] }))).at(-1);
        expect(last, where).toMatchObject({ type: 'complete', result: { success: true } });
        expect(JSON.stringify(last), where).toContain('first turn');
        const heard = responsesIn(backend.requests.at(-1)).filter((response) => response.name === 'chat_request_user_input');
        expect(heard, where).toEqual([{ name: 'chat_request_user_input', response: { user_input: 'Ada' } }]);
        expect(codeOf((await collect(resume('stop-1', {}, ports))).at(-1)), where).toBe('INTERACTION_NOT_FOUND');
        expect(vi.getTimerCount(), where).toBe(0);
      }
    }
  });

  it('never runs a side-effecting call on a holder that lost its record: the process that took the run over runs it once', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: 1_700_000_000_000 });
    const sent: string[] = [];
    const mail = (who: string): FunctionGroup => ({ name: 'mail', functions: [sendEmail(() => sent.push(who))] });
    const store = createMemoryInteractionStore();
    let modelAsked: () => void = () => undefined;
    const asked = new Promise<void>((resolve) => (modelAsked = resolve));
    let answerA: () => void = () => undefined;
    const slowModel = createScriptedBackendClient(async (request) => {
      if (answered(request, 'send_email')) return done('Sent');
      modelAsked();
      await new Promise<void>((resolve) => (answerA = resolve));
      return [functionCallChunk('send_email', {})];
    });
    const first = collect(run(start('Email Ada'), { backend: slowModel, store }, { interactionId: 'mail-1', functionGroups: [mail('first')] }));
    await asked;
    // The first process stalls past its lease: another one takes the run over and finishes it.
    vi.setSystemTime(Date.now() + 120_000);
    const otherModel = createScriptedBackendClient((request) => (answered(request, 'send_email') ? done('Sent') : [functionCallChunk('send_email', {})]));
    const other = await collect(resume('mail-1', {}, { backend: otherModel, store }, { functionGroups: [mail('other')] }));
    expect(other.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    // The first process's model answers at last: it finds the record gone and stops before sending.
    answerA();
    const late = await first;
    expect(codeOf(late.at(-1))).toBe('CONFLICT');
    expect(late.some((event) => event.type === 'complete')).toBe(false);
    expect(sent).toEqual(['other']);
  });

  it('never runs a side-effecting call twice when the process that ran it after the user consented died', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setInterval', 'clearInterval'], now: 1_700_000_000_000 });
    const charged: string[] = [];
    let hang = true;
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
        charged.push(`${cents}`);
        // The process running it dies here.
        if (hang) await new Promise(() => undefined);
        return { charged: cents };
      },
    });
    const tools: FunctionGroup = { name: 'card', functions: [charge] };
    const backend = createScriptedBackendClient((request) => (answered(request, 'charge_card') ? done('Charged') : [functionCallChunk('charge_card', { cents: 500 })]));
    const store = createMemoryInteractionStore();
    const ports: AgentPorts = { backend, store };
    const asked = (await collect(run(start('Charge 5 euros'), ports, { functionGroups: [tools] }))).at(-1);
    if (asked?.type !== 'queryConsent') throw new Error(`expected queryConsent, got ${asked?.type}`);

    const dying = resume(asked.interactionId, { consent: true }, ports, { functionGroups: [tools], leaseMs: 3_000 });
    const reading = collect(dying);
    while (charged.length === 0) await sleep(1);
    // It runs longer than its lease, which is renewed meanwhile: a second answer is refused, not run.
    await vi.advanceTimersByTimeAsync(10_000);
    expect(codeOf((await collect(resume(asked.interactionId, { consent: true }, ports, { functionGroups: [tools] }))).at(-1))).toBe('CONFLICT');

    // Its lease runs out; the user's answer comes again, to another process.
    vi.setSystemTime(Date.now() + 120_000);
    hang = false;
    const again = await collect(resume(asked.interactionId, { consent: true }, ports, { functionGroups: [tools] }));
    expect(again.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    expect(charged).toEqual(['500']);
    const told = responsesIn(backend.requests.at(-1)).find((response) => response.name === 'charge_card');
    expect(told?.response.error).toContain('was running when the run stopped and was not run again');
    await dying.return(undefined);
    void reading;
  });

  it('refuses a record edited by hand, by another version, or bigger than its store keeps, naming what is wrong, and runs nothing', async () => {
    const model: Record<string, unknown> = { role: 'model', parts: [{ functionCall: { name: 'chat_request_user_input', args: {} } }] };
    const base = checkpointState() as unknown as Record<string, unknown>;
    const suspended = { ...base, kind: 'suspend', contents: [...(base.contents as unknown[]), model], calls: [{ callId: 'c1', name: 'chat_request_user_input', args: {} }], pendingCallId: 'c1' };
    const cases: Array<[string, unknown, string]> = [
      ['a future format', { ...base, version: INTERACTION_STATE_VERSION + 1 }, 'it was saved in format 3; this runtime reads format 2'],
      ['no version', { ...base, version: undefined }, 'it was saved in format undefined'],
      ['not an object', ['contents'], 'not an object'],
      ['a content without parts', { ...base, contents: [{ role: 'user', text: 'hi' }] }, 'contents[0]: expected an object with a parts array'],
      ['a part that is not an object', { ...base, contents: [{ role: 'user', parts: ['hi'] }] }, 'contents[0].parts[0]: expected object'],
      ['a turn count that is not a count', { ...base, turnCount: -3 }, 'turnCount: expected a whole number, 0 or more'],
      ['consents that are not names', { ...base, consentsGranted: [true] }, 'consentsGranted: expected array of strings'],
      ['flags that are a list', { ...base, flags: ['useMemory'] }, 'flags: expected object'],
      ['a graph that is a string', { ...base, graph: 'https://example.com' }, 'graph: expected object'],
      ['a call without a name', { ...suspended, calls: [{ callId: 'c1', args: {} }] }, 'calls[0].name: expected string'],
      ['a pending call that is not one of the calls', { ...suspended, pendingCallId: 'c9' }, 'pendingCallId: expected the callId of one of the calls'],
      ['calls without the turn they answer', { ...suspended, contents: base.contents }, "calls: the last content is not the model's turn they answer"],
      ['a turn in flight whose calls are not a list', { ...base, contents: [...(base.contents as unknown[]), model], turn: { calls: {} } }, 'turn.calls: expected array'],
      ['a recorded response that is not an object', { ...base, contents: [...(base.contents as unknown[]), model], turn: { calls: [{ callId: 'c1', name: 'x', args: {}, response: 'done' }] } }, 'turn.calls[0].response: expected object'],
      ['a damaged file system', { ...base, fileSystem: 'none' }, 'Invalid file system snapshot'],
    ];
    const backend = createScriptedBackendClient(() => done('Should not run'));
    for (const [label, state, problem] of cases) {
      const store = createMemoryInteractionStore();
      await store.set('edited', { meta: '{}', state: JSON.stringify(state) }, null);
      const before = await store.get('edited');
      for (let attempt = 0; attempt < 2; attempt += 1) {
        const events = await collect(resume('edited', answer, { backend, store }));
        expect(events, label).toHaveLength(1);
        expect(events[0], label).toMatchObject({ type: 'error', code: 'STORE_ERROR' });
        expect((events[0] as { message: string }).message, label).toContain(problem);
      }
      // Left as it was, and free: nothing was claimed for good or written.
      expect((await store.get('edited'))?.state, label).toBe(before?.state);
      expect((await store.get('edited'))?.meta, label).toBe('{}');
    }
    const small = createMemoryInteractionStore({ maxStateBytes: 10_000 });
    await small.set('huge', { meta: '{}', state: JSON.stringify(checkpointState({ flags: { note: 'x'.repeat(20_000) } })) }, null);
    const huge = await collect(resume('huge', {}, { backend, store: small }));
    expect(huge).toEqual([
      expect.objectContaining({ type: 'error', code: 'STORE_ERROR', message: expect.stringContaining('more than the limit of 10000 bytes') }),
    ]);
    expect(backend.requests).toHaveLength(0);
  });

  it('stops a run whose store turned too slow to renew its lease before the lease ends, and leaves the record to the process that takes it over', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setInterval', 'clearInterval'], now: 1_700_000_000_000 });
    const memory = createMemoryInteractionStore();
    let slow = false;
    const stalled: Array<() => void> = [];
    const slowStore: InteractionStore = {
      get: (id) => memory.get(id),
      async set(id, write, expected) {
        if (slow) await new Promise<void>((resolve) => stalled.push(resolve));
        return memory.set(id, write, expected);
      },
      delete: (id, expected) => memory.delete(id, expected),
    };
    let modelAsked: () => void = () => undefined;
    const asked = new Promise<void>((resolve) => (modelAsked = resolve));
    const unsupported = () => Promise.reject(new Error('not in this test'));
    let requests = 0;
    let cancelled = 0;
    // A model that answers nothing until its request is cancelled, as an HTTP model does.
    const backend: BackendClient = {
      async *streamGenerateContent(_model, _body, signal) {
        requests += 1;
        modelAsked();
        await new Promise((resolve) => signal?.addEventListener('abort', resolve, { once: true }));
        cancelled += 1;
        throw signal?.reason;
      },
      executeStep: unsupported,
      uploadGeminiFile: unsupported,
      uploadBlobFile: unsupported,
    };
    const first = collect(run(start('Work'), { backend, store: slowStore }, { interactionId: 'slow-1', leaseMs: 3_000 }));
    await asked;
    slow = true;
    // One beat renews (the write stalls); at the next, the lease would end before another: it stops.
    await vi.advanceTimersByTimeAsync(2_000);
    const events = await first;
    expect(codeOf(events.at(-1))).toBe('CONFLICT');
    expect(cancelled).toBe(1);
    expect(vi.getTimerCount()).toBe(0);

    // Another process takes the run over once the lease ran out; the stalled write reaches the store after.
    vi.setSystemTime(Date.now() + 5_000);
    const other = createScriptedBackendClient(() => [thoughtChunk('Taking over'), ...done('Finished elsewhere')]);
    expect((await collect(resume('slow-1', {}, { backend: other, store: memory }))).at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    for (const resumeWrite of stalled.splice(0)) resumeWrite();
    await sleep(5);
    expect(await memory.get('slow-1')).toBeUndefined();
    expect(requests).toBe(1);
  });

  it('goes on when a checkpoint written in the background fails: nothing is left unhandled, and the turn end saves it all', async () => {
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', listener);
    try {
      const later = (name: string, ms: number) =>
        defineFunction({ name, description: 'Answers after a while.', parameters: z.object({}), handler: async () => (await sleep(ms), { [name]: true }) });
      const tools: FunctionGroup = { name: 'tools', functions: [later('medium', 10), later('slow', 40)] };
      const memory = createMemoryInteractionStore();
      let failed = 0;
      const store: InteractionStore = {
        get: (id) => memory.get(id),
        delete: (id, expected) => memory.delete(id, expected),
        async set(id, write, expected) {
          // The write of the medium call's answer while the slow one still runs.
          const calls = write.state === undefined ? undefined : (JSON.parse(write.state) as InteractionState).turn?.calls;
          if (calls?.find((call) => call.name === 'medium')?.response && !calls.find((call) => call.name === 'slow')?.response) {
            failed += 1;
            throw new Error('connection reset');
          }
          return memory.set(id, write, expected);
        },
      };
      const backend = createScriptedBackendClient([[functionCallChunk('medium', {}), functionCallChunk('slow', {})], done('Both answered')]);
      const events = await collect(run(start('Ask both'), { backend, store }, { interactionId: 'background-1', functionGroups: [tools] }));
      await sleep(10);
      expect(failed).toBe(1);
      expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
      expect(responsesIn(backend.requests[1]).map((response) => response.name)).toEqual(['medium', 'slow']);
      expect(await memory.get('background-1')).toBeUndefined();
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', listener);
    }
  });
});

describe('a checkpoint the store fails', () => {
  const mail = (sent: string[]): FunctionGroup => ({ name: 'mail', functions: [sendEmail(() => sent.push('sent'))] });
  const script = (request: ScriptedRequest) => {
    if (!answered(request, 'send_email')) return [functionCallChunk('send_email', {})];
    if (!answered(request, 'chat_request_user_input')) return ask();
    return done('Done');
  };

  it('is written again when the store fails it once, wherever that falls: the run goes on without an error, the email sent once, the answer heard once', async () => {
    /** Runs with checkpoints, answers the question, and returns every event and what was sent. */
    const drive = async (store: InteractionStore) => {
      const sent: string[] = [];
      const backend = createScriptedBackendClient(script);
      const ports: AgentPorts = { backend, store };
      const options: RunOptions = { interactionId: 'flaky-1', functionGroups: [mail(sent)] };
      const first = await collect(run(start('Email Ada, then greet her'), ports, options));
      const question = first.at(-1);
      if (question?.type !== 'waitForInput') return { events: first, sent, backend };
      const second = await collect(resume(question.interactionId, answer, ports, { functionGroups: [mail(sent)] }));
      return { events: [...first, ...second], sent, backend };
    };
    const clean = checkpointFailingStore(() => false);
    await drive(clean.store);
    const writes = clean.counts.attempts;
    // The turn with the email, its end, and the answer.
    expect(writes).toBeGreaterThanOrEqual(3);

    for (let failAt = 0; failAt < writes; failAt += 1) {
      const { store, memory, counts } = checkpointFailingStore((index) => index === failAt);
      const { events, sent, backend } = await drive(store);
      expect(counts.failed, `write ${failAt}`).toBe(1);
      expect(events.filter((event) => event.type === 'error'), `write ${failAt}`).toEqual([]);
      expect(events.at(-1), `write ${failAt}`).toMatchObject({ type: 'complete', result: { success: true } });
      expect(sent, `write ${failAt}`).toEqual(['sent']);
      const heard = responsesIn(backend.requests.at(-1)).filter((response) => response.name === 'chat_request_user_input');
      expect(heard, `write ${failAt}`).toEqual([{ name: 'chat_request_user_input', response: { user_input: 'Ada' } }]);
      expect(await memory.get('flaky-1'), `write ${failAt}`).toBeUndefined();
    }
  });

  it('stops the run after three attempts when the store keeps failing, saying it can be resumed under its id, and resuming goes on from the last checkpoint', async () => {
    const sent: string[] = [];
    let broken = true;
    // The first checkpoint (the turn with the email, before it is sent) is written; none after it.
    const { store, memory, counts } = checkpointFailingStore((index) => broken && index > 0);
    const backend = createScriptedBackendClient((request) => (answered(request, 'send_email') ? done('Sent') : [functionCallChunk('send_email', {})]));
    const ports: AgentPorts = { backend, store };
    const events = await collect(run(start('Email Ada'), ports, { interactionId: 'down-1', functionGroups: [mail(sent)] }));
    expect(counts.failed).toBe(3);
    expect(events.at(-1)).toEqual({
      type: 'error',
      message: 'Could not checkpoint interaction down-1 (ECONNRESET) (the run was saved; resume interaction down-1 to retry)',
      code: 'STORE_ERROR',
      interactionId: 'down-1',
    });
    // Not a failed run: nothing says it ended.
    expect(events.some((event) => event.type === 'complete' || event.type === 'finish')).toBe(false);
    expect(sent).toEqual(['sent']);
    expect((await memory.get('down-1'))?.meta).not.toContain('lease');

    broken = false;
    const resumed = await collect(resume('down-1', {}, ports, { functionGroups: [mail(sent)] }));
    expect(resumed.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    // The email was recorded as started before it ran: it is reported, not sent again.
    expect(sent).toEqual(['sent']);
    expect(responsesIn(backend.requests.at(-1))[0]?.response.error).toContain('was running when the run stopped and was not run again');
  });

  it('never writes again into a record another process took over while a failed checkpoint waited, and runs nothing more', async () => {
    const sent: string[] = [];
    const theirs = { meta: JSON.stringify({ lease: { token: 'other-process', until: Date.now() + 60_000 } }), state: JSON.stringify(checkpointState()) };
    const { store, memory, counts } = checkpointFailingStore(
      (index) => index === 0,
      async (id) => {
        // Another process takes the record over just as the store fails this one's write.
        const record = await memory.get(id);
        await memory.set(id, theirs, record?.version ?? null);
      },
    );
    const backend = createScriptedBackendClient((request) => (answered(request, 'send_email') ? done('Sent') : [functionCallChunk('send_email', {})]));
    const events = await collect(run(start('Email Ada'), { backend, store }, { interactionId: 'taken-1', functionGroups: [mail(sent)] }));
    expect(codeOf(events.at(-1))).toBe('CONFLICT');
    expect(events.some((event) => event.type === 'complete')).toBe(false);
    expect(counts.failed).toBe(1);
    expect(sent).toEqual([]);
    const record = await memory.get('taken-1');
    expect({ meta: record?.meta, state: record?.state }).toEqual(theirs);
  });

  it('is not tried again once the run was stopped, and the run stays resumable', async () => {
    const sent: string[] = [];
    const controller = new AbortController();
    const { store, counts } = checkpointFailingStore(
      (index) => index === 0,
      () => controller.abort(),
    );
    const backend = createScriptedBackendClient((request) => (answered(request, 'send_email') ? done('Sent') : [functionCallChunk('send_email', {})]));
    const ports: AgentPorts = { backend, store };
    const events = await collect(run(start('Email Ada'), ports, { interactionId: 'stopped-1', signal: controller.signal, functionGroups: [mail(sent)] }));
    expect(events.some((event) => event.type === 'complete')).toBe(false);
    expect(counts).toEqual({ attempts: 1, failed: 1 });
    expect(sent).toEqual([]);
    const resumed = await collect(resume('stopped-1', {}, ports, { functionGroups: [mail(sent)] }));
    expect(resumed.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    expect(sent).toEqual(['sent']);
  });
});
