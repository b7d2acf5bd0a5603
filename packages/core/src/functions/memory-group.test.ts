import { describe, expect, it } from 'vitest';
import type { AgentPorts, DriveOperationsClient, InteractionStore } from '../ports/index.js';
import type { JsonObject } from '../protocol/content.js';
import type { AgentEvent } from '../protocol/events.js';
import type { GenerateContentResponse } from '../protocol/gemini.js';
import type { Segment, StartRequest } from '../protocol/requests.js';
import type { ResumeResponse } from '../protocol/resume-responses.js';
import { readInteractionState, resume, run } from '../run/index.js';
import {
  createMemoryInteractionStore,
  createScriptedBackendClient,
  functionCallChunk,
  type ScriptedBackendClient,
} from '../testing/index.js';
import { fakeDriveClient } from '../../test/fake-drive-client.js';

const MEMORY_TOOL: Segment = { type: 'tool', path: 'function-group/use-memory', title: 'Use Memory' };
const GRAPH = { url: 'drive:/graph-7', title: 'Score keeper' };

async function collect(events: AsyncIterable<AgentEvent>): Promise<AgentEvent[]> {
  const all: AgentEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

const googleDrive = () => fakeDriveClient('user-token');

const memoryRequest = (text: string, extra: Partial<StartRequest> = {}): StartRequest => ({
  segments: [{ type: 'text', text }, MEMORY_TOOL],
  graph: GRAPH,
  ...extra,
});

/** One turn calling `name`; the last turn of every script ends the run. */
const turn = (name: string, args: JsonObject = {}): GenerateContentResponse[] => [functionCallChunk(name, args)];
const done = turn('system_objective_fulfilled', { objective_outcome: 'Done' });

/** The responses the model got, in call order, as the last request shows them. */
function responses(backend: ScriptedBackendClient): Array<{ name: string; response: JsonObject }> {
  const contents = backend.requests.at(-1)?.body.contents ?? [];
  return contents.flatMap((content) =>
    content.parts.flatMap((part) => (part.functionResponse ? [{ name: part.functionResponse.name, response: part.functionResponse.response as JsonObject }] : [])),
  );
}

function portsOf(backend: ScriptedBackendClient, drive: DriveOperationsClient | undefined, store: InteractionStore = createMemoryInteractionStore()): AgentPorts {
  return drive ? { backend, store, drive } : { backend, store };
}

describe('the memory functions', () => {
  it('create, write (files in cells), read as JSON and as a file, list, read through /mnt/memory and delete sheets', async () => {
    const { fake, drive } = googleDrive();
    const backend = createScriptedBackendClient([
      turn('system_write_file', { file_name: 'notes.md', content: 'Beat the record' }),
      turn('memory_create_sheet', { name: 'Scores', columns: ['player', 'score', 'notes'], status_update: 'Making a sheet' }),
      turn('memory_update_sheet', { range: 'Scores!A2:C3', values: [['Ada', '42', 'Said: <file src="/mnt/notes.md" />'], ['Bob', '17', 'steady']] }),
      turn('memory_read_sheet', { range: 'Scores!A1:C3', output_format: 'json', status_update: 'Reading' }),
      turn('memory_read_sheet', { range: 'Scores!A1:C3', output_format: 'file', file_name: 'scores', status_update: 'Reading' }),
      turn('memory_create_sheet', { name: 'Scratch', columns: ['tmp'], status_update: '' }),
      turn('memory_get_metadata', { status_update: 'Looking' }),
      turn('system_list_files', { status_update: '' }),
      turn('system_read_text_from_file', { file_path: '/mnt/memory/Scores' }),
      turn('memory_delete_sheet', { name: 'Scratch', status_update: '' }),
      turn('memory_delete_sheet', { name: 'Scratch', status_update: '' }),
      turn('memory_read_sheet', { range: 'Scores!E1:F2', output_format: 'json', status_update: '' }),
      turn('memory_read_sheet', { range: 'A1:B2', output_format: 'json', status_update: '' }),
      turn('system_objective_fulfilled', { objective_outcome: 'Kept: <file src="/mnt/memory/Scores" />' }),
    ]);
    const events = await collect(run(memoryRequest('Keep the scores'), portsOf(backend, drive)));
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });

    const spreadsheetId = fake.files()[0]?.id as string;
    expect(fake.sheetValues(spreadsheetId, 'Scores')).toEqual([
      ['player', 'score', 'notes'],
      ['Ada', '42', 'Said: \nBeat the record'],
      ['Bob', '17', 'steady'],
    ]);
    const rows = [['player', 'score', 'notes'], ['Ada', '42', 'Said: \nBeat the record'], ['Bob', '17', 'steady']];
    const seen = responses(backend).filter((entry) => entry.name !== 'system_write_file');
    expect(seen.map((entry) => entry.response)).toEqual([
      { success: true },
      { success: true },
      { json: JSON.stringify({ values: rows }) },
      { file_path: '/mnt/scores.md' },
      { success: true },
      {
        sheets: [
          { name: 'Scores', file_path: '/mnt/memory/Scores', columns: ['player', 'score', 'notes'] },
          { name: 'Scratch', file_path: '/mnt/memory/Scratch', columns: ['tmp'] },
        ],
      },
      { list: '/mnt/notes.md\n/mnt/text1.md\n/mnt/scores.md\n/mnt/system/chat_log.json\n/mnt/memory/Scores\n/mnt/memory/Scratch' },
      { text: JSON.stringify(rows) },
      { success: true },
      { error: 'Sheet "Scratch" not found.' },
      { error: 'The sheet is empty' },
      { error: 'range "A1:B2" must name its sheet, e.g. "Scores!A1:B3"' },
    ]);
    const complete = events.at(-1);
    if (complete?.type !== 'complete') throw new Error('expected complete');
    expect(complete.result.outcomes?.parts).toEqual([{ text: `Kept: \n${JSON.stringify(rows)}` }]);
    // The JSON read is kept as a file too, so the model can refer to either.
    expect(complete.result.intermediate?.map((file) => file.path)).toEqual(['/mnt/notes.md', '/mnt/text1.md', '/mnt/scores.md']);
    expect(events.filter((event) => event.type === 'functionCall').map((event) => event.type === 'functionCall' && [event.icon, event.title])).toContainEqual([
      'table_chart',
      'Creating a new memory sheet',
    ]);
  });

  it('refuses to change the runtime tabs, and reports every cell whose file is missing', async () => {
    const { fake, drive } = googleDrive();
    const backend = createScriptedBackendClient([
      turn('memory_update_sheet', { range: '__chat_log__!A1', values: [['forged']] }),
      turn('memory_delete_sheet', { name: '__chat_log__', status_update: '' }),
      turn('memory_create_sheet', { name: 'Notes', columns: ['n'], status_update: '' }),
      turn('memory_update_sheet', { range: 'Notes!A2:B2', values: [['<file src="/mnt/a.md" />', '<file src="/mnt/b.md" />']] }),
      done,
    ]);
    await collect(run(memoryRequest('Try'), portsOf(backend, drive)));
    expect(responses(backend).map((entry) => entry.response)).toEqual([
      { error: 'range: sheet names starting with "__" are kept by the system and cannot be changed' },
      { error: 'name: sheet names starting with "__" are kept by the system and cannot be changed' },
      { success: true },
      { error: 'Agent unable to proceed: file "/mnt/a.md" not found, Agent unable to proceed: file "/mnt/b.md" not found' },
    ]);
    expect(fake.sheetValues(fake.files()[0]?.id as string, '__chat_log__')).toEqual([['timestamp', 'session_id', 'role', 'content']]);
  });

  it('is offered only with a memory tool segment, after the chat functions', async () => {
    const { drive } = googleDrive();
    const plain = createScriptedBackendClient([done]);
    await collect(run({ segments: [{ type: 'text', text: 'Hi' }], graph: GRAPH }, portsOf(plain, drive)));
    const names = (backend: ScriptedBackendClient) => backend.requests[0]?.body.tools?.[0]?.functionDeclarations?.map((declaration) => declaration.name) ?? [];
    expect(names(plain).filter((name) => name.startsWith('memory_'))).toEqual([]);
    const withMemory = createScriptedBackendClient([done]);
    await collect(run(memoryRequest('Hi'), portsOf(withMemory, drive)));
    expect(names(withMemory).slice(-7)).toEqual([
      'chat_request_user_input',
      'chat_present_choices',
      'memory_create_sheet',
      'memory_read_sheet',
      'memory_update_sheet',
      'memory_delete_sheet',
      'memory_get_metadata',
    ]);
    expect(withMemory.requests[0]?.body.systemInstruction?.parts[0]?.text).toContain('## Memory');
    expect(withMemory.requests[0]?.body.contents[0]?.parts[0]?.text).toContain('Use Memory');
  });

  it('says clearly when the objective asks for memory and there is no Drive client or no graph URL', async () => {
    const backend = createScriptedBackendClient([done]);
    const noDrive = await collect(run(memoryRequest('Remember this'), portsOf(backend, undefined)));
    expect(noDrive.map((event) => event.type)).toEqual(['start', 'error']);
    expect(noDrive.at(-1)).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringMatching(/^start\.segments: the objective has a memory tool .*no Drive client/) });

    const { drive } = googleDrive();
    const noGraph = await collect(run({ segments: [{ type: 'text', text: 'Remember' }, MEMORY_TOOL] }, portsOf(backend, drive)));
    expect(noGraph.at(-1)).toMatchObject({ type: 'error', code: 'BAD_REQUEST', message: expect.stringContaining('start.graph.url') });
    expect(backend.requests).toHaveLength(0);
  });

  it('goes on without memory when only the client flag asks for it and there is no Drive client or no graph URL, as it does with both', async () => {
    const backend = createScriptedBackendClient([done, done, done]);
    const events = await collect(run({ segments: [{ type: 'text', text: 'Hi' }], flags: { useMemory: true }, graph: GRAPH }, portsOf(backend, undefined)));
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    const { fake, drive } = googleDrive();
    const noGraph = await collect(run({ segments: [{ type: 'text', text: 'Hi' }], flags: { useMemory: true } }, portsOf(backend, drive)));
    expect(noGraph.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    const namesOf = (index: number) => backend.requests[index]?.body.tools?.[0]?.functionDeclarations?.map((declaration) => declaration.name) ?? [];
    expect(namesOf(1)).not.toContain('memory_get_metadata');
    expect(fake.files()).toHaveLength(0);
    await collect(run({ segments: [{ type: 'text', text: 'Hi' }], flags: { useMemory: true }, graph: GRAPH }, portsOf(backend, drive)));
    expect(namesOf(2)).toContain('memory_get_metadata');
    expect(fake.files()).toHaveLength(1);
  });

  it('fails the start with the Drive error when the memory cannot be read (an expired token)', async () => {
    const { fake, drive } = googleDrive();
    fake.failNext({ status: 401, path: '/drive/v3/files' });
    const backend = createScriptedBackendClient([done]);
    const events = await collect(run(memoryRequest('Remember'), portsOf(backend, drive)));
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'UNAUTHENTICATED', message: 'Drive API error: Invalid Credentials' });
    expect(JSON.stringify(events)).not.toContain('user-token');
  });
});

describe('the chat log in memory', () => {
  it('saves the conversation on suspend and resume, under one session id, and a later run recalls it', async () => {
    const { fake, drive } = googleDrive();
    const store = createMemoryInteractionStore();
    const first = createScriptedBackendClient([
      turn('chat_request_user_input', { user_message: 'Who scored?' }),
      turn('system_read_text_from_file', { file_path: '/mnt/system/chat_log.json' }),
      done,
    ]);
    const suspended = await collect(run(memoryRequest('Ask who scored'), portsOf(first, drive, store)));
    const waiting = suspended.at(-1);
    if (waiting?.type !== 'waitForInput') throw new Error('expected waitForInput');
    const record = await store.get(waiting.interactionId as string);
    const sessionId = readInteractionState('x', record!.state).sessionId;
    expect(sessionId).toMatch(/^[0-9a-f-]{36}$/);
    const spreadsheetId = fake.files()[0]?.id as string;
    expect(fake.sheetValues(spreadsheetId, '__chat_log__')?.slice(1).map((row) => row.slice(1))).toEqual([[sessionId, 'agent', 'Who scored?']]);

    await collect(resume(waiting.interactionId as string, { input: { role: 'user', parts: [{ text: 'Ada' }] } }, portsOf(first, drive, store)));
    expect(fake.sheetValues(spreadsheetId, '__chat_log__')?.slice(1).map((row) => row.slice(1))).toEqual([
      [sessionId, 'agent', 'Who scored?'],
      [sessionId, 'user', 'Ada'],
    ]);
    // In the same session the log shows each line once: this session's rows come from its history.
    const ownLog = JSON.parse(responses(first).find((entry) => entry.name === 'system_read_text_from_file')?.response.text as string);
    expect(ownLog).toEqual([
      { role: 'model', parts: [{ text: 'Who scored?' }] },
      { role: 'user', parts: [{ text: 'Ada' }] },
    ]);

    const second = createScriptedBackendClient([turn('system_read_text_from_file', { file_path: '/mnt/system/chat_log.json' }), done]);
    await collect(run(memoryRequest('What do you remember?'), portsOf(second, drive, store)));
    const recalled = JSON.parse(responses(second)[0]?.response.text as string);
    expect(recalled).toEqual(ownLog);
  });

  it('keeps a suspended memory run resumable when the resume comes without Drive access', async () => {
    const { drive } = googleDrive();
    const store = createMemoryInteractionStore();
    const backend = createScriptedBackendClient([turn('chat_request_user_input', { user_message: 'Name?' }), done]);
    const suspended = await collect(run(memoryRequest('Ask'), portsOf(backend, drive, store)));
    const interactionId = (suspended.at(-1) as { interactionId: string }).interactionId;
    const answer: ResumeResponse = { input: { role: 'user', parts: [{ text: 'Ada' }] } };
    const refused = await collect(resume(interactionId, answer, portsOf(backend, undefined, store)));
    expect(refused).toEqual([expect.objectContaining({ type: 'error', code: 'BAD_REQUEST', message: expect.stringMatching(/^accessToken: /) })]);
    const resumed = await collect(resume(interactionId, answer, portsOf(backend, drive, store)));
    expect(resumed.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
  });
});

describe('the google-drive functions', () => {
  it('upload a file (converting CSV to a spreadsheet) and create a folder when the flag is on', async () => {
    const { fake, drive } = googleDrive();
    const backend = createScriptedBackendClient([
      turn('system_write_file', { file_name: 'scores.csv', content: 'player,score\nAda,42' }),
      turn('google_drive_create_folder', { name: 'Reports', status_update: 'Making a folder' }),
      (request) => {
        const folder = request.body.contents.at(-1)?.parts[0]?.functionResponse?.response?.folder_id as string;
        return turn('google_drive_upload_file', { name: 'Scores', file_path: '/mnt/scores.csv', convert: true, parent: folder, status_update: '' });
      },
      turn('google_drive_upload_file', { name: 'Raw', file_path: '/mnt/scores.csv', convert: false, status_update: '' }),
      turn('google_drive_upload_file', { name: 'Nothing', file_path: '/mnt/missing.txt', status_update: '' }),
      done,
    ]);
    const events = await collect(
      run({ segments: [{ type: 'text', text: 'Save the scores to Drive' }], flags: { enableGoogleDriveTools: true } }, portsOf(backend, drive)),
    );
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    const [folder, converted, raw] = fake.files();
    expect(folder).toMatchObject({ name: 'Reports', mimeType: 'application/vnd.google-apps.folder' });
    expect(converted).toMatchObject({ name: 'Scores', mimeType: 'application/vnd.google-apps.spreadsheet', parents: [folder?.id] });
    expect(fake.sheetValues(converted?.id as string, 'Sheet1')).toEqual([['player', 'score'], ['Ada', '42']]);
    expect(raw).toMatchObject({ name: 'Raw', mimeType: 'text/csv' });
    expect(new TextDecoder().decode(fake.media(raw?.id as string))).toBe('player,score\nAda,42');
    expect(responses(backend).slice(1).map((entry) => entry.response)).toEqual([
      { folder_id: folder?.id },
      { file_path: '/mnt/file1.txt' },
      { file_path: '/mnt/text2.csv' },
      { error: 'file "/mnt/missing.txt" not found' },
    ]);
    const complete = events.at(-1);
    if (complete?.type !== 'complete') throw new Error('expected complete');
    expect(complete.result.intermediate?.slice(1).map((file) => file.content)).toEqual([
      { storedData: { handle: `drive:/${converted?.id}`, mimeType: 'application/vnd.google-apps.spreadsheet' } },
      { storedData: { handle: `drive:/${raw?.id}`, mimeType: 'text/csv' } },
    ]);
  });

  it('is not offered without the flag, nor without a Drive client', async () => {
    const { drive } = googleDrive();
    for (const [flags, client] of [[{}, drive], [{ enableGoogleDriveTools: true }, undefined]] as const) {
      const backend = createScriptedBackendClient([done]);
      await collect(run({ segments: [{ type: 'text', text: 'Hi' }], flags }, portsOf(backend, client)));
      const names = backend.requests[0]?.body.tools?.[0]?.functionDeclarations?.map((declaration) => declaration.name) ?? [];
      expect(names.some((name) => name.startsWith('google_drive_'))).toBe(false);
    }
  });
});
