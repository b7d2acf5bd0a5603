import { describe, expect, it } from 'vitest';
import { fakeDriveClient } from '../../test/fake-drive-client.js';
import type { DriveOperationsClient } from '../ports/index.js';
import type { FakeGoogleDrive } from '../testing/index.js';
import { createSheetManager, isSystemSheetName, memoryFileKey, parseSheetName, quoteSheetName, type SheetManager } from './index.js';

const TOKEN = 'ya29.memory-test';
const SPREADSHEET = 'application/vnd.google-apps.spreadsheet';

function setup(graph: { url: string; title?: string } = { url: 'drive:/graph-1', title: 'Trip planner' }) {
  const { fake, drive } = fakeDriveClient(TOKEN);
  return { fake, drive, sheets: createSheetManager({ drive, graph }) };
}

/**
 * The Drive clients of `processes` runs that start at the same moment: the first look-up of each is
 * answered only once every one has been, so all of them find nothing there yet.
 */
function startingTogether(drive: DriveOperationsClient, processes: number): DriveOperationsClient[] {
  const waiting: Array<() => void> = [];
  const arrive = () =>
    new Promise<void>((resolve) => {
      waiting.push(resolve);
      if (waiting.length === processes) for (const release of waiting) release();
    });
  return Array.from({ length: processes }, () => {
    let first = true;
    return {
      ...drive,
      async queryFiles(query, signal) {
        const files = await drive.queryFiles(query, signal);
        if (first) {
          first = false;
          await arrive();
        }
        return files;
      },
    };
  });
}

/** The calls the fake saw, as `METHOD path?query`. */
const calls = (fake: FakeGoogleDrive) =>
  fake.requests.map(({ method, path, query }) => `${method} ${path}${Object.keys(query).length ? `?${new URLSearchParams(query)}` : ''}`);

describe('createSheetManager', () => {
  it('creates one spreadsheet for the graph, marked with its key, with an intro tab, on first use', async () => {
    const { fake, sheets } = setup();
    await sheets.createSheet('Scores', ['player', 'score']);
    const [file] = fake.files();
    expect(file).toMatchObject({
      name: 'Memory for Trip planner',
      mimeType: SPREADSHEET,
      appProperties: { 'google-drive-connector': 'sheetgraph-1graph-1' },
    });
    expect(fake.sheets(file!.id as string)?.map((sheet) => sheet.title)).toEqual(['intro', 'Scores']);
    expect(fake.sheetValues(file!.id as string, 'intro')?.[0]?.[0]).toMatch(/memory of an agent/);
    expect(fake.sheetValues(file!.id as string, 'Scores')).toEqual([['player', 'score']]);
    const lookUp = `GET /drive/v3/files?q=${new URLSearchParams({ q: "appProperties has { key = 'google-drive-connector' and value = 'sheetgraph-1graph-1' } and trashed = false" }).toString().slice(2)}`;
    expect(calls(fake)).toEqual([
      lookUp,
      'POST /drive/v3/files',
      'POST /v4/spreadsheets/fake-file-1:batchUpdate',
      'PUT /v4/spreadsheets/fake-file-1/values/intro!A1?valueInputOption=USER_ENTERED',
      // Asked again once it is set up, in case another run created one at the same moment.
      lookUp,
      'POST /v4/spreadsheets/fake-file-1:batchUpdate',
      'PUT /v4/spreadsheets/fake-file-1/values/Scores!A1?valueInputOption=USER_ENTERED',
    ]);
    expect(fake.requests[2]?.body).toEqual({ requests: [{ updateSheetProperties: { properties: { sheetId: 0, title: 'intro' }, fields: 'title' } }] });
    expect(fake.requests[5]?.body).toEqual({ requests: [{ addSheet: { properties: { title: 'Scores' } } }] });
  });

  it('takes a new tab away again when its header cannot be written, so the create can be tried again', async () => {
    const { fake, sheets } = setup();
    await sheets.createSheet('Scores', ['player']);
    fake.failNext({ status: 400, method: 'PUT', path: '/values/' });
    await expect(sheets.createSheet('Games', ['title'])).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    const id = fake.files()[0]!.id as string;
    expect(fake.sheets(id)?.map((sheet) => sheet.title)).toEqual(['intro', 'Scores']);
    await sheets.createSheet('Games', ['title']);
    expect(fake.sheetValues(id, 'Games')).toEqual([['title']]);
  });

  it('finds the spreadsheet an earlier run created, and asks Drive only once per manager', async () => {
    const { fake, drive, sheets } = setup();
    await sheets.createSheet('Scores', ['player']);
    const later = createSheetManager({ drive, graph: { url: 'drive:/graph-1' } });
    const before = fake.requests.length;
    await later.updateSheet('Scores!A2', [['Ada']]);
    await later.readSheet('Scores!A1:A2');
    expect(fake.files()).toHaveLength(1);
    expect(calls(fake).slice(before).map((call) => call.split(' ')[0] + ' ' + call.split(' ')[1]?.split('?')[0])).toEqual([
      'GET /drive/v3/files',
      'PUT /v4/spreadsheets/fake-file-1/values/Scores!A2',
      'GET /v4/spreadsheets/fake-file-1/values/Scores!A1%3AA2',
    ]);
  });

  it('creates one spreadsheet when several first uses run at once', async () => {
    const { fake, sheets } = setup();
    await Promise.all([sheets.createSheet('A', ['x']), sheets.createSheet('B', ['y']), sheets.readSheet('intro!A1')]);
    expect(fake.files()).toHaveLength(1);
  });

  it('converges on one spreadsheet when two runs use the memory for the first time at the same moment, deleting none', async () => {
    const { fake, drive } = setup();
    const graph = { url: 'drive:/graph-1', title: 'Trip planner' };
    const [first, second] = startingTogether(drive, 2).map((client) => createSheetManager({ drive: client, graph })) as [SheetManager, SheetManager];
    await Promise.all([first.createSheet('Scores', ['player']), second.createSheet('Notes', ['note'])]);
    // Both found none and both created one; both now write to the same one.
    const ids = fake.files().map((file) => file.id as string);
    expect(ids).toHaveLength(2);
    const chosen = await first.spreadsheetId();
    expect(await second.spreadsheetId()).toBe(chosen);
    expect(fake.sheets(chosen as string)?.map((sheet) => sheet.title).sort()).toEqual(['Notes', 'Scores', 'intro']);
    await second.updateSheet('Notes!A2', [['from the second run']]);
    expect(fake.sheetValues(chosen as string, 'Notes')).toEqual([['note'], ['from the second run']]);
    // The other one is left in Drive, and a later run picks the same one as they did.
    const other = ids.find((id) => id !== chosen) as string;
    expect(fake.sheets(other)?.map((sheet) => sheet.title)).toEqual(['intro']);
    expect(await createSheetManager({ drive, graph }).spreadsheetId()).toBe(chosen);
  });

  it('takes the same one of several memory spreadsheets whatever order Drive lists them in: the oldest, else the smallest id', async () => {
    const { fake, drive } = setup();
    const seed = { name: 'Memory for Trip planner', mimeType: SPREADSHEET, appProperties: { 'google-drive-connector': 'sheetgraph-1graph-1' } };
    const first = fake.addFile(seed);
    fake.addFile(seed);
    const reversed: DriveOperationsClient = { ...drive, queryFiles: async (query, signal) => (await drive.queryFiles(query, signal)).reverse() };
    expect(await createSheetManager({ drive: reversed, graph: { url: 'drive:/graph-1' } }).spreadsheetId()).toBe(first);
    // A Drive client that reports when each was created: the oldest, even when its id sorts last.
    const dated: DriveOperationsClient = {
      ...drive,
      queryFiles: async () => [
        { id: 'a-newer', createdTime: '2026-03-02T10:00:00.000Z' },
        { id: 'z-older', createdTime: '2026-03-02T09:59:59.999Z' },
      ],
    };
    expect(await createSheetManager({ drive: dated, graph: { url: 'drive:/graph-1' } }).spreadsheetId()).toBe('z-older');
  });

  it('keeps the graphs of one user apart', async () => {
    const { fake, drive } = setup();
    await createSheetManager({ drive, graph: { url: 'drive:/one' } }).createSheet('Notes', ['n']);
    await createSheetManager({ drive, graph: { url: 'drive:/two' } }).createSheet('Notes', ['n']);
    expect(fake.files().map((file) => file.name)).toEqual(['Memory for one', 'Memory for two']);
  });

  it('lists memory sheets with their headers, leaving out the intro and the runtime tabs, without creating anything', async () => {
    const { fake, sheets } = setup();
    expect(await sheets.getSheetMetadata()).toEqual([]);
    expect(await sheets.listSheetNames()).toEqual([]);
    expect(await sheets.readSheetAsText('Scores')).toBeUndefined();
    expect(fake.files()).toEqual([]);

    await sheets.createSheet('My Scores', ['player', 'score']);
    await sheets.ensureSystemSheet('__chat_log__', ['timestamp', 'session_id', 'role', 'content']);
    await sheets.ensureSystemSheet('__chat_log__', ['timestamp', 'session_id', 'role', 'content']);
    expect(await sheets.getSheetMetadata()).toEqual([{ name: 'My Scores', file_path: '/mnt/memory/My%20Scores', columns: ['player', 'score'] }]);
    expect(await sheets.listSheetNames()).toEqual(['My Scores']);
    const spreadsheetId = fake.files()[0]?.id as string;
    expect(fake.sheets(spreadsheetId)?.filter((sheet) => sheet.title === '__chat_log__')).toHaveLength(1);
    expect(fake.requests.some((request) => request.path.endsWith("/values/'My%20Scores'!1%3A1"))).toBe(true);
  });

  it('passes a rate limit met while listing on as a rate limit, like every other call, and stops reading headers', async () => {
    const { fake, sheets } = setup();
    await sheets.createSheet('Notes', ['note']);
    await sheets.createSheet('Scores', ['player']);
    const headerReads = () => fake.requests.filter((request) => request.method === 'GET' && request.path.endsWith('!1%3A1')).length;

    fake.failNext({ status: 429, method: 'GET', path: '/values/' });
    const before = headerReads();
    const limited = await sheets.getSheetMetadata().catch((thrown: unknown) => thrown);
    expect(limited).toMatchObject({ code: 'RATE_LIMITED', message: expect.stringMatching(/^Drive API error: Quota exceeded/) });
    expect(headerReads() - before).toBe(1);

    // Sheets' other way of saying it: 403 with a rate-limit reason.
    const quota = { error: { code: 403, message: 'Quota exceeded', status: 'RESOURCE_EXHAUSTED', errors: [{ reason: 'rateLimitExceeded', domain: 'usageLimits' }] } };
    fake.failNext({ status: 403, method: 'GET', path: '/values/', body: quota });
    await expect(sheets.getSheetMetadata()).rejects.toMatchObject({ code: 'RATE_LIMITED' });

    // A failure of one tab's read still names the tab, keeps its code, and the other tabs are listed.
    fake.failNext({ status: 400, method: 'GET', path: '/values/' });
    await expect(sheets.getSheetMetadata()).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringMatching(/^Notes: /) });
    expect(await sheets.getSheetMetadata()).toEqual([
      { name: 'Notes', file_path: '/mnt/memory/Notes', columns: ['note'] },
      { name: 'Scores', file_path: '/mnt/memory/Scores', columns: ['player'] },
    ]);
  });

  it('reads a sheet as JSON text, and says there is no such sheet with undefined', async () => {
    const { sheets } = setup();
    await sheets.createSheet('Scores', ['player', 'score']);
    await sheets.updateSheet('Scores!A2:B3', [['Ada', '42'], ['Bob', '007']]);
    expect(await sheets.readSheetAsText('Scores')).toBe(JSON.stringify([['player', 'score'], ['Ada', '42'], ['Bob', '7']]));
    expect(await sheets.readSheetAsText('Missing')).toBeUndefined();
  });

  it('deletes a sheet by name, and reports a missing one', async () => {
    const { fake, sheets } = setup();
    await sheets.createSheet('Scratch', ['x']);
    await sheets.deleteSheet('Scratch');
    expect(fake.sheets(fake.files()[0]?.id as string)?.map((sheet) => sheet.title)).toEqual(['intro']);
    await expect(sheets.deleteSheet('Scratch')).rejects.toMatchObject({ code: 'NOT_FOUND', message: 'Sheet "Scratch" not found.' });
  });

  it('passes Drive and Sheets refusals on as coded errors, and tries again after a failed look-up', async () => {
    const { fake, sheets } = setup();
    fake.failNext({ status: 500, path: '/drive/v3/files' });
    await expect(sheets.readSheet('intro!A1')).rejects.toMatchObject({ code: 'UPSTREAM_ERROR' });
    await sheets.createSheet('Scores', ['a']);
    await expect(sheets.createSheet('Scores', ['a'])).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('already exists') });
  });

  it('says the spreadsheet is gone when Drive no longer has it, then finds or starts one again instead of failing for the rest of the run', async () => {
    const { fake, drive, sheets } = setup();
    await sheets.createSheet('Scores', ['player']);
    const first = await sheets.spreadsheetId();
    await drive.deleteFile(first as string);
    const error = await sheets.readSheet('Scores!A1').catch((thrown: unknown) => thrown);
    expect(error).toMatchObject({ code: 'NOT_FOUND', message: expect.stringMatching(/^The memory spreadsheet is no longer in Google Drive/) });
    expect((error as Error).message).not.toContain(first);
    expect(await sheets.spreadsheetId()).toBeUndefined();
    expect(await sheets.getSheetMetadata()).toEqual([]);
    await sheets.createSheet('Scores', ['player']);
    expect(fake.files().map((file) => file.id)).toEqual([expect.not.stringMatching(`^${first}$`)]);
  });

  it('makes a tab wide enough for its columns, and grows a grid a write goes past instead of failing', async () => {
    const { sheets } = setup();
    const columns = Array.from({ length: 30 }, (_, index) => `c${index + 1}`);
    await sheets.createSheet('Wide', columns);
    expect((await sheets.readSheet('Wide!1:1'))[0]).toEqual(columns);
    // Past a new tab's 1000 rows and 26 columns: the grid grows to fit, and what was there stays.
    await sheets.createSheet('Log', ['when', 'what']);
    await sheets.updateSheet('Log!A2', [['monday', 'start']]);
    await sheets.updateSheet('Log!A1200:B1201', [['day 1199', 'late'], ['day 1200', 'later']]);
    await sheets.updateSheet('Log!AB5', [['far right']]);
    expect(await sheets.readSheet('Log!A1200:B1201')).toEqual([['day 1199', 'late'], ['day 1200', 'later']]);
    expect(await sheets.readSheet('Log!A2:B2')).toEqual([['monday', 'start']]);
    expect(await sheets.readSheet('Log!AB5')).toEqual([['far right']]);
    // Other refusals are passed on as they were.
    await expect(sheets.updateSheet('Nowhere!A2000', [['x']])).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });

  it('grows the grid for a write to an open-ended range past it, as for a bounded one', async () => {
    const { sheets } = setup();
    await sheets.createSheet('Log', ['when', 'what']);
    await sheets.updateSheet('Log!A2', [['monday', 'start']]);
    // Starts past a new tab's 1000 rows, with no end row.
    await sheets.updateSheet('Log!A1001:C', [['day 1000', 'late', 'x']]);
    // Starts inside the grid, but holds more rows than are left.
    const many = Array.from({ length: 1200 }, (_, index) => [`row ${index + 1}`]);
    await sheets.updateSheet('Log!D:D', many);
    // Whole rows, past the grid and wider than its 26 columns.
    await sheets.updateSheet('Log!1500:1500', [Array.from({ length: 30 }, (_, index) => `c${index + 1}`)]);
    expect(await sheets.readSheet('Log!A1001:C1001')).toEqual([['day 1000', 'late', 'x']]);
    expect(await sheets.readSheet('Log!D1200')).toEqual([['row 1200']]);
    expect(await sheets.readSheet('Log!AD1500')).toEqual([['c30']]);
    expect(await sheets.readSheet('Log!A2:B2')).toEqual([['monday', 'start']]);
  });

  it('needs a graph URL', () => {
    const { drive } = setup();
    expect(() => createSheetManager({ drive, graph: { url: ' ' } })).toThrow(expect.objectContaining({ code: 'BAD_REQUEST', message: expect.stringContaining('graph.url') }));
  });

  it('escapes quotes in the Drive query, so a graph id cannot widen it', async () => {
    const { fake, drive } = setup();
    fake.addFile({ name: 'Other', mimeType: SPREADSHEET, appProperties: { 'google-drive-connector': 'x' } });
    const sheets = createSheetManager({ drive, graph: { url: "drive:/a' or name contains '" } });
    expect(await sheets.spreadsheetId()).toBeUndefined();
    expect(fake.requests[0]?.query.q).toContain("value = 'sheeta\\' or name contains \\'a\\' or name contains \\'' }");
  });
});

describe('memory helpers', () => {
  it('derives the file key from the graph id, hashing ids too long for a Drive property', async () => {
    expect(await memoryFileKey('drive:/1abc')).toBe('sheet1abc1abc');
    expect(await memoryFileKey('drive:///1abc')).toBe('sheet1abc1abc');
    const long = await memoryFileKey(`https://example.com/graphs/${'x'.repeat(100)}`);
    expect(long).toMatch(/^sheet-sha256-[0-9a-f]{64}$/);
    expect(new TextEncoder().encode(`google-drive-connector${long}`).byteLength).toBeLessThanOrEqual(124);
  });

  it('parses and quotes sheet names in A1 ranges', () => {
    expect(parseSheetName("'My Sheet'!A1")).toBe('My Sheet');
    expect(parseSheetName("'It''s'!A1:B2")).toBe("It's");
    expect(parseSheetName('Scores!A1')).toBe('Scores');
    expect(parseSheetName('A1:B2')).toBeUndefined();
    expect(quoteSheetName('Scores')).toBe('Scores');
    expect(quoteSheetName('__chat_log__')).toBe('__chat_log__');
    expect(quoteSheetName('My Sheet')).toBe("'My Sheet'");
    expect(quoteSheetName("It's")).toBe("'It''s'");
    expect(quoteSheetName('AB12')).toBe("'AB12'");
    expect(isSystemSheetName('__chat_log__')).toBe(true);
    expect(isSystemSheetName('_notes')).toBe(false);
  });
});
