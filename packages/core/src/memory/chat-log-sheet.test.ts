import { describe, expect, it } from 'vitest';
import { fakeDriveClient } from '../../test/fake-drive-client.js';
import { createChatLogSheet, createSheetManager, MAX_RECALLED_CHARACTERS, MAX_RECALLED_ENTRIES } from './index.js';

function setup() {
  const { fake, drive } = fakeDriveClient('token');
  const sheets = createSheetManager({ drive, graph: { url: 'drive:/graph-1' } });
  const rows = async () => fake.sheetValues((await sheets.spreadsheetId()) as string, '__chat_log__');
  return { fake, drive, sheets, rows };
}

/** A memory spreadsheet for `drive:/graph-1` that already holds a chat log of `rows` (after its header, unless `header` is false). */
function withLog(rows: string[][], header = true) {
  const context = setup();
  context.fake.addFile({
    name: 'Memory for graph-1',
    mimeType: 'application/vnd.google-apps.spreadsheet',
    appProperties: { 'google-drive-connector': 'sheetgraph-1graph-1' },
    sheets: { intro: [['Memory']], __chat_log__: header ? [['timestamp', 'session_id', 'role', 'content'], ...rows] : rows },
  });
  return context;
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

  it('logs an answer once when the resume that saved it stopped before the run saved it, and is tried again', async () => {
    const { drive, rows } = setup();
    // Every segment of the session runs in a fresh process: a new manager and chat log, recalled first.
    const segment = async () => {
      const chatLog = createChatLogSheet({ sheets: createSheetManager({ drive, graph: { url: 'drive:/graph-1' } }), sessionId: 's1', now });
      await chatLog.recall();
      return chatLog;
    };
    const ask = { name: 'chat_request_user_input', args: { user_message: 'Your name?' } };
    await (await segment()).recordQuestion(ask);
    // The resume saves the answer, then its process dies before the run is saved; the resume is tried again.
    await (await segment()).recordAnswer(ask, { user_input: 'Ada' });
    const retried = await segment();
    await retried.recordAnswer(ask, { user_input: 'Ada' });
    expect((await rows())?.slice(1).map((row) => row.slice(2))).toEqual([
      ['agent', 'Your name?'],
      ['user', 'Ada'],
    ]);
    // The same question asked again and answered alike is a new exchange: both rows are kept.
    await retried.recordQuestion(ask);
    await (await segment()).recordAnswer(ask, { user_input: 'Ada' });
    expect((await rows())?.slice(1).map((row) => row.slice(2))).toEqual([
      ['agent', 'Your name?'],
      ['user', 'Ada'],
      ['agent', 'Your name?'],
      ['user', 'Ada'],
    ]);
    expect(await createChatLogSheet({ sheets: createSheetManager({ drive, graph: { url: 'drive:/graph-1' } }), sessionId: 's2' }).recall()).toHaveLength(4);
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

  it('recalls the latest entries that fit in MAX_RECALLED_CHARACTERS from a log of long answers', async () => {
    const long = Array.from({ length: 300 }, (_, index) => ['t', 'old', 'user', `${index} ${'x'.repeat(10_000)}`]);
    const { sheets } = withLog(long);
    const recalled = await createChatLogSheet({ sheets, sessionId: 'new' }).recall();
    const characters = recalled.reduce((sum, entry) => sum + entry.parts[0].text.length, 0);
    expect(characters).toBeLessThanOrEqual(MAX_RECALLED_CHARACTERS);
    expect(characters).toBeGreaterThan(MAX_RECALLED_CHARACTERS - 10_010);
    expect(recalled.map((entry) => Number(entry.parts[0].text.split(' ')[0]))).toEqual(Array.from({ length: recalled.length }, (_, index) => 300 - recalled.length + index));
  });

  it('keeps every row when two runs start and write at the same time, and each recalls the other', async () => {
    const { drive, sheets, rows } = setup();
    await sheets.createSheet('Notes', ['note']);
    const first = createChatLogSheet({ sheets: createSheetManager({ drive, graph: { url: 'drive:/graph-1' } }), sessionId: 'run-1', now });
    const second = createChatLogSheet({ sheets: createSheetManager({ drive, graph: { url: 'drive:/graph-1' } }), sessionId: 'run-2', now });
    expect(await Promise.all([first.recall(), second.recall()])).toEqual([[], []]);
    const ask = (text: string) => ({ name: 'chat_request_user_input', args: { user_message: text } });
    await Promise.all([
      first.recordQuestion(ask('First?')),
      second.recordQuestion(ask('Second?')),
      first.recordAnswer(ask('First?'), { user_input: 'one' }),
      second.recordAnswer(ask('Second?'), { user_input: 'two' }),
    ]);
    const written = (await rows())?.slice(1).map((row) => row.slice(1));
    expect(written).toHaveLength(4);
    expect(written).toEqual(
      expect.arrayContaining([
        ['run-1', 'agent', 'First?'],
        ['run-2', 'agent', 'Second?'],
        ['run-1', 'user', 'one'],
        ['run-2', 'user', 'two'],
      ]),
    );
    expect((await first.recall()).map((entry) => entry.parts[0].text).sort()).toEqual(['Second?', 'two']);
    expect((await second.recall()).map((entry) => entry.parts[0].text).sort()).toEqual(['First?', 'one']);
  });

  it('reads rows a person edited: skips short rows and repeated headers, ignores extra columns, reads the role in any case', async () => {
    const { sheets } = withLog([
      ['t', 'old', 'agent', 'Your name?'],
      ['t', 'old', 'user'],
      [],
      ['t', 'old', 'user', 'Ada', 'a note in E', 'and F'],
      ['Timestamp', 'Session_ID', 'Role', 'Content'],
      ['t', 'old', ' Agent ', '{"not": "json'],
      ['', '', 'MODEL', 'typed by hand'],
      ['t', 'old', 'someone', 'counted as the user'],
    ]);
    expect(await createChatLogSheet({ sheets, sessionId: 'new' }).recall()).toEqual([
      { role: 'model', parts: [{ text: 'Your name?' }] },
      { role: 'user', parts: [{ text: 'Ada' }] },
      { role: 'model', parts: [{ text: '{"not": "json' }] },
      { role: 'model', parts: [{ text: 'typed by hand' }] },
      { role: 'user', parts: [{ text: 'counted as the user' }] },
    ]);
  });

  it('recalls the first entry of a log whose header row a person deleted', async () => {
    const { sheets } = withLog(
      [
        ['t', 'old', 'agent', 'Your name?'],
        ['t', 'old', 'user', 'Ada'],
      ],
      false,
    );
    expect((await createChatLogSheet({ sheets, sessionId: 'new' }).recall()).map((entry) => entry.parts[0].text)).toEqual(['Your name?', 'Ada']);
  });
});
