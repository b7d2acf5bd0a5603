import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AgentError } from '../errors/index.js';
import { defineFunction, type FunctionGroup } from '../functions/index.js';
import { claimInteraction, createClaimedInteraction } from '../interactions/index.js';
import type { AgentPorts, InteractionStore, SessionLog } from '../ports/index.js';
import type { ResumeResponse } from '../protocol/resume-responses.js';
import type { RunEvent } from '../protocol/run-events.js';
import { checkpointState } from '../../test/saved-states.js';
import { resume } from '../run/index.js';
import {
  createMemoryEventBus,
  createMemoryInteractionStore,
  createMemorySessionLog,
  createScriptedBackendClient,
  functionCallChunk,
  thoughtChunk,
  type ScriptedBackendClient,
  type ScriptedRequest,
} from '../testing/index.js';
import { createSessionService, type SessionContext, type SessionEvent, type SessionService } from './session-service.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const greetMe = { segments: [{ type: 'text' as const, text: 'Greet me' }] };
const answer: ResumeResponse = { input: { role: 'user', parts: [{ text: 'Ada' }] } };
const done = (text: string) => [functionCallChunk('system_objective_fulfilled', { objective_outcome: text })];
const userInputOf = (request: ScriptedRequest) => request.body.contents.at(-1)?.parts[0]?.functionResponse?.response?.user_input;

/** A model that thinks, asks for a name, then greets; `chunkDelayMs` between chunks. */
function greeter(chunkDelayMs = 0): ScriptedBackendClient {
  return createScriptedBackendClient((request) => {
    const name = userInputOf(request);
    return typeof name === 'string'
      ? [thoughtChunk('Greeting'), thoughtChunk('warmly'), ...done(`Hello ${name}`)]
      : [thoughtChunk('Asking'), thoughtChunk('politely'), functionCallChunk('chat_request_user_input', { user_message: 'Name?' })];
  }, { chunkDelayMs });
}

/**
 * A log whose second append fails, having written `written`: nothing (a blip), the events (a
 * timeout after the write), or other events in their place (another writer's).
 */
function secondAppendFails(memory: SessionLog, written: 'nothing' | 'the events' | 'other events'): { log: SessionLog; appends: () => number } {
  let appends = 0;
  const log: SessionLog = {
    ...memory,
    async append(id, events) {
      appends += 1;
      if (appends !== 2) return memory.append(id, events);
      if (written === 'the events') await memory.append(id, events);
      if (written === 'other events') await memory.append(id, events.map(() => '{"thought":{"text":"from elsewhere"}}'));
      throw new AgentError('STORE_ERROR', 'The session log timed out');
    },
  };
  return { log, appends: () => appends };
}

async function readAll(service: SessionService, sessionId: string, after = -1): Promise<SessionEvent[]> {
  const events: SessionEvent[] = [];
  for await (const event of service.events(sessionId, after)) events.push(event);
  return events;
}

async function collect(events: AsyncIterable<RunEvent>): Promise<RunEvent[]> {
  const all: RunEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

const codeOf = (promise: Promise<unknown>) =>
  promise.then(
    () => 'ok',
    (error: unknown) => (error as { code?: string }).code ?? String(error),
  );

const typeOf = (event: SessionEvent) => Object.keys(JSON.parse(event.json) as object)[0];

/** A run's first checkpoint, as an instance that started it and died left it. */
const firstCheckpoint = checkpointState();

describe('durability of sessions', () => {
  it('lets exactly one of two resumes at the same moment run, through the service on two instances or through resume(), and refuses the other with CONFLICT', async () => {
    for (const second of ['service', 'resume()'] as const) {
      const log = createMemorySessionLog();
      const bus = createMemoryEventBus();
      const backend = greeter(2);
      const ports: AgentPorts = { backend, store: createMemoryInteractionStore() };
      const a = createSessionService({ log, bus });
      const b = createSessionService({ log, bus });
      const sessionId = await a.start(greetMe, { ports });
      await readAll(a, sessionId);
      const { interactionId } = (await log.get(sessionId)) as { interactionId: string };
      const outcomes = await Promise.all([
        codeOf(a.resume(sessionId, answer, { ports })),
        second === 'service'
          ? codeOf(b.resume(sessionId, answer, { ports }))
          : collect(resume(interactionId, answer, ports)).then((events) => {
              const last = events.at(-1);
              return last?.type === 'error' ? last.code : 'ok';
            }),
      ]);
      expect(outcomes.sort(), second).toEqual(['CONFLICT', 'ok']);
      await readAll(a, sessionId);
      await sleep(20);
      // One segment ran: the model was asked once more, with the answer.
      expect(backend.requests.map((request) => userInputOf(request) ?? null), second).toEqual([null, 'Ada']);
    }
  });

  it('takes a session whose instance died over exactly once, however many instances notice it or are asked to resume it at once', async () => {
    const log = createMemorySessionLog();
    const bus = createMemoryEventBus();
    const store = createMemoryInteractionStore();
    await log.create('orphan', { interactionId: 'orphan', owner: 'alice' });
    // Its instance claimed the run, wrote its first checkpoint and died: the lease ran out.
    await createClaimedInteraction(store, 'orphan', firstCheckpoint, { owner: 'alice', sessionId: 'orphan', leaseMs: 1_000, now: () => Date.now() - 60_000 });
    const backends = Array.from({ length: 4 }, () => greeter(1));
    const services = backends.map((backend) =>
      createSessionService({ log, bus, livenessMs: 30, pickUpContext: () => ({ ports: { backend, store }, owner: 'alice' }) }),
    );
    const readers = services.slice(0, 3).map((service) => readAll(service, 'orphan'));
    const owner = codeOf((services[3] as SessionService).resume('orphan', {}, { ports: { backend: backends[3] as ScriptedBackendClient, store }, owner: 'alice' }));
    const read = await Promise.all(readers);
    await owner;
    await readAll(services[0] as SessionService, 'orphan');
    // One instance ran it, asking its model once; every reader saw the same events, once each.
    expect(backends.map((backend) => backend.requests.length).sort()).toEqual([0, 0, 0, 1]);
    const replay = await readAll(services[0] as SessionService, 'orphan');
    expect(replay.map((event) => event.index)).toEqual(replay.map((_event, at) => at));
    for (const events of read) expect(events).toEqual(replay.slice(0, events.length));
    expect(typeOf(replay.at(-1) as SessionEvent)).toBe('waitForInput');
    expect((await log.get('orphan'))?.status).toBe('suspended');
  });

  it('hands every event exactly once, in order, to readers that reconnect after each event, on the running instance and on another', async () => {
    const log = createMemorySessionLog();
    const bus = createMemoryEventBus();
    const ports: AgentPorts = { backend: greeter(3), store: createMemoryInteractionStore() };
    const running = createSessionService({ log, bus });
    const elsewhere = createSessionService({ log, bus });
    const sessionId = await running.start(greetMe, { ports });
    const reconnecting = async (service: SessionService) => {
      const seen: SessionEvent[] = [];
      for (let cursor = -1, reads = 0; reads < 200; reads += 1) {
        let got: SessionEvent | undefined;
        for await (const event of service.events(sessionId, cursor)) {
          got = event;
          break;
        }
        if (!got) {
          if ((await log.get(sessionId))?.status !== 'running') break;
          continue;
        }
        seen.push(got);
        cursor = got.index;
      }
      return seen;
    };
    const [local, remote] = await Promise.all([reconnecting(running), reconnecting(elsewhere)]);
    const replay = await readAll(elsewhere, sessionId);
    expect(replay.map((event) => event.index)).toEqual(replay.map((_event, at) => at));
    expect(local).toEqual(replay);
    expect(remote).toEqual(replay);
    expect(typeOf(replay.at(-1) as SessionEvent)).toBe('waitForInput');

    // Past the end there is nothing, and a cursor that is no index is refused rather than misnumbering.
    expect(await readAll(elsewhere, sessionId, replay.length - 1)).toEqual([]);
    expect(await readAll(elsewhere, sessionId, replay.length + 50)).toEqual([]);
    for (const after of [-2, 1.5, Number.NaN]) expect(await codeOf(readAll(elsewhere, sessionId, after)), String(after)).toBe('BAD_REQUEST');

    // While it runs, a cursor past the end gets only what comes after it.
    await running.resume(sessionId, answer, { ports });
    const beyond = replay.length + 2;
    const tail = await readAll(elsewhere, sessionId, beyond);
    const all = await readAll(elsewhere, sessionId);
    expect(tail).toEqual(all.slice(beyond + 1));
    expect(typeOf(all.at(-1) as SessionEvent)).toBe('complete');
  });

  it('cancels a session for good in any phase: nothing runs after it, and nothing can resume it', async () => {
    const phases = [
      'before the first request',
      'while the model streams',
      'while a function runs',
      'while its question is saved',
      'while it waits for an answer',
      'while it is paused',
      'while its instance is dead',
    ] as const;
    for (const phase of phases) {
      const log = createMemorySessionLog();
      const bus = createMemoryEventBus();
      const memory = createMemoryInteractionStore();
      let service: SessionService | undefined;
      let sessionId = '';
      let context: SessionContext | undefined;
      const cancelHere = async () => {
        await (service as SessionService).cancel(sessionId, context as SessionContext);
      };
      const store: InteractionStore = {
        get: (id) => memory.get(id),
        async set(id, write, expected) {
          if (phase === 'while its question is saved' && expected === null && id !== sessionId) await cancelHere();
          return memory.set(id, write, expected);
        },
        delete: (id, expected) => memory.delete(id, expected),
      };
      let functionStarted: () => void = () => undefined;
      const functionRunning = new Promise<void>((resolve) => (functionStarted = resolve));
      const tools: FunctionGroup = {
        name: 'tools',
        functions: [
          defineFunction({
            name: 'look_around',
            description: 'Takes a moment.',
            parameters: z.object({}),
            handler: async () => {
              functionStarted();
              await sleep(30);
              return { seen: true };
            },
          }),
        ],
      };
      let pausedOnce = false;
      const backend = createScriptedBackendClient(async (request) => {
        if (phase === 'while it is paused' && !pausedOnce) {
          pausedOnce = true;
          throw new AgentError('RATE_LIMITED', 'Quota exceeded', { details: { retryable: false } });
        }
        if (phase === 'while a function runs' && request.index === 0) return [functionCallChunk('look_around', {})];
        return [thoughtChunk('Asking'), thoughtChunk('politely'), functionCallChunk('chat_request_user_input', { user_message: 'Name?' })];
      }, { chunkDelayMs: 10 });
      context = { ports: { backend, store }, runOptions: { functionGroups: [tools] } };
      service = createSessionService({ log, bus, livenessMs: 50 });
      sessionId = await service.start(greetMe, context);
      const seen: SessionEvent[] = [];
      const reading = (async () => {
        for await (const event of service.events(sessionId, -1)) {
          seen.push(event);
          if (phase === 'while the model streams' && typeOf(event) === 'thought') await cancelHere();
        }
      })();
      if (phase === 'before the first request') await cancelHere();
      if (phase === 'while a function runs') {
        await functionRunning;
        await cancelHere();
      }
      await reading;
      if (phase === 'while it waits for an answer' || phase === 'while it is paused') {
        expect((await log.get(sessionId))?.status, phase).toBe(phase === 'while it is paused' ? 'paused' : 'suspended');
        await cancelHere();
      }
      if (phase === 'while its instance is dead') {
        // The owner's resume was taken by an instance that died holding the record.
        const { interactionId } = (await log.get(sessionId)) as { interactionId: string };
        expect((await claimInteraction(memory, interactionId, { leaseMs: 1_000, now: () => Date.now() - 60_000 })).status, phase).toBe('claimed');
        expect(await log.update(sessionId, { status: 'running' }, ['suspended'])).toBe(true);
        await cancelHere();
      }
      await sleep(60);
      const requests = backend.requests.length;
      await sleep(60);
      expect(backend.requests.length, phase).toBe(requests);
      expect((await log.get(sessionId))?.status, phase).toBe('cancelled');
      // No saved state is left under any id the session or its events named.
      const ids = new Set([sessionId, (await log.get(sessionId))?.interactionId]);
      for (const event of await readAll(service, sessionId)) {
        const id = (Object.values(JSON.parse(event.json) as Record<string, { interactionId?: string }>)[0] ?? {}).interactionId;
        if (id !== undefined) ids.add(id);
      }
      for (const id of ids) {
        if (id === undefined) continue;
        expect(await memory.get(id), `${phase}: ${id}`).toBeUndefined();
        expect((await collect(resume(id, answer, { backend, store: memory }))).at(-1), `${phase}: ${id}`).toMatchObject({ code: 'INTERACTION_NOT_FOUND' });
      }
      expect(await codeOf(service.resume(sessionId, answer, context)), phase).toBe('CONFLICT');
    }
  });

  it('keeps a session resumable when its log fails to record a resume: the resume is refused, and the next one goes on at once', async () => {
    const memory = createMemorySessionLog();
    let failNext = false;
    const log: SessionLog = {
      ...memory,
      async update(id, change, from) {
        if (failNext && change.status === 'running') {
          failNext = false;
          throw new AgentError('STORE_ERROR', 'The session log is unavailable');
        }
        return memory.update(id, change, from);
      },
    };
    const ports: AgentPorts = { backend: greeter(), store: createMemoryInteractionStore() };
    const service = createSessionService({ log, bus: createMemoryEventBus() });
    const sessionId = await service.start(greetMe, { ports });
    await readAll(service, sessionId);
    failNext = true;
    expect(await codeOf(service.resume(sessionId, answer, { ports }))).toBe('STORE_ERROR');
    expect((await log.get(sessionId))?.status).toBe('suspended');
    await service.resume(sessionId, answer, { ports });
    const events = await readAll(service, sessionId);
    expect(JSON.parse((events.at(-1) as SessionEvent).json)).toMatchObject({ complete: { result: { success: true } } });
  });

  it('keeps every event in the log, once and in order, when an append fails before or after it is applied', async () => {
    // The second append fails: a blip that wrote nothing, or a timeout after the write.
    for (const written of ['nothing', 'the events'] as const) {
      const { log, appends } = secondAppendFails(createMemorySessionLog(), written);
      const ports: AgentPorts = { backend: greeter(5), store: createMemoryInteractionStore() };
      const service = createSessionService({ log, bus: createMemoryEventBus() });
      const sessionId = await service.start(greetMe, { ports });
      const live = await readAll(service, sessionId);
      await service.resume(sessionId, answer, { ports });
      live.push(...(await readAll(service, sessionId, (live.at(-1) as SessionEvent).index)));
      expect(appends()).toBeGreaterThan(2);
      // What a reader on another instance, or a reconnect, gets: the log, replayed.
      const replayed = await readAll(createSessionService({ log, bus: createMemoryEventBus() }), sessionId);
      expect(replayed.map((event) => event.index)).toEqual(replayed.map((_, index) => index));
      expect(replayed.map((event) => event.json)).toEqual(live.map((event) => event.json));
      expect(replayed.map(typeOf)).toContain('waitForInput');
      expect(JSON.parse((replayed.at(-1) as SessionEvent).json)).toMatchObject({ complete: { result: { success: true } } });
      expect((await log.get(sessionId))?.status).toBe('completed');
    }
  });

  it("does not take another writer's events for its own when its append fails", async () => {
    const memory = createMemorySessionLog();
    // Another writer's events land where this append's would have, and this one fails.
    const { log } = secondAppendFails(memory, 'other events');
    const ports: AgentPorts = { backend: greeter(5), store: createMemoryInteractionStore() };
    const service = createSessionService({ log, bus: createMemoryEventBus() });
    const sessionId = await service.start(greetMe, { ports });
    const live = await readAll(service, sessionId);
    const stored = await memory.read(sessionId, -1, 1000);
    const own = stored.filter((json) => !json.includes('from elsewhere'));
    // Every event of the run is in the log once, in order, whatever else another writer put there
    // (a reader here may see one twice: two writers number the same places).
    expect(own).toEqual([...new Set(live.map((event) => event.json))]);
    expect(own.map((json) => Object.keys(JSON.parse(json) as object)[0])).toContain('waitForInput');
  });

  it('hands every event once and in order to a reader that stopped reading while the run went on past what it may hold', async () => {
    const log = createMemorySessionLog();
    // About 12 MB of thoughts, more than a reader may hold ahead of the log: the rest is read from it.
    const big = 'x'.repeat(100_000);
    const backend = createScriptedBackendClient(() => [...Array.from({ length: 120 }, (_, at) => thoughtChunk(`${at} ${big}`)), ...done('Done')], { chunkDelayMs: 2 });
    const service = createSessionService({ log, bus: createMemoryEventBus() });
    const sessionId = await service.start(greetMe, { ports: { backend, store: createMemoryInteractionStore() } });
    const reader = service.events(sessionId, -1)[Symbol.asyncIterator]();
    // The reader follows the run live (handed over by the segment running here) up to its first thought...
    const seen: SessionEvent[] = [];
    while (!seen.some((event) => typeOf(event) === 'thought')) {
      const next = await reader.next();
      if (next.done) throw new Error('the stream ended early');
      seen.push(next.value);
    }
    // ...then stops reading while the run goes on to its end.
    while ((await log.get(sessionId))?.status === 'running') await sleep(20);
    for (let next = await reader.next(); !next.done; next = await reader.next()) seen.push(next.value);
    expect(seen.map((event) => event.index)).toEqual(seen.map((_, index) => index));
    const thoughts = seen.filter((event) => typeOf(event) === 'thought').map((event) => (JSON.parse(event.json) as { thought: { text: string } }).thought.text.split(' ')[0]);
    expect(thoughts).toEqual(Array.from({ length: 120 }, (_, at) => String(at)));
    expect(JSON.parse((seen.at(-1) as SessionEvent).json)).toMatchObject({ complete: { result: { success: true } } });
  });

  it('pauses a session whose store failed as its segment ended, and its resume goes on from the last checkpoint', async () => {
    for (const failing of ['the save of its question', 'the removal of its finished record'] as const) {
      const memory = createMemoryInteractionStore();
      let fail = true;
      const store: InteractionStore = {
        get: (id) => memory.get(id),
        async set(id, write, expected) {
          if (failing === 'the save of its question' && fail && expected === null && write.state?.includes('"kind":"suspend"')) {
            fail = false;
            throw new Error('connection reset');
          }
          return memory.set(id, write, expected);
        },
        async delete(id, expected) {
          if (failing === 'the removal of its finished record' && fail) {
            fail = false;
            throw new Error('connection reset');
          }
          return memory.delete(id, expected);
        },
      };
      const backend = createScriptedBackendClient(() => [thoughtChunk('Thinking'), ...done('Hello')]);
      const asking = greeter();
      const ports: AgentPorts = { backend: failing === 'the save of its question' ? asking : backend, store };
      const service = createSessionService({ log: createMemorySessionLog(), bus: createMemoryEventBus() });
      const sessionId = await service.start(greetMe, { ports });
      const first = await readAll(service, sessionId);
      const error = JSON.parse((first.at(-1) as SessionEvent).json) as { error?: { code: string; interactionId?: string } };
      expect(error.error, failing).toMatchObject({ code: 'STORE_ERROR', interactionId: sessionId });
      expect(await service.status(sessionId), failing).toMatchObject({ status: 'paused', interactionId: sessionId });
      await service.resume(sessionId, {}, { ports });
      const rest = await readAll(service, sessionId, (first.at(-1) as SessionEvent).index);
      const last = typeOf(rest.at(-1) as SessionEvent);
      expect(last, failing).toBe(failing === 'the save of its question' ? 'waitForInput' : 'complete');
    }
  });
});
