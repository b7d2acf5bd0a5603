// Durability of runs over real HTTP: the built dev server as a process, its file store, a mock
// Gemini and a fake Drive on loopback that the tests steer. Each test kills what it started.
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { postRun, readEvents, resumeBody, typeOf, waitFor, type Credential, type WireEvent } from './test-support/agent-client.js';
import { startHangingDrive, type DriveCall } from './test-support/hanging-drive.js';
import {
  callChunk,
  lastFunctionResponse,
  objectiveOf,
  startMockGemini,
  stopChunk,
  thoughtOf,
  type MockGemini,
  type MockGeminiAnswer,
  type MockGeminiRequest,
} from './test-support/mock-gemini.js';
import { startDevProcess, stopProcess } from './test-support/dev-process.js';

const TEST_TIMEOUT_MS = 120_000;
const GEMINI_API_KEY = 'mock-gemini-key';

const children: ChildProcess[] = [];
const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const child of children.splice(0)) await stopProcess(child, 'SIGKILL');
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

async function storeDirectory(): Promise<string> {
  const directory = await mkdtemp(path.join(os.tmpdir(), 'org-durability-'));
  cleanups.push(() => rm(directory, { recursive: true, force: true }));
  return directory;
}

async function mockGemini(answer: (request: MockGeminiRequest) => MockGeminiAnswer | Promise<MockGeminiAnswer>): Promise<MockGemini> {
  const mock = await startMockGemini(answer);
  cleanups.push(() => mock.close());
  return mock;
}

/** Starts `dist/cli.js` against the mock model and the store; resolves with its URL and process. */
async function startServer(mock: MockGemini, store: string, env: Record<string, string> = {}): Promise<{ url: string; child: ChildProcess }> {
  const { url } = await startDevProcess({ GEMINI_API_KEY, GEMINI_BASE_URL: mock.baseUrl, INTERACTION_STORE_DIR: store, ...env }, children);
  return { url, child: children.at(-1) as ChildProcess };
}

const startBody = (objective: string) => ({ start: { segments: [{ textSegment: { text: objective } }] } });

/** A turn with one function call (signed), then the closing chunk. */
const call = (name: string, args: Parameters<typeof callChunk>[1]): MockGeminiAnswer => ({ kind: 'chunks', chunks: [callChunk(name, args), stopChunk()] });

const askName: MockGeminiAnswer = {
  kind: 'chunks',
  chunks: [thoughtOf('I need their name first.'), callChunk('chat_request_user_input', { user_message: 'What is your name?', input_type: 'text' }), stopChunk()],
};

/** The text of the final result of a stream that completed. */
function outcomeText(events: WireEvent[]): string {
  const result = events.at(-1)?.complete?.result as { success?: boolean; outcomes?: { parts?: Array<{ text?: string }> } } | undefined;
  return (result?.outcomes?.parts ?? []).map((part) => part.text ?? '').join('');
}

/** The function responses the model saw in a request, in history order. */
function responsesSeen(request: MockGeminiRequest): Array<{ name: string; response: Record<string, unknown> }> {
  return (request.body.contents ?? []).flatMap((content) =>
    (content.parts ?? []).flatMap((part) => (part.functionResponse ? [part.functionResponse as { name: string; response: Record<string, unknown> }] : [])),
  );
}

/**
 * Resumes `interactionId` until it is not refused with `CONFLICT` (the run is still held: by the
 * segment that is stopping, or by a dead server's lease that has not run out yet).
 */
function resumeWhenFree(url: string, interactionId: string, credential: Credential, answer?: string): Promise<WireEvent[]> {
  return waitFor(
    `interaction ${interactionId} to be resumable`,
    async () => {
      const events = await readEvents(await postRun(url, resumeBody(interactionId, answer), credential));
      return events.length === 1 && events[0]?.error?.code === 'CONFLICT' ? undefined : events;
    },
    90_000,
    200,
  );
}

describe('durability over HTTP: the dev server process, its file store, a mock Gemini on loopback', () => {
  it(
    'a client that leaves a resumed segment while the model streams: the same interaction id resumes, with the answer given once',
    async () => {
      const owner: Credential = { bearer: 'owner-token-leave' };
      let holdResumedTurn = true;
      const mock = await mockGemini((request) => {
        const answered = lastFunctionResponse(request);
        if (!answered) return askName;
        if (holdResumedTurn) {
          holdResumedTurn = false;
          return { kind: 'hang', headers: true };
        }
        return call('system_objective_fulfilled', { objective_outcome: `Hello, ${String(answered.response.user_input)}!` });
      });
      const server = await startServer(mock, await storeDirectory());

      const started = await readEvents(await postRun(server.url, startBody('Ask me my name, then greet me by name.'), owner));
      const interactionId = started.at(-1)?.waitForInput?.interactionId as string;
      expect(interactionId).toEqual(expect.any(String));

      // Resume with the answer; leave while the model holds its answer open.
      const leaving = new AbortController();
      const firstResume = await postRun(server.url, resumeBody(interactionId, 'Ada'), owner, leaving.signal);
      expect(firstResume.status).toBe(200);
      const seenBeforeLeaving: string[] = [];
      const reading = readEvents(firstResume, (event) => seenBeforeLeaving.push(typeOf(event) as string)).then(
        () => 'ended',
        () => 'aborted',
      );
      await waitFor('the resumed segment to ask the model', () => mock.requests.length === 2 && mock.openCount() === 1);
      leaving.abort();
      expect(await reading).toBe('aborted');
      expect(seenBeforeLeaving).not.toContain('complete');
      // The server stops the model request of the segment its client left.
      await waitFor('the server to close the model request', () => mock.requests[1]?.closedEarly);

      // The same id again, with another answer: the one already applied is kept, this one ignored.
      const resumed = await resumeWhenFree(server.url, interactionId, owner, 'Bob');
      expect(resumed.at(-1)).toMatchObject({ complete: { result: { success: true } } });
      expect(outcomeText(resumed)).toBe('Hello, Ada!');

      expect(mock.requests).toHaveLength(3);
      const [, cutShort, again] = mock.requests as [MockGeminiRequest, MockGeminiRequest, MockGeminiRequest];
      // The turn that was cut short is asked again with the very same history.
      expect(again.body.contents).toEqual(cutShort.body.contents);
      expect(responsesSeen(again)).toEqual([{ name: 'chat_request_user_input', response: { user_input: 'Ada' } }]);
      expect(JSON.stringify(mock.requests.map((request) => request.body))).not.toContain('Bob');
      expect(mock.requests.every((request) => request.headers['x-goog-api-key'] === GEMINI_API_KEY)).toBe(true);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a server killed (SIGKILL) during a side-effecting call of a later turn: a new server resumes the same id from the last checkpoint, without running the call again',
    async () => {
      const token = 'ya29.durability-owner';
      const owner: Credential = { bodyToken: token };
      const drive = await startHangingDrive(token);
      cleanups.push(() => drive.close());
      const objective = 'Ask which team I support, note it, and keep a Scores sheet for it.';
      const mock = await mockGemini((request) => {
        const answered = lastFunctionResponse(request);
        if (!answered) return { kind: 'chunks', chunks: [callChunk('chat_request_user_input', { user_message: 'Which team do you support?', input_type: 'text' }), stopChunk()] };
        if (answered.name === 'chat_request_user_input') return call('system_write_file', { file_name: 'team.md', content: String(answered.response.user_input) });
        if (answered.name === 'system_write_file') return call('memory_create_sheet', { name: 'Scores', columns: ['team', 'score'], status_update: 'Creating the Scores sheet' });
        return call('system_objective_fulfilled', { objective_outcome: 'Your team: <file src="/mnt/team.md" />' });
      });
      const store = await storeDirectory();
      const env = { GOOGLE_API_BASE_URL: drive.url, INTERACTION_LEASE_MS: '1500' };
      const first = await startServer(mock, store, env);
      const start = {
        start: {
          segments: [{ textSegment: { text: objective } }, { toolSegment: { path: 'function-group/use-memory', title: 'Use Memory' } }],
          graph: { url: 'drive:/durability-graph', title: 'Team keeper' },
        },
      };
      const started = await readEvents(await postRun(first.url, start, owner));
      const interactionId = started.at(-1)?.waitForInput?.interactionId as string;
      expect(interactionId).toEqual(expect.any(String));

      // Resume; the sheet's creation takes effect in Drive, and its answer never comes back.
      const isScoresSheet = (candidate: DriveCall) =>
        candidate.method === 'POST' && candidate.path.endsWith(':batchUpdate') && JSON.stringify(candidate.body).includes('"title":"Scores"');
      const hung = drive.hangNext(isScoresSheet);
      const beforeCrash: WireEvent[] = [];
      const resuming = postRun(first.url, resumeBody(interactionId, 'Hawks'), owner)
        .then((response) => readEvents(response, (event) => beforeCrash.push(event)))
        .catch(() => 'connection lost');
      await hung;
      // Events reach the socket in bursts a few milliseconds apart: let the call's own event arrive.
      const callsSeen = () => beforeCrash.filter((event) => typeOf(event) === 'functionCall').map((event) => event.functionCall?.name);
      await waitFor('the sheet call to reach the client', () => callsSeen().includes('memory_create_sheet'));
      const exited = new Promise((resolve) => first.child.once('exit', (_code, signal) => resolve(signal)));
      first.child.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
      expect(await resuming).toBe('connection lost');
      const requestsBeforeCrash = mock.requests.length;
      expect(requestsBeforeCrash).toBe(3);
      expect(callsSeen()).toEqual([
        'system_write_file',
        'memory_create_sheet',
      ]);

      // A new server on the same store: the id is refused while the dead server's lease lasts, then resumes.
      const second = await startServer(mock, store, env);
      const resumed = await resumeWhenFree(second.url, interactionId, owner);
      expect(resumed.at(-1)).toMatchObject({ complete: { result: { success: true } } });
      expect(outcomeText(resumed)).toContain('Hawks');
      // The call in flight is reported as interrupted, not run again.
      const interrupted = resumed.find((event) => typeOf(event) === 'functionResult')?.functionResult?.content as
        | { parts: Array<{ functionResponse: { name: string; response: { error?: string } } }> }
        | undefined;
      expect(interrupted?.parts[0]?.functionResponse.name).toBe('memory_create_sheet');
      expect(interrupted?.parts[0]?.functionResponse.response.error).toMatch(/was running when the run stopped and was not run again/);

      // The model was asked each turn once: none before the crash point again, one more after it.
      expect(mock.requests.map((request) => request.body.contents?.length)).toEqual([1, 3, 5, 7]);
      expect(mock.requests.every((request) => objectiveOf(request).includes(objective))).toBe(true);
      const [, , beforeCall, afterCrash] = mock.requests as [MockGeminiRequest, MockGeminiRequest, MockGeminiRequest, MockGeminiRequest];
      expect(afterCrash.body.contents?.slice(0, 5)).toEqual(beforeCall.body.contents);
      // The recovered history keeps the model's signed call as it came.
      const recoveredCall = afterCrash.body.contents?.[5]?.parts?.find((part) => part.functionCall);
      expect(recoveredCall?.functionCall?.name).toBe('memory_create_sheet');
      expect(recoveredCall?.thoughtSignature).toEqual(expect.any(String));
      expect(responsesSeen(afterCrash).map((response) => response.name)).toEqual(['chat_request_user_input', 'system_write_file', 'memory_create_sheet']);

      // Drive: the sheet was created by exactly one request, the one the crash cut off.
      expect(drive.calls.filter(isScoresSheet)).toHaveLength(1);
      const spreadsheet = drive.fake.files().find((file) => file.mimeType === 'application/vnd.google-apps.spreadsheet');
      expect(drive.fake.sheets(spreadsheet?.id as string)?.filter((sheet) => sheet.title === 'Scores')).toHaveLength(1);
      expect(JSON.stringify([started, beforeCrash, resumed])).not.toContain(token);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a model whose stream breaks mid-line on every attempt: the client gets a coded error with the interaction id, which resumes once the model recovers',
    async () => {
      const owner: Credential = { bearer: 'owner-token-cut' };
      let broken = true;
      const mock = await mockGemini(() =>
        broken
          ? { kind: 'cut', chunks: [thoughtOf('Working on it.')], cut: callChunk('system_objective_fulfilled', { objective_outcome: 'never seen' }) }
          : call('system_objective_fulfilled', { objective_outcome: 'Recovered and done.' }),
      );
      const server = await startServer(mock, await storeDirectory());
      const failed = await readEvents(await postRun(server.url, startBody('Say that you are done.'), owner));
      const error = failed.at(-1)?.error as { code?: string; message?: string; interactionId?: string } | undefined;
      expect(error?.code).toBe('MODEL_UNAVAILABLE');
      expect(error?.interactionId).toEqual(expect.any(String));
      // Every attempt was cut, and the loop tried more than once before it gave up.
      const attempts = mock.requests.length;
      expect(attempts).toBeGreaterThan(1);
      expect(mock.requests.every((request) => request.closedEarly && !request.finished)).toBe(true);
      expect(failed.filter((event) => typeOf(event) === 'functionCall')).toEqual([]);
      expect(failed.filter((event) => typeOf(event) === 'complete')).toEqual([]);

      broken = false;
      const resumed = await resumeWhenFree(server.url, error?.interactionId as string, owner);
      expect(resumed.at(-1)).toMatchObject({ complete: { result: { success: true } } });
      expect(outcomeText(resumed)).toBe('Recovered and done.');
      // The same turn was asked again, with the same history: nothing of the broken answers kept.
      expect(mock.requests).toHaveLength(attempts + 1);
      expect(new Set(mock.requests.map((request) => JSON.stringify(request.body.contents))).size).toBe(1);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a hundred concurrent resumes of one id with other tokens and the owner\'s: the others are FORBIDDEN, the owner\'s completes, the model is asked once',
    async () => {
      const ownerToken = 'owner-token-crowd';
      let releaseModel: () => void = () => undefined;
      const modelReleased = new Promise<void>((resolve) => (releaseModel = resolve));
      const mock = await mockGemini(async (request) => {
        const answered = lastFunctionResponse(request);
        if (!answered) return askName;
        await modelReleased;
        return call('system_objective_fulfilled', { objective_outcome: `Hello, ${String(answered.response.user_input)}!` });
      });
      const server = await startServer(mock, await storeDirectory());
      const started = await readEvents(await postRun(server.url, startBody('Ask me my name, then greet me by name.'), { bodyToken: ownerToken }));
      const interactionId = started.at(-1)?.waitForInput?.interactionId as string;
      expect(interactionId).toEqual(expect.any(String));

      // 100 intruders (half with a bearer header, half with a body token) and the owner, all at once.
      const intruders: Credential[] = Array.from({ length: 100 }, (_, index) =>
        index % 2 === 0 ? { bearer: `intruder-${index}` } : { bodyToken: `intruder-${index}` },
      );
      const ownerAt = 37;
      const credentials = [...intruders.slice(0, ownerAt), { bearer: ownerToken }, ...intruders.slice(ownerAt)];
      const answers = credentials.map((credential) =>
        postRun(server.url, resumeBody(interactionId, credential && 'bearer' in credential && credential.bearer === ownerToken ? 'Ada' : 'Mallory'), credential),
      );
      const ownerResponse = answers.splice(ownerAt, 1)[0] as Promise<Response>;
      // The owner's segment holds the model until every intruder has its answer.
      const refused = await Promise.all(answers.map(async (answer) => {
        const response = await answer;
        return { status: response.status, events: await readEvents(response) };
      }));
      releaseModel();
      const owned = await readEvents(await ownerResponse);

      expect(refused).toHaveLength(100);
      for (const { status, events } of refused) {
        expect(status).toBe(200);
        expect(events).toEqual([{ error: { code: 'FORBIDDEN', message: expect.stringContaining('belongs to another user') } }]);
      }
      expect(owned.at(-1)).toMatchObject({ complete: { result: { success: true } } });
      expect(outcomeText(owned)).toBe('Hello, Ada!');
      const resumedTurns = mock.requests.filter((request) => lastFunctionResponse(request)?.name === 'chat_request_user_input');
      expect(resumedTurns).toHaveLength(1);
      expect(mock.requests).toHaveLength(2);
      expect(JSON.stringify(mock.requests.map((request) => request.body))).not.toContain('Mallory');
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'two hundred runs whose model streams hang: a fresh run still completes',
    async () => {
      const hanging = 'Wait for an answer that never comes.';
      const mock = await mockGemini((request) =>
        objectiveOf(request).includes(hanging)
          ? { kind: 'hang', headers: request.index % 2 === 0 }
          : call('system_objective_fulfilled', { objective_outcome: 'Fresh and done.' }),
      );
      const server = await startServer(mock, await storeDirectory());
      const stuck = Array.from({ length: 200 }, () => new AbortController());
      cleanups.push(async () => stuck.forEach((controller) => controller.abort()));
      const stuckEvents: WireEvent[][] = stuck.map(() => []);
      const stuckStreams = stuck.map((controller, index) =>
        postRun(server.url, startBody(`${hanging} (#${index})`), { bearer: `hanging-${index}` }, controller.signal)
          .then((response) => readEvents(response, (event) => stuckEvents[index]?.push(event)))
          .catch(() => 'aborted'),
      );
      await waitFor('200 model streams held open', () => mock.openCount() === 200, 90_000, 100);

      const fresh = await readEvents(await postRun(server.url, startBody('Say that you are done.'), { bearer: 'fresh' }));
      expect(fresh.at(-1)).toMatchObject({ complete: { result: { success: true } } });
      expect(outcomeText(fresh)).toBe('Fresh and done.');
      // The hung runs are still waiting on their model: none failed, none was answered.
      expect(mock.openCount()).toBe(200);
      expect(stuckEvents.every((events) => events.every((event) => typeOf(event) !== 'error' && typeOf(event) !== 'complete'))).toBe(true);
      await waitFor('every held run to show its request', () => stuckEvents.every((events) => events.some((event) => typeOf(event) === 'sendRequest')));

      stuck.forEach((controller) => controller.abort());
      expect(new Set(await Promise.all(stuckStreams))).toEqual(new Set(['aborted']));
    },
    TEST_TIMEOUT_MS,
  );
});
