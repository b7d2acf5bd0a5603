import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { serve, type RunningServer } from '@org/adapter-node';
import type { JsonObject } from '@org/core';
import { createFakeGoogleDrive, createScriptedGemini, functionCallChunk, type FakeGoogleDrive, type ScriptedGemini, type ScriptedRequest } from '@org/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, startDevProcess, stopProcess } from './test-support/dev-process.js';

interface Scenario {
  graph: { url: string; title: string };
  accessToken: string;
  answer: string;
  runs: Array<{ objective: string; turns: Array<Array<{ name: string; args: JsonObject }>> }>;
  expectedRequests: string[];
}

const scenario = JSON.parse(readFileSync(new URL('../../../fixtures/memory/memory-scenario.json', import.meta.url), 'utf8')) as Scenario;

/** Plays the scenario: the run its objective names, the turn its history has reached. */
function playScenario(request: ScriptedRequest) {
  const objective = request.body.contents[0]?.parts[0]?.text ?? '';
  const run = scenario.runs.find((candidate) => objective.includes(candidate.objective));
  const turn = run?.turns[request.body.contents.filter((content) => content.role === 'model').length];
  if (!turn) throw new Error(`the scenario has no turn for request ${request.index}`);
  return turn.map((call) => functionCallChunk(call.name, call.args));
}

type WireEvent = Record<string, Record<string, unknown>>;

async function events(response: Response): Promise<WireEvent[]> {
  expect(response.status).toBe(200);
  return (await response.text())
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice(6)) as WireEvent);
}

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${url}/v1beta1/streamRunAgent?alt=sse`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

const startBody = (objective: string) => ({
  start: {
    segments: [{ textSegment: { text: objective } }, { toolSegment: { path: 'function-group/use-memory', title: 'Use Memory' } }],
    graph: scenario.graph,
  },
  accessToken: scenario.accessToken,
});

/** The function responses of a stream, in order, by function name. */
function results(stream: WireEvent[]): Array<{ name: string; response: JsonObject }> {
  return stream.flatMap((event) => {
    const part = (event.functionResult?.content as { parts: Array<{ functionResponse: { name: string; response: JsonObject } }> } | undefined)?.parts[0];
    return part ? [part.functionResponse] : [];
  });
}

/** A logged request as `METHOD path?query`: the path percent-encoded as sent, the query decoded. */
const restCall = (request: FakeGoogleDrive['requests'][number]) => {
  const query = Object.entries(request.query).map(([name, value]) => `${name}=${value}`);
  return `${request.method} ${request.path}${query.length > 0 ? `?${query.join('&')}` : ''}`;
};

const children: ChildProcess[] = [];
let fake: FakeGoogleDrive;
let gemini: ScriptedGemini;
let google: RunningServer;
let model: RunningServer;
let storeDirectory = '';

beforeAll(async () => {
  fake = createFakeGoogleDrive({ accessToken: scenario.accessToken });
  google = await serve({ handler: (request) => fake.fetch(request) });
  gemini = createScriptedGemini(playScenario);
  model = await serve({ handler: (request) => gemini.fetch(request) });
  storeDirectory = await mkdtemp(path.join(os.tmpdir(), 'org-dev-memory-'));
});

afterAll(async () => {
  for (const child of children) child.kill('SIGTERM');
  await google?.close();
  await model?.close();
  if (storeDirectory) await rm(storeDirectory, { recursive: true, force: true });
});

describe('dev server with memory: a scripted model, the fake Drive + Sheets, two processes', () => {
  it('keeps sheets and the chat log of one run (suspend and resume included) for a later run of the same graph', async () => {
    const env = { GEMINI_BASE_URL: `${model.url}/v1beta`, GOOGLE_API_BASE_URL: google.url, INTERACTION_STORE_DIR: storeDirectory };
    const first = await startDevProcess(env, children);
    expect(first.banner).toContain(`Memory:    Drive + Sheets at ${google.url}, with the caller's token`);

    // Run 1: sheets created, written, read back, listed, deleted; then a question to the user.
    const [firstRun, secondRun] = scenario.runs as [Scenario['runs'][number], Scenario['runs'][number]];
    const suspended = await events(await post(first.url, startBody(firstRun.objective)));
    const waiting = suspended.at(-1)?.waitForInput;
    expect(waiting?.prompt).toEqual({ parts: [{ text: 'Who should I watch next game?' }], role: 'user' });
    // The notes cell held a <file> tag: the sheet has the file's text.
    const rows = [['player', 'score', 'notes'], ['Ada', '42', 'Ada beat the record'], ['Bob', '17', 'steady']];
    expect(results(suspended).map((result) => result.response)).toEqual([
      { file_path: '/mnt/notes.md' },
      { success: true },
      { success: true },
      { file_path: '/mnt/scores.md' },
      { json: JSON.stringify({ values: rows }) },
      { success: true },
      {
        sheets: [
          { name: 'Scores', file_path: '/mnt/memory/Scores', columns: ['player', 'score', 'notes'] },
          { name: 'Scratch', file_path: '/mnt/memory/Scratch', columns: ['tmp'] },
        ],
      },
      { success: true },
    ]);
    const resumed = await events(
      await post(first.url, { resume: { interactionId: waiting?.interactionId, response: { input: { role: 'user', parts: [{ text: scenario.answer }] } } } }, {
        authorization: `Bearer ${scenario.accessToken}`,
      }),
    );
    const completed = resumed.at(-1)?.complete?.result as { success: boolean; outcomes: { parts: Array<{ text: string }> } };
    expect(completed.success).toBe(true);
    expect(completed.outcomes.parts[0]?.text).toBe(`Saved the scores: \n${JSON.stringify({ values: rows })}`);
    const spreadsheetId = fake.files()[0]?.id as string;
    expect(fake.sheets(spreadsheetId)?.map((sheet) => sheet.title)).toEqual(['intro', '__chat_log__', 'Scores']);
    expect(fake.sheetValues(spreadsheetId, 'Scores')).toEqual(rows);
    await stopProcess(children.at(-1));

    // Run 2, in a new process: the rows and the earlier conversation are there.
    const second = await startDevProcess(env, children);
    const recalled = await events(await post(second.url, startBody(secondRun.objective)));
    expect(recalled.at(-1)).toMatchObject({ complete: { result: { success: true } } });
    const [sheetFile, json, chatLog] = results(recalled).map((result) => result.response);
    expect(sheetFile).toEqual({ text: JSON.stringify(rows) });
    expect(json).toEqual({ json: JSON.stringify({ values: rows.slice(1) }) });
    expect(JSON.parse(chatLog?.text as string)).toEqual([
      { role: 'model', parts: [{ text: 'Who should I watch next game?' }] },
      { role: 'user', parts: [{ text: scenario.answer }] },
    ]);
    // The model saw the same through its own request history.
    expect(gemini.requests.at(-1)?.body.contents.at(-1)?.parts[0]?.functionResponse?.response).toEqual(chatLog);
    const logRows = fake.sheetValues(spreadsheetId, '__chat_log__') ?? [];
    expect(logRows.slice(1).map((row) => row.slice(2))).toEqual([
      ['agent', 'Who should I watch next game?'],
      ['user', scenario.answer],
    ]);
    expect(new Set(logRows.slice(1).map((row) => row[1])).size).toBe(1);

    // Every call the runs made to Google, in order, and no secret in any answer the client saw.
    expect(fake.requests.map(restCall)).toEqual(scenario.expectedRequests);
    expect(fake.requests.every((request) => request.status < 300)).toBe(true);
    expect(fake.requests[1]?.body).toEqual({
      name: 'Memory for Score keeper',
      mimeType: 'application/vnd.google-apps.spreadsheet',
      appProperties: { 'google-drive-connector': 'sheetmemory-e2e-graphmemory-e2e-graph' },
    });
    expect(fake.requests.filter((request) => request.path.endsWith(':batchUpdate')).map((request) => request.body)).toEqual([
      { requests: [{ updateSheetProperties: { properties: { sheetId: 0, title: 'intro' }, fields: 'title' } }] },
      { requests: [{ addSheet: { properties: { title: '__chat_log__' } } }] },
      { requests: [{ addSheet: { properties: { title: 'Scores' } } }] },
      { requests: [{ addSheet: { properties: { title: 'Scratch' } } }] },
      { requests: [{ deleteSheet: { sheetId: expect.any(Number) } }] },
    ]);
    const appended = fake.requests.filter((request) => request.path.endsWith(':append')).map((request) => (request.body as { values: string[][] }).values);
    expect(appended.map((values) => values.map((row) => row.slice(2)))).toEqual([
      [["'agent", "'Who should I watch next game?"]],
      [["'user", `'${scenario.answer}`]],
    ]);
    expect(JSON.stringify([suspended, resumed, recalled])).not.toContain(scenario.accessToken);
  });
});

describe('dev server: where memory lives', () => {
  it('serves a simulated Drive + Sheets beside the simulated model, and says so', async () => {
    const { banner } = await startDevProcess({}, children);
    expect(banner).toMatch(/Memory: {4}SIMULATED Google Drive \+ Sheets at http:\/\/127\.0\.0\.1:\d+ \(in memory/);
  });

  it("uses Google's APIs with the caller's token next to a real model", async () => {
    const { banner } = await startDevProcess({ GEMINI_API_KEY: 'not-a-real-key' }, children);
    expect(banner).toContain("Memory:    Google Drive + Sheets with the caller's token");
    expect(banner).not.toContain('not-a-real-key');
  });

  it('refuses a Drive base URL that is not one, naming the variable and not its value', async () => {
    const child = spawn(process.execPath, [cli, '--port', '0'], {
      env: { PATH: process.env.PATH ?? '', SHEETS_BASE_URL: 'user:secret@nowhere' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise((resolve) => child.on('exit', resolve));
    expect(code).toBe(1);
    expect(stderr).toContain('SHEETS_BASE_URL must be an http(s) URL');
    expect(stderr).not.toContain('secret');
  });
});
