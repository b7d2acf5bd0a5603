import { describe, expect, it } from 'vitest';
import { createHttpDriveOperationsClient } from '../http/index.js';
import { createFakeGoogleDrive } from '../testing/index.js';
import { createChatLogSheet, createSheetManager, MAX_RECALLED_ENTRIES } from './index.js';

function setup() {
  const fake = createFakeGoogleDrive();
  const drive = createHttpDriveOperationsClient({
    fetch: (input, init) => fake.fetch(new Request(input, init)),
    getAccessToken: () => 'token',
    baseUrls: fake.baseUrls('http://google.test'),
  });
  const sheets = createSheetManager({ drive, graph: { url: 'drive:/graph-1' } });
  const rows = async () => fake.sheetValues((await sheets.spreadsheetId()) as string, '__chat_log__');
  return { fake, sheets, rows };
}

const now = () => new Date('2026-05-04T10:00:00.000Z');

describe('createChatLogSheet', () => {
  it('creates the __chat_log__ tab with its header, and recalls nothing the first time', async () => {
    const { sheets, rows } = setup();
    const chatLog = createChatLogSheet({ sheets, sessionId: 's1' });
    expect(await chatLog.recall()).toEqual([]);
    expect(await rows()).toEqual([['timestamp', 'session_id', 'role', 'content']]);
  });

  it('writes questions and answers as text rows tagged with the session, and another session recalls them', async () => {
    const { sheets, rows } = setup();
    const first = createChatLogSheet({ sheets, sessionId: 's1', now });
    await first.recall();
    const ask = { name: 'chat_request_user_input', args: { user_message: 'Your name?' } };
    await first.recordQuestion(ask);
    await first.recordAnswer(ask, { user_input: '=1+1' });
    const choose = {
      name: 'chat_present_choices',
      args: { user_message: 'When?', choices: [{ id: 'am', label: 'Morning' }, { id: 'pm', label: 'Evening' }] },
    };
    await first.recordQuestion(choose);
    await first.recordAnswer(choose, { selected: ['pm', 'am'] });
    await first.recordQuestion({ name: 'system_list_files', args: { user_message: 'not a question' } });
    await first.recordAnswer({ name: 'chat_request_user_input', args: { user_message: 'Skip?' } }, { skipped: true });
    expect(await rows()).toEqual([
      ['timestamp', 'session_id', 'role', 'content'],
      ['2026-05-04T10:00:00.000Z', 's1', 'agent', 'Your name?'],
      ['2026-05-04T10:00:00.000Z', 's1', 'user', '=1+1'],
      ['2026-05-04T10:00:00.000Z', 's1', 'agent', 'When?'],
      ['2026-05-04T10:00:00.000Z', 's1', 'user', 'Evening, Morning'],
    ]);

    // The same session recalls none of its own rows: its history holds them.
    expect(await first.recall()).toEqual([]);
    const second = createChatLogSheet({ sheets, sessionId: 's2' });
    expect(await second.recall()).toEqual([
      { role: 'model', parts: [{ text: 'Your name?' }] },
      { role: 'user', parts: [{ text: '=1+1' }] },
      { role: 'model', parts: [{ text: 'When?' }] },
      { role: 'user', parts: [{ text: 'Evening, Morning' }] },
    ]);
  });

  it('skips rows too short to be entries, and recalls only the latest entries of a long log', async () => {
    const { sheets } = setup();
    await sheets.ensureSystemSheet('__chat_log__', ['timestamp', 'session_id', 'role', 'content']);
    const old = Array.from({ length: MAX_RECALLED_ENTRIES + 5 }, (_, index) => ['t', 'old', index % 2 ? 'user' : 'agent', `line ${index}`]);
    await sheets.appendToSheet('__chat_log__!A:D', [['t', 'old', 'agent'], ...old]);
    const recalled = await createChatLogSheet({ sheets, sessionId: 'new' }).recall();
    expect(recalled).toHaveLength(MAX_RECALLED_ENTRIES);
    expect(recalled.at(-1)).toEqual({ role: 'model', parts: [{ text: `line ${MAX_RECALLED_ENTRIES + 4}` }] });
    expect(recalled[0]).toEqual({ role: 'user', parts: [{ text: 'line 5' }] });
  });
});
