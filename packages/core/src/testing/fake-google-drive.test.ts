import { describe, expect, it } from 'vitest';
import { createFakeGoogleDrive, type FakeGoogleDrive } from './fake-google-drive.js';

const ORIGIN = 'http://google.test';
const TOKEN = 'ya29.fake-test-token';

async function call(
  fake: FakeGoogleDrive,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` },
): Promise<{ status: number; json: any; text: string; headers: Headers }> {
  const response = await fake.fetch(
    new Request(`${ORIGIN}${path}`, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    }),
  );
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, json, text, headers: response.headers };
}

async function newSpreadsheet(fake: FakeGoogleDrive, name = 'Memory'): Promise<string> {
  const created = await call(fake, 'POST', '/drive/v3/files', { name, mimeType: 'application/vnd.google-apps.spreadsheet' });
  return created.json.id as string;
}

const values = (id: string, range: string, suffix = '') => `/v4/spreadsheets/${id}/values/${encodeURIComponent(range)}${suffix}`;

describe('createFakeGoogleDrive: auth and routing', () => {
  it('refuses a request without a bearer token with the API error envelope', async () => {
    const fake = createFakeGoogleDrive();
    const drive = await call(fake, 'GET', '/drive/v3/files', undefined, {});
    expect(drive.status).toBe(401);
    expect(drive.headers.get('www-authenticate')).toContain('Bearer');
    expect(drive.json.error).toMatchObject({ code: 401, status: 'UNAUTHENTICATED', errors: [{ reason: 'required', location: 'Authorization' }] });
    const sheets = await call(fake, 'GET', '/v4/spreadsheets/x', undefined, {});
    expect(sheets.json).toEqual({ error: { code: 401, message: expect.stringContaining('missing required authentication credential'), status: 'UNAUTHENTICATED' } });
  });

  it('accepts only the configured token when one is set', async () => {
    const fake = createFakeGoogleDrive({ accessToken: TOKEN });
    const wrong = await call(fake, 'GET', '/drive/v3/files', undefined, { authorization: 'Bearer someone-else' });
    expect(wrong.status).toBe(401);
    expect(wrong.json.error.errors[0]).toMatchObject({ reason: 'authError', message: 'Invalid Credentials' });
    expect((await call(fake, 'GET', '/drive/v3/files')).status).toBe(200);
  });

  it('answers unknown paths with an HTML 404 page, as Google does', async () => {
    const fake = createFakeGoogleDrive();
    const answer = await call(fake, 'GET', '/drive/v2/nothing');
    expect(answer.status).toBe(404);
    expect(answer.headers.get('content-type')).toContain('text/html');
    expect(answer.json).toBeUndefined();
  });

  it('logs every request with its decoded query, parsed body and status', async () => {
    const fake = createFakeGoogleDrive();
    const id = await newSpreadsheet(fake);
    await call(fake, 'PUT', `${values(id, "'My Sheet'!A1")}?valueInputOption=USER_ENTERED`, { values: [['x']] });
    expect(fake.requests).toEqual([
      { method: 'POST', path: '/drive/v3/files', query: {}, body: { name: 'Memory', mimeType: 'application/vnd.google-apps.spreadsheet' }, status: 200 },
      {
        method: 'PUT',
        path: `/v4/spreadsheets/${id}/values/'My%20Sheet'!A1`,
        query: { valueInputOption: 'USER_ENTERED' },
        body: { values: [['x']] },
        status: 400,
      },
    ]);
  });
});

describe('createFakeGoogleDrive: files', () => {
  it('creates files with the default field set and a new spreadsheet with one Sheet1 tab', async () => {
    const fake = createFakeGoogleDrive();
    const created = await call(fake, 'POST', '/drive/v3/files', {
      name: 'Memory',
      mimeType: 'application/vnd.google-apps.spreadsheet',
      appProperties: { 'google-drive-connector': 'sheet-key' },
    });
    expect(created.json).toEqual({ kind: 'drive#file', id: created.json.id, name: 'Memory', mimeType: 'application/vnd.google-apps.spreadsheet' });
    const spreadsheet = await call(fake, 'GET', `/v4/spreadsheets/${created.json.id}`);
    expect(spreadsheet.json.sheets).toEqual([
      { properties: { sheetId: 0, title: 'Sheet1', index: 0, sheetType: 'GRID', gridProperties: { rowCount: 1000, columnCount: 26 } } },
    ]);
    const partial = await call(fake, 'GET', `/v4/spreadsheets/${created.json.id}?fields=sheets.properties(sheetId,title)`);
    expect(partial.json).toEqual({ sheets: [{ properties: { sheetId: 0, title: 'Sheet1' } }] });
    const withFields = await call(fake, 'GET', `/drive/v3/files/${created.json.id}?fields=id,appProperties`);
    expect(withFields.json).toEqual({ id: created.json.id, appProperties: { 'google-drive-connector': 'sheet-key' } });
  });

  it('filters files.list with the query subset and pages through results', async () => {
    const fake = createFakeGoogleDrive();
    const memory = fake.addFile({ name: 'Memory', mimeType: 'application/vnd.google-apps.spreadsheet', appProperties: { app: 'memory' } });
    fake.addFile({ name: 'Old memory', mimeType: 'application/vnd.google-apps.spreadsheet', appProperties: { app: 'memory' }, trashed: true });
    const folder = fake.addFile({ name: 'Reports', mimeType: 'application/vnd.google-apps.folder' });
    const report = fake.addFile({ name: 'Q1 report.pdf', mimeType: 'application/pdf', parents: [folder] });
    const list = async (q: string, extra = ''): Promise<string[]> =>
      ((await call(fake, 'GET', `/drive/v3/files?q=${encodeURIComponent(q)}${extra}`)).json.files as Array<{ id: string }>).map((file) => file.id);

    expect(await list("appProperties has { key='app' and value='memory' } and trashed = false")).toEqual([memory]);
    expect(await list("appProperties has { key = 'app' and value = 'memory' }")).toHaveLength(2);
    expect(await list(`'${folder}' in parents`)).toEqual([report]);
    expect(await list("name contains 'report' or mimeType = 'application/vnd.google-apps.folder'")).toEqual([folder, report]);
    expect(await list("not (mimeType = 'application/vnd.google-apps.spreadsheet') and trashed=false")).toEqual([folder, report]);
    expect(await list("name = 'It\\'s'")).toEqual([]);

    const bad = await call(fake, 'GET', `/drive/v3/files?q=${encodeURIComponent('modifiedTime > 3')}`);
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ code: 400, message: 'Invalid Value', errors: [{ reason: 'invalid', location: 'q', locationType: 'parameter' }] });

    const first = await call(fake, 'GET', '/drive/v3/files?pageSize=3');
    expect(first.json).toMatchObject({ kind: 'drive#fileList', incompleteSearch: false, nextPageToken: expect.any(String) });
    expect(first.json.files).toHaveLength(3);
    expect(first.json.files[0]).toEqual({ kind: 'drive#file', id: memory, name: 'Memory', mimeType: 'application/vnd.google-apps.spreadsheet' });
    const second = await call(fake, 'GET', `/drive/v3/files?pageSize=3&pageToken=${first.json.nextPageToken}`);
    expect(second.json.files.map((file: { id: string }) => file.id)).toEqual([report]);
    expect(second.json.nextPageToken).toBeUndefined();
  });

  it('serves content with alt=media, refuses it for Docs editors files, and 404s unknown ids', async () => {
    const fake = createFakeGoogleDrive();
    const text = fake.addFile({ name: 'notes.txt', mimeType: 'text/plain', content: 'hello' });
    const media = await call(fake, 'GET', `/drive/v3/files/${text}?alt=media`);
    expect(media).toMatchObject({ status: 200, text: 'hello' });
    expect(media.headers.get('content-type')).toBe('text/plain');

    const sheet = fake.addFile({ name: 'S', mimeType: 'application/vnd.google-apps.spreadsheet' });
    const refused = await call(fake, 'GET', `/drive/v3/files/${sheet}?alt=media`);
    expect(refused.status).toBe(403);
    expect(refused.json.error.errors[0].reason).toBe('fileNotDownloadable');

    const missing = await call(fake, 'GET', '/drive/v3/files/nope');
    expect(missing.json).toEqual({
      error: { code: 404, message: 'File not found: nope.', errors: [{ message: 'File not found: nope.', domain: 'global', reason: 'notFound', location: 'fileId', locationType: 'parameter' }] },
    });
  });

  it('deletes a folder with the files inside it, answering 204', async () => {
    const fake = createFakeGoogleDrive();
    const folder = fake.addFile({ name: 'F', mimeType: 'application/vnd.google-apps.folder' });
    const inside = fake.addFile({ name: 'a.txt', mimeType: 'text/plain', parents: [folder] });
    const outside = fake.addFile({ name: 'b.txt', mimeType: 'text/plain' });
    const deleted = await call(fake, 'DELETE', `/drive/v3/files/${folder}`);
    expect(deleted).toMatchObject({ status: 204, text: '' });
    expect(fake.file(inside)).toBeUndefined();
    expect(fake.file(outside)).toBeDefined();
    expect((await call(fake, 'DELETE', `/drive/v3/files/${folder}`)).status).toBe(404);
  });

  it('takes multipart uploads and converts CSV into a spreadsheet when asked', async () => {
    const fake = createFakeGoogleDrive();
    const boundary = 'b0undary';
    const body = (metadata: unknown, type: string, content: string) =>
      `--${boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n${JSON.stringify(metadata)}\r\n--${boundary}\r\nContent-Type: ${type}\r\n\r\n${content}\r\n--${boundary}--\r\n`;
    const upload = (metadata: unknown, type: string, content: string) =>
      fake.fetch(
        new Request(`${ORIGIN}/upload/drive/v3/files?uploadType=multipart`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': `multipart/related; boundary=${boundary}` },
          body: body(metadata, type, content),
        }),
      );
    const plain = (await (await upload({ name: 'a.txt' }, 'text/plain', 'line one\r\nline two')).json()) as { id: string; mimeType: string };
    expect(plain.mimeType).toBe('text/plain');
    expect(new TextDecoder().decode(fake.media(plain.id))).toBe('line one\r\nline two');
    expect(fake.requests[0]?.body).toEqual({ metadata: { name: 'a.txt' }, media: { mimeType: 'text/plain', size: 18 } });

    const converted = (await (
      await upload({ name: 'Scores', mimeType: 'application/vnd.google-apps.spreadsheet' }, 'text/csv', 'name,score\n"Ada, L.",42\n')
    ).json()) as { id: string; mimeType: string };
    expect(converted.mimeType).toBe('application/vnd.google-apps.spreadsheet');
    expect(fake.sheetValues(converted.id, 'Sheet1')).toEqual([
      ['name', 'score'],
      ['Ada, L.', '42'],
    ]);
    const malformed = await fake.fetch(
      new Request(`${ORIGIN}/upload/drive/v3/files?uploadType=multipart`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': `multipart/related; boundary=${boundary}` },
        body: 'no parts here',
      }),
    );
    expect(malformed.status).toBe(400);
  });
});

describe('createFakeGoogleDrive: values', () => {
  it('reads whole tabs, quoted names, open ranges and single cells, trimming empty edges', async () => {
    const fake = createFakeGoogleDrive();
    const id = fake.addFile({
      name: 'M',
      mimeType: 'application/vnd.google-apps.spreadsheet',
      sheets: {
        Sheet1: [
          ['a', 'b', ''],
          [],
          ['c', '', 'd'],
        ],
        'My Sheet': [['x', 'y', 'z', 'w']],
        Empty: [],
      },
    });
    expect((await call(fake, 'GET', values(id, 'Sheet1'))).json).toEqual({
      range: 'Sheet1!A1:Z1000',
      majorDimension: 'ROWS',
      values: [['a', 'b'], [], ['c', '', 'd']],
    });
    expect((await call(fake, 'GET', values(id, "'My Sheet'!A1:C"))).json).toEqual({
      range: "'My Sheet'!A1:C1000",
      majorDimension: 'ROWS',
      values: [['x', 'y', 'z']],
    });
    expect((await call(fake, 'GET', values(id, 'Sheet1!B:ZZ'))).json.range).toBe('Sheet1!B1:Z1000');
    expect((await call(fake, 'GET', values(id, 'Sheet1!1:1'))).json.values).toEqual([['a', 'b']]);
    expect((await call(fake, 'GET', values(id, 'Sheet1!C3'))).json).toEqual({ range: 'Sheet1!C3', majorDimension: 'ROWS', values: [['d']] });
    expect((await call(fake, 'GET', values(id, 'A1:A3'))).json.values).toEqual([['a'], [], ['c']]);
    expect((await call(fake, 'GET', values(id, 'Empty'))).json).toEqual({ range: 'Empty!A1:Z1000', majorDimension: 'ROWS' });
    const unknown = await call(fake, 'GET', values(id, 'Nope!A1'));
    expect(unknown.json).toEqual({ error: { code: 400, message: 'Unable to parse range: Nope!A1', status: 'INVALID_ARGUMENT' } });
  });

  it('parses USER_ENTERED values as typed, keeps RAW ones, and requires valueInputOption', async () => {
    const fake = createFakeGoogleDrive();
    const id = await newSpreadsheet(fake);
    const written = await call(fake, 'PUT', `${values(id, 'Sheet1!A1')}?valueInputOption=USER_ENTERED`, {
      values: [['007', "'007", 'true', 'hello', 1.5, false]],
    });
    expect(written.json).toEqual({ spreadsheetId: id, updatedRange: 'Sheet1!A1:F1', updatedRows: 1, updatedColumns: 6, updatedCells: 6 });
    await call(fake, 'PUT', `${values(id, 'Sheet1!A2')}?valueInputOption=RAW`, { values: [['007', "'007"]] });
    await call(fake, 'PUT', `${values(id, 'Sheet1!A1')}?valueInputOption=RAW`, { values: [[null, 'kept-null-cell']] });
    expect(fake.sheetValues(id, 'Sheet1')).toEqual([
      ['7', 'kept-null-cell', 'TRUE', 'hello', '1.5', 'FALSE'],
      ['007', "'007"],
    ]);
    const missing = await call(fake, 'PUT', values(id, 'Sheet1!A1'), { values: [['x']] });
    expect(missing.json.error).toEqual({ code: 400, message: "'valueInputOption' is required but not specified", status: 'INVALID_ARGUMENT' });
  });

  it('refuses writes outside an explicit range or past the grid', async () => {
    const fake = createFakeGoogleDrive();
    const id = await newSpreadsheet(fake);
    const outside = await call(fake, 'PUT', `${values(id, 'Sheet1!A1:B1')}?valueInputOption=RAW`, { values: [['a', 'b', 'c']] });
    expect(outside.json.error.message).toBe('Requested writing within range [Sheet1!A1:B1], but tried writing to column [C]');
    const below = await call(fake, 'PUT', `${values(id, 'Sheet1!A1:B1')}?valueInputOption=RAW`, { values: [['a'], ['b']] });
    expect(below.json.error.message).toBe('Requested writing within range [Sheet1!A1:B1], but tried writing to row [2]');
    const past = await call(fake, 'PUT', `${values(id, 'Sheet1!Z1')}?valueInputOption=RAW`, { values: [['a', 'b']] });
    expect(past.json.error.message).toBe("Range (Sheet1!AA1) exceeds grid limits. Max rows: 1000, max columns: 26");
    expect(fake.sheetValues(id, 'Sheet1')).toEqual([]);
  });

  it('appends after the table found in the range and reports tableRange and updates', async () => {
    const fake = createFakeGoogleDrive();
    const id = await newSpreadsheet(fake);
    await call(fake, 'PUT', `${values(id, 'Sheet1!A1')}?valueInputOption=USER_ENTERED`, { values: [['timestamp', 'session', 'role', 'content']] });
    const first = await call(fake, 'POST', `${values(id, 'Sheet1!A:D', ':append')}?valueInputOption=USER_ENTERED`, {
      values: [['t1', 's', 'agent', 'What is your name?']],
    });
    expect(first.json).toEqual({
      spreadsheetId: id,
      tableRange: 'Sheet1!A1:D1',
      updates: { spreadsheetId: id, updatedRange: 'Sheet1!A2:D2', updatedRows: 1, updatedColumns: 4, updatedCells: 4 },
    });
    const second = await call(fake, 'POST', `${values(id, 'Sheet1!A:D', ':append')}?valueInputOption=USER_ENTERED`, { values: [['t2', 's', 'user', 'Ada']] });
    expect(second.json.tableRange).toBe('Sheet1!A1:D2');
    expect(second.json.updates.updatedRange).toBe('Sheet1!A3:D3');
    expect(fake.sheetValues(id, 'Sheet1')).toHaveLength(3);

    const empty = fake.addFile({ name: 'E', mimeType: 'application/vnd.google-apps.spreadsheet' });
    const into = await call(fake, 'POST', `${values(empty, 'Sheet1', ':append')}?valueInputOption=RAW`, { values: [['x']] });
    expect(into.json).toEqual({ spreadsheetId: empty, updates: { spreadsheetId: empty, updatedRange: 'Sheet1!A1', updatedRows: 1, updatedColumns: 1, updatedCells: 1 } });
  });

  it('grows the grid when an append runs past its last row', async () => {
    const fake = createFakeGoogleDrive();
    const rows = Array.from({ length: 1000 }, (_, index) => [`row ${index + 1}`]);
    const id = fake.addFile({ name: 'Full', mimeType: 'application/vnd.google-apps.spreadsheet', sheets: { Log: rows } });
    const appended = await call(fake, 'POST', `${values(id, 'Log!A:A', ':append')}?valueInputOption=RAW`, { values: [['row 1001']] });
    expect(appended.json.updates.updatedRange).toBe('Log!A1001');
    expect(fake.sheets(id)?.[0]?.gridProperties).toEqual({ rowCount: 1001, columnCount: 26 });
  });
});

describe('createFakeGoogleDrive: batchUpdate', () => {
  it('adds, renames and deletes tabs, with one reply per request', async () => {
    const fake = createFakeGoogleDrive();
    const id = await newSpreadsheet(fake);
    const answer = await call(fake, 'POST', `/v4/spreadsheets/${id}:batchUpdate`, {
      requests: [
        { updateSheetProperties: { properties: { sheetId: 0, title: 'intro' }, fields: 'title' } },
        { addSheet: { properties: { title: 'Scores' } } },
        { addSheet: { properties: { title: 'Tmp', index: 0 } } },
      ],
    });
    expect(answer.status).toBe(200);
    expect(answer.json.spreadsheetId).toBe(id);
    expect(answer.json.replies[0]).toEqual({});
    expect(answer.json.replies[1].addSheet.properties).toMatchObject({ title: 'Scores', index: 1, sheetType: 'GRID', gridProperties: { rowCount: 1000, columnCount: 26 } });
    const tmp = answer.json.replies[2].addSheet.properties as { sheetId: number; index: number };
    expect(tmp.index).toBe(0);
    expect(fake.sheets(id)?.map((sheet) => sheet.title)).toEqual(['Tmp', 'intro', 'Scores']);
    await call(fake, 'POST', `/v4/spreadsheets/${id}:batchUpdate`, { requests: [{ deleteSheet: { sheetId: tmp.sheetId } }] });
    expect(fake.sheets(id)?.map((sheet) => [sheet.title, sheet.index])).toEqual([
      ['intro', 0],
      ['Scores', 1],
    ]);
  });

  it('applies nothing when any request is invalid', async () => {
    const fake = createFakeGoogleDrive();
    const id = await newSpreadsheet(fake);
    const batch = (requests: unknown[]) => call(fake, 'POST', `/v4/spreadsheets/${id}:batchUpdate`, { requests });
    const failed = await batch([{ addSheet: { properties: { title: 'New' } } }, { deleteSheet: { sheetId: 99 } }]);
    expect(failed.json.error).toEqual({ code: 400, message: 'Invalid requests[1].deleteSheet: No grid with id: 99', status: 'INVALID_ARGUMENT' });
    expect(fake.sheets(id)?.map((sheet) => sheet.title)).toEqual(['Sheet1']);

    expect((await batch([{ addSheet: { properties: { title: 'sheet1' } } }])).json.error.message).toBe(
      'Invalid requests[0].addSheet: A sheet with the name "sheet1" already exists. Please enter another name.',
    );
    expect((await batch([{ deleteSheet: {} }])).json.error.message).toBe("Invalid requests[0].deleteSheet: You can't remove all the sheets in a document.");
    expect((await batch([{ updateSheetProperties: { properties: { title: 'x' } } }])).json.error.message).toBe(
      'Invalid requests[0].updateSheetProperties: You must specify which fields to update.',
    );
    // An omitted sheetId means 0.
    expect((await batch([{ updateSheetProperties: { properties: { title: 'renamed' }, fields: 'title' } }])).status).toBe(200);
    expect(fake.sheets(id)?.[0]?.title).toBe('renamed');
  });

  it('answers Sheets calls on unknown ids with 404 and on other files with 400', async () => {
    const fake = createFakeGoogleDrive();
    expect((await call(fake, 'GET', '/v4/spreadsheets/missing')).json).toEqual({
      error: { code: 404, message: 'Requested entity was not found.', status: 'NOT_FOUND' },
    });
    const text = fake.addFile({ name: 'a.txt', mimeType: 'text/plain' });
    expect((await call(fake, 'GET', values(text, 'A1'))).json.error.status).toBe('FAILED_PRECONDITION');
  });
});

describe('createFakeGoogleDrive: failNext', () => {
  it('fails the matching requests the given number of times with the API error body, then serves them', async () => {
    const fake = createFakeGoogleDrive();
    const id = await newSpreadsheet(fake);
    fake.failNext({ status: 429, times: 2, path: '/values/', headers: { 'retry-after': '1' } });
    const other = await call(fake, 'GET', `/v4/spreadsheets/${id}`);
    expect(other.status).toBe(200);
    const limited = await call(fake, 'GET', values(id, 'Sheet1'));
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('1');
    expect(limited.json.error).toMatchObject({ code: 429, status: 'RESOURCE_EXHAUSTED' });
    expect((await call(fake, 'GET', values(id, 'Sheet1'))).status).toBe(429);
    expect((await call(fake, 'GET', values(id, 'Sheet1'))).status).toBe(200);

    fake.failNext({ status: 403, method: 'GET', path: /\/drive\/v3\/files$/ });
    const drive = await call(fake, 'GET', '/drive/v3/files');
    expect(drive.json.error.errors[0]).toMatchObject({ domain: 'usageLimits', reason: 'userRateLimitExceeded' });
    expect(fake.requests.map((request) => request.status)).toEqual([200, 200, 429, 429, 200, 403]);
  });
});
