import { describe, expect, it } from 'vitest';
import type { DriveOperationsClient } from '../ports/index.js';
import type { JsonObject } from '../protocol/content.js';
import type { AgentEvent } from '../protocol/events.js';
import type { GenerateContentResponse } from '../protocol/gemini.js';
import { run } from '../run/index.js';
import {
  createMemoryInteractionStore,
  createScriptedBackendClient,
  functionCallChunk,
  type ScriptedBackendClient,
} from '../testing/index.js';
import { fakeDriveClient } from '../../test/fake-drive-client.js';

const TOKEN = 'ya29.secret-user-token';
const GRAPH = { url: 'drive:/graph-5', title: 'Notes keeper' };
const SPREADSHEET = 'application/vnd.google-apps.spreadsheet';

const googleDrive = (options: { maxResponseBytes?: number } = {}) => fakeDriveClient(TOKEN, options);

type Step = GenerateContentResponse[] | (() => GenerateContentResponse[]);
const turn = (name: string, args: JsonObject = {}): GenerateContentResponse[] => [functionCallChunk(name, args)];
const done = turn('system_objective_fulfilled', { objective_outcome: 'Done' });

async function collect(events: AsyncIterable<AgentEvent>): Promise<AgentEvent[]> {
  const all: AgentEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

async function runMemory(drive: DriveOperationsClient, steps: Step[]): Promise<{ events: AgentEvent[]; responses: JsonObject[] }> {
  const backend: ScriptedBackendClient = createScriptedBackendClient([...steps, done]);
  const events = await collect(
    run(
      { segments: [{ type: 'text', text: 'Keep notes' }, { type: 'tool', path: 'function-group/use-memory', title: 'Use Memory' }], graph: GRAPH },
      { backend, store: createMemoryInteractionStore(), drive },
    ),
  );
  const contents = backend.requests.at(-1)?.body.contents ?? [];
  const responses = contents.flatMap((content) => content.parts.flatMap((part) => (part.functionResponse ? [part.functionResponse.response as JsonObject] : [])));
  return { events, responses };
}

/** What a message shows of the request behind it: the token, a URL, an API path, the spreadsheet's id. */
function leaks(message: string, spreadsheetId: string): string[] {
  return [TOKEN, '://', 'google.test', '/v4/', '/drive/v3', '/values/', spreadsheetId].filter((secret) => message.includes(secret));
}

describe('the memory functions when Google fails mid-way', () => {
  it('tell the model what Sheets refused (quota, permission, outage), lose nothing already saved, and go on', async () => {
    const { fake, drive } = googleDrive();
    const failing = (status: number, method: string, step: GenerateContentResponse[]) => () => {
      fake.failNext({ status, method, path: '/values/' });
      return step;
    };
    const { events, responses } = await runMemory(drive, [
      turn('memory_create_sheet', { name: 'Notes', columns: ['note'], status_update: '' }),
      turn('memory_update_sheet', { range: 'Notes!A2', values: [['kept']] }),
      failing(429, 'PUT', turn('memory_update_sheet', { range: 'Notes!A2', values: [['lost to quota']] })),
      failing(403, 'PUT', turn('memory_update_sheet', { range: 'Notes!A2', values: [['lost to permission']] })),
      failing(500, 'PUT', turn('memory_update_sheet', { range: 'Notes!A2', values: [['lost to an outage']] })),
      failing(503, 'GET', turn('memory_read_sheet', { range: 'Notes!A1:A2', output_format: 'json', status_update: '' })),
      turn('memory_read_sheet', { range: 'Notes!A1:A2', output_format: 'json', status_update: '' }),
      turn('memory_update_sheet', { range: 'Notes!A3', values: [['later']] }),
    ]);
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    expect(responses).toEqual([
      { success: true },
      { success: true },
      { error: expect.stringMatching(/^Drive API error: Quota exceeded/) },
      { error: 'Drive API error: The caller does not have permission' },
      { error: 'Drive API error: Internal error encountered.' },
      { error: 'Drive API error: The service is currently unavailable.' },
      { json: JSON.stringify({ values: [['note'], ['kept']] }) },
      { success: true },
    ]);
    const spreadsheetId = fake.files()[0]?.id as string;
    for (const response of responses) expect(leaks(JSON.stringify(response), spreadsheetId)).toEqual([]);
    expect(fake.sheetValues(spreadsheetId, 'Notes')).toEqual([['note'], ['kept'], ['later']]);
  });

  it('tell the model about a rate limit met while listing the sheets as they tell it for any other call', async () => {
    const { fake, drive } = googleDrive();
    const limited = (step: GenerateContentResponse[]) => () => {
      fake.failNext({ status: 429, method: 'GET', path: '/values/' });
      return step;
    };
    const { events, responses } = await runMemory(drive, [
      turn('memory_create_sheet', { name: 'Notes', columns: ['note'], status_update: '' }),
      limited(turn('memory_read_sheet', { range: 'Notes!A1', output_format: 'json', status_update: '' })),
      limited(turn('memory_get_metadata', { status_update: '' })),
      turn('memory_get_metadata', { status_update: '' }),
    ]);
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    const [, readError, listError, listed] = responses;
    expect(readError).toEqual({ error: expect.stringMatching(/^Drive API error: Quota exceeded/) });
    expect(listError).toEqual(readError);
    expect(listed).toEqual({ sheets: [{ name: 'Notes', file_path: '/mnt/memory/Notes', columns: ['note'] }] });
  });

  it('say in plain words when the spreadsheet was deleted from Drive during the run, and start a new one on the next call', async () => {
    const { fake, drive } = googleDrive();
    const { events, responses } = await runMemory(drive, [
      turn('memory_create_sheet', { name: 'Notes', columns: ['note'], status_update: '' }),
      () => {
        void drive.deleteFile(fake.files()[0]?.id as string);
        return turn('memory_update_sheet', { range: 'Notes!A2', values: [['after the delete']] });
      },
      turn('memory_get_metadata', { status_update: '' }),
      turn('memory_create_sheet', { name: 'Notes', columns: ['note'], status_update: '' }),
      turn('memory_update_sheet', { range: 'Notes!A2', values: [['in the new one']] }),
    ]);
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    expect(responses).toEqual([
      { success: true },
      {
        error:
          'The memory spreadsheet is no longer in Google Drive (it was deleted, or this account lost access to it); what it held cannot be read. ' +
          'The next memory call starts a new spreadsheet if it is still gone.',
      },
      { sheets: [] },
      { success: true },
      { success: true },
    ]);
    const [replacement] = fake.files();
    expect(replacement).toMatchObject({ name: 'Memory for Notes keeper', appProperties: { 'google-drive-connector': 'sheetgraph-5graph-5' } });
    expect(fake.sheetValues(replacement?.id as string, 'Notes')).toEqual([['note'], ['in the new one']]);
  });

  it('start, and recall the latest conversation, when the chat log has grown past what one read can carry', async () => {
    // Answers are capped at 1 MiB here; the whole log is about 2.5 MiB.
    const { fake, drive } = googleDrive({ maxResponseBytes: 1024 * 1024 });
    const rows = Array.from({ length: 6000 }, (_, index) => ['2026-01-01T00:00:00.000Z', `old-${Math.floor(index / 10)}`, index % 2 ? 'user' : 'agent', `line ${index} ${'.'.repeat(380)}`]);
    fake.addFile({
      name: 'Memory for Notes keeper',
      mimeType: SPREADSHEET,
      appProperties: { 'google-drive-connector': 'sheetgraph-5graph-5' },
      sheets: { intro: [['Memory']], __chat_log__: [['timestamp', 'session_id', 'role', 'content'], ...rows] },
    });
    const { events, responses } = await runMemory(drive, [turn('system_read_text_from_file', { file_path: '/mnt/system/chat_log.json' })]);
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    const log = JSON.parse(responses[0]?.text as string) as Array<{ role: string; parts: Array<{ text: string }> }>;
    expect(log).toHaveLength(1000);
    expect(log.at(-1)?.parts[0]?.text).toMatch(/^line 5999 /);
    expect(log[0]?.parts[0]?.text).toMatch(/^line 5000 /);
  });
});
