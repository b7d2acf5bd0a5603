import { describe, expect, it } from 'vitest';
import { AgentError } from '../errors/index.js';
import type { BackendClient, DriveOperationsClient } from '../ports/index.js';
import type { JsonObject } from '../protocol/content.js';
import type { AgentEvent, AgentEventOf } from '../protocol/events.js';
import type { GenerateContentResponse } from '../protocol/gemini.js';
import { run } from '../run/index.js';
import { createMemoryInteractionStore, createScriptedBackendClient, functionCallChunk } from '../testing/index.js';
import { fakeDriveClient } from '../../test/fake-drive-client.js';

const TOKEN = 'ya29.a0-secret-user-token';
const REQUEST = { segments: [{ type: 'text' as const, text: 'Save to Drive' }], flags: { enableGoogleDriveTools: true } };

const googleDrive = () => fakeDriveClient(TOKEN);

/** A Drive client that fails every call the way `fail` says; only the methods the functions use. */
function failingDrive(fail: () => Promise<never>): DriveOperationsClient {
  return { createFile: fail, uploadFile: fail } as unknown as DriveOperationsClient;
}

type Call = [name: string, args: JsonObject];

/** Runs turns of calls, then fulfils the objective; the responses the model got, in call order. */
async function runCalls(drive: DriveOperationsClient, turns: Call[][]): Promise<{ responses: JsonObject[]; events: AgentEvent[] }> {
  const script: GenerateContentResponse[][] = turns.map((calls) => calls.map(([name, args]) => functionCallChunk(name, args)));
  script.push([functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Done' })]);
  const backend = createScriptedBackendClient(script);
  const events: AgentEvent[] = [];
  for await (const event of run(REQUEST, { backend, store: createMemoryInteractionStore(), drive })) events.push(event);
  expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
  const responses = events
    .filter((event): event is AgentEventOf<'functionResult'> => event.type === 'functionResult')
    .map((event) => event.content.parts[0]?.functionResponse?.response as JsonObject);
  return { responses: responses.slice(0, -1), events };
}

const folder = (name = 'Reports'): Call => ['google_drive_create_folder', { name, status_update: '' }];
const upload = (file_path: string, name = 'Notes'): Call => ['google_drive_upload_file', { name, file_path, convert: true, status_update: '' }];

describe('the google-drive functions when Drive fails', () => {
  it('tell the model what Drive refused (4xx, 5xx, a malformed answer), and the run goes on', async () => {
    const { fake, drive } = googleDrive();
    fake.failNext({ status: 403, body: { error: { code: 403, message: 'The user has not granted the app write access.', errors: [{ reason: 'insufficientPermissions' }] } } });
    fake.failNext({ status: 503, path: '/upload/' });
    fake.failNext({ status: 200, body: 'not json', method: 'POST' });
    const { responses } = await runCalls(drive, [[folder()], [['system_write_file', { file_name: 'notes.md', content: 'hi' }]], [upload('/mnt/notes.md')], [folder()], [folder()]]);
    expect(responses).toEqual([
      { error: 'Drive API error: The user has not granted the app write access.' },
      { file_path: '/mnt/notes.md' },
      { error: expect.stringMatching(/^Drive API error: /) },
      { error: expect.stringMatching(/^Drive API error: createFile answered 200 with a body that is not JSON/) },
      { folder_id: expect.any(String) },
    ]);
    for (const response of responses) expect(JSON.stringify(response)).not.toMatch(/ya29|google\.test|\/drive\/v3/);
  });

  it('tell the model what a Drive client threw, with no token or server path in it', async () => {
    const thrown = [
      new Error(`ECONNRESET while POST /srv/agent/node_modules/drive/index.js with authorization: ${TOKEN} set`),
      new AgentError('UPSTREAM_ERROR', `Drive answered 500 for https://www.googleapis.com/drive/v3/files?access_token=${TOKEN}`),
    ];
    for (const error of thrown) {
      const { responses } = await runCalls(failingDrive(() => Promise.reject(error)), [[folder()], [['system_write_file', { file_name: 'a.md', content: 'x' }]], [upload('/mnt/a.md')]]);
      for (const response of [responses[0], responses[2]]) {
        expect(String(response?.error)).not.toContain(TOKEN);
        expect(String(response?.error)).not.toContain('/srv/agent');
      }
    }
  });

  it('treat an answer without the id of the new file as a failure, not as a folder without an id', async () => {
    const drive = { createFile: async () => ({}), uploadFile: async () => ({ name: 'x' }) } as unknown as DriveOperationsClient;
    const { responses } = await runCalls(drive, [[folder()], [['system_write_file', { file_name: 'a.md', content: 'x' }]], [upload('/mnt/a.md')]]);
    expect(responses).toEqual([
      { error: 'Google Drive answered without the id of the file it made' },
      { file_path: '/mnt/a.md' },
      { error: 'Google Drive answered without the id of the file it made' },
    ]);
  });

  it('say an upload was done when the file system cannot give the copy a path, so the model does not upload it again', async () => {
    const { fake, drive } = googleDrive();
    const { responses } = await runCalls(drive, [
      Array.from({ length: 1000 }, (_, index): Call => ['system_write_file', { file_name: `file_${index}.md`, content: `text ${index}` }]),
      [upload('/mnt/file_0.md')],
    ]);
    expect(responses.at(-1)).toEqual({
      error: expect.stringMatching(/^The file was uploaded to Google Drive \(id [\w-]+\), but it has no path in the file system: There are already 1000 files/),
    });
    expect(fake.files()).toHaveLength(1);
  });

  it('create a folder once when the answer that asked for it broke off and was asked for again', async () => {
    const { fake, drive } = googleDrive();
    let attempts = 0;
    const unsupported = () => Promise.reject(new AgentError('NOT_IMPLEMENTED', 'not in this test'));
    const backend: BackendClient = {
      async *streamGenerateContent(_model, body) {
        if (JSON.stringify(body.contents).includes('"folder_id"')) {
          yield functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Done' });
          return;
        }
        attempts += 1;
        yield functionCallChunk('google_drive_create_folder', { name: 'Reports', status_update: '' });
        if (attempts === 1) throw new AgentError('MODEL_UNAVAILABLE', 'The answer from Gemini broke off: terminated');
      },
      executeStep: unsupported,
      uploadGeminiFile: unsupported,
      uploadBlobFile: unsupported,
    };
    const events: AgentEvent[] = [];
    for await (const event of run(REQUEST, { backend, store: createMemoryInteractionStore(), drive }, { modelPolicy: { baseDelayMs: 1, maxDelayMs: 5 } })) events.push(event);
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    expect(attempts).toBe(2);
    expect(fake.requests.filter((request) => request.method === 'POST')).toHaveLength(1);
    expect(fake.files()).toEqual([expect.objectContaining({ name: 'Reports' })]);
  });
});

describe('the google-drive functions with hostile arguments', () => {
  it('refuse names past their limit, keep file paths inside /mnt/, and quote a long path cut', async () => {
    const { fake, drive } = googleDrive();
    const { responses } = await runCalls(drive, [
      [folder('x'.repeat(5000)), folder('   ')],
      [['system_write_file', { file_name: '../../etc/passwd', content: 'not a secret' }]],
      [upload('/mnt/../etc/passwd.txt', 'passwd'), upload('/etc/passwd', 'real'), upload(`/mnt/${'x'.repeat(100_000)}`, 'long')],
    ]);
    expect(responses).toEqual([
      { error: 'name must be 1 to 1000 characters' },
      { error: 'name must be 1 to 1000 characters' },
      { file_path: '/mnt/etc/passwd.txt' },
      { file_path: expect.stringMatching(/^\/mnt\//) },
      { error: 'file "/etc/passwd" not found' },
      { error: expect.stringMatching(/^file "\/mnt\/x+… \(100005 characters\)" not found$/) },
    ]);
    expect(fake.files().map((file) => file.name)).toEqual(['passwd']);
  });
});
