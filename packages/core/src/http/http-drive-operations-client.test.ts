import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { isAgentError } from '../errors/index.js';
import { createFakeGoogleDrive, type FakeGoogleDrive } from '../testing/fake-google-drive.js';
import { createHttpDriveOperationsClient, type HttpDriveOperationsClientOptions } from './http-drive-operations-client.js';

const TOKEN = 'ya29.a0AfB_byC-secret-access-token-0123456789';
const SPREADSHEET = 'application/vnd.google-apps.spreadsheet';

type Handler = (request: Request) => Promise<Response>;

const servers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((close) => close()));
});

/** Serves a Web handler on a real loopback port. */
async function serve(handler: Handler): Promise<string> {
  const server = createServer((incoming: IncomingMessage, outgoing: ServerResponse) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of incoming) chunks.push(chunk as Buffer);
      const headers = new Headers();
      for (const [name, value] of Object.entries(incoming.headers)) if (typeof value === 'string') headers.set(name, value);
      const hasBody = incoming.method !== 'GET' && incoming.method !== 'HEAD' && chunks.length > 0;
      const request = new Request(`http://${incoming.headers.host}${incoming.url}`, {
        method: incoming.method ?? 'GET',
        headers,
        ...(hasBody ? { body: Buffer.concat(chunks) } : {}),
      });
      const response = await handler(request);
      outgoing.writeHead(response.status, Object.fromEntries([...response.headers]));
      const reader = response.body?.getReader();
      while (reader && !outgoing.destroyed) {
        const { done, value } = await reader.read();
        if (done) break;
        if (!outgoing.write(value)) await drained(outgoing);
      }
      await reader?.cancel().catch(() => undefined);
      outgoing.end();
    })().catch(() => outgoing.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(
    () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

interface Setup {
  fake: FakeGoogleDrive;
  url: string;
  tokens: number;
  client: ReturnType<typeof createHttpDriveOperationsClient>;
}

async function setup(overrides: Partial<HttpDriveOperationsClientOptions> = {}, handler?: (fake: FakeGoogleDrive) => Handler): Promise<Setup> {
  const fake = createFakeGoogleDrive({ accessToken: TOKEN });
  const url = await serve(handler ? handler(fake) : fake.fetch);
  const state: Setup = { fake, url, tokens: 0, client: undefined as never };
  state.client = createHttpDriveOperationsClient({
    fetch,
    getAccessToken: async () => {
      state.tokens += 1;
      return TOKEN;
    },
    baseUrls: fake.baseUrls(url),
    retry: { baseDelayMs: 1, maxDelayMs: 5 },
    ...overrides,
  });
  return state;
}

async function failure(promise: Promise<unknown>): Promise<{ code: string; message: string; details?: Record<string, unknown> }> {
  try {
    await promise;
  } catch (error) {
    if (!isAgentError(error)) throw error;
    expect(error.message).not.toContain(TOKEN);
    expect(JSON.stringify(error.details ?? {})).not.toContain(TOKEN);
    return { code: error.code, message: error.message, ...(error.details ? { details: error.details } : {}) };
  }
  throw new Error('expected the call to fail');
}

const bare = (path: string) => path;

describe('createHttpDriveOperationsClient: operations', () => {
  it('finds, creates and prepares a memory spreadsheet with the exact REST calls', async () => {
    const { client, fake } = await setup();
    const query = "appProperties has { key = 'google-drive-connector' and value = 'sheetgraphgraph' } and trashed = false";
    expect(await client.queryFiles(query)).toEqual([]);

    const file = await client.createFile({ name: 'Memory for Demo', mimeType: SPREADSHEET, appProperties: { 'google-drive-connector': 'sheetgraphgraph' } });
    expect(file).toEqual({ kind: 'drive#file', id: file.id, name: 'Memory for Demo', mimeType: SPREADSHEET });
    expect((await client.queryFiles(query)).map((found) => found.id)).toEqual([file.id]);

    await client.updateSpreadsheet(file.id, [{ updateSheetProperties: { properties: { sheetId: 0, title: 'intro' }, fields: 'title' } }]);
    await client.setSpreadsheetValues(file.id, 'intro!A1', [['This spreadsheet is the agent memory.']]);
    await client.updateSpreadsheet(file.id, [{ addSheet: { properties: { title: 'My Scores' } } }]);
    await client.setSpreadsheetValues(file.id, "'My Scores'!A1", [['name', 'score']]);
    await client.appendSpreadsheetValues(file.id, "'My Scores'!A:B", [['Ada', '42']]);
    await client.appendSpreadsheetValues(file.id, "'My Scores'!A:B", [['Grace', '0041']]);

    expect(await client.getSpreadsheetValues(file.id, "'My Scores'!A1:B3")).toEqual([
      ['name', 'score'],
      ['Ada', '42'],
      ['Grace', '41'],
    ]);
    expect(await client.getSpreadsheetValues(file.id, "'My Scores'!D:E")).toEqual([]);
    const metadata = await client.getSpreadsheetMetadata(file.id);
    expect(metadata.sheets.map((sheet) => [sheet.properties.sheetId === 0, sheet.properties.title, sheet.properties.index])).toEqual([
      [true, 'intro', 0],
      [false, 'My Scores', 1],
    ]);

    const id = file.id;
    const values = (range: string) => `/v4/spreadsheets/${id}/values/${encodeURIComponent(range)}`;
    expect(fake.requests.map(({ method, path, query: params, body }) => ({ method, path, query: params, body }))).toEqual([
      { method: 'GET', path: '/drive/v3/files', query: { q: query }, body: undefined },
      {
        method: 'POST',
        path: '/drive/v3/files',
        query: {},
        body: { name: 'Memory for Demo', mimeType: SPREADSHEET, appProperties: { 'google-drive-connector': 'sheetgraphgraph' } },
      },
      { method: 'GET', path: '/drive/v3/files', query: { q: query }, body: undefined },
      {
        method: 'POST',
        path: `/v4/spreadsheets/${id}:batchUpdate`,
        query: {},
        body: { requests: [{ updateSheetProperties: { properties: { sheetId: 0, title: 'intro' }, fields: 'title' } }] },
      },
      { method: 'PUT', path: values('intro!A1'), query: { valueInputOption: 'USER_ENTERED' }, body: { values: [['This spreadsheet is the agent memory.']] } },
      { method: 'POST', path: `/v4/spreadsheets/${id}:batchUpdate`, query: {}, body: { requests: [{ addSheet: { properties: { title: 'My Scores' } } }] } },
      { method: 'PUT', path: values("'My Scores'!A1"), query: { valueInputOption: 'USER_ENTERED' }, body: { values: [['name', 'score']] } },
      { method: 'POST', path: `${values("'My Scores'!A:B")}:append`, query: { valueInputOption: 'USER_ENTERED' }, body: { values: [['Ada', '42']] } },
      { method: 'POST', path: `${values("'My Scores'!A:B")}:append`, query: { valueInputOption: 'USER_ENTERED' }, body: { values: [['Grace', '0041']] } },
      { method: 'GET', path: values("'My Scores'!A1:B3"), query: {}, body: undefined },
      { method: 'GET', path: values("'My Scores'!D:E"), query: {}, body: undefined },
      { method: 'GET', path: `/v4/spreadsheets/${id}`, query: { fields: 'sheets.properties' }, body: undefined },
    ]);
    expect(fake.requests.every((request) => request.status === 200)).toBe(true);
    expect(fake.sheetValues(id, 'intro')).toEqual([['This spreadsheet is the agent memory.']]);
  });

  it('reads metadata and content, uploads, and deletes files', async () => {
    const { client, fake } = await setup();
    const bytes = new Uint8Array([0, 1, 2, 250, 255]);
    const uploaded = await client.uploadFile!({ name: 'data.bin', appProperties: { origin: 'agent' } }, { data: bytes, mimeType: 'application/octet-stream' });
    expect(uploaded).toMatchObject({ name: 'data.bin', mimeType: 'application/octet-stream' });
    expect(await client.getFile(uploaded.id)).toEqual({ kind: 'drive#file', id: uploaded.id, name: 'data.bin', mimeType: 'application/octet-stream' });
    expect(await client.getFileMedia(uploaded.id)).toEqual(bytes);
    expect(fake.file(uploaded.id)?.appProperties).toEqual({ origin: 'agent' });

    const csv = await client.uploadFile!({ name: 'Scores', mimeType: SPREADSHEET }, { data: new TextEncoder().encode('a,b\n1,2\n'), mimeType: 'text/csv' });
    expect(await client.getSpreadsheetValues(csv.id, 'Sheet1')).toEqual([
      ['a', 'b'],
      ['1', '2'],
    ]);
    const folder = await client.createFile({ name: 'Agent files', mimeType: 'application/vnd.google-apps.folder' });
    expect(folder.mimeType).toBe('application/vnd.google-apps.folder');

    await client.deleteFile(uploaded.id);
    expect(fake.file(uploaded.id)).toBeUndefined();
    const upload = fake.requests[0]!;
    expect(upload).toMatchObject({
      method: 'POST',
      path: '/upload/drive/v3/files',
      query: { uploadType: 'multipart' },
      body: { metadata: { name: 'data.bin', appProperties: { origin: 'agent' } }, media: { mimeType: 'application/octet-stream', size: 5 } },
    });
    expect(fake.requests.map((request) => `${request.method} ${bare(request.path)}${request.query.alt ? `?alt=${request.query.alt}` : ''} ${request.status}`)).toEqual([
      'POST /upload/drive/v3/files 200',
      `GET /drive/v3/files/${uploaded.id} 200`,
      `GET /drive/v3/files/${uploaded.id}?alt=media 200`,
      'POST /upload/drive/v3/files 200',
      `GET /v4/spreadsheets/${csv.id}/values/Sheet1 200`,
      'POST /drive/v3/files 200',
      `DELETE /drive/v3/files/${uploaded.id} 204`,
    ]);
  });

  it('follows nextPageToken until every matching file is listed', async () => {
    const { client, fake } = await setup();
    for (let index = 0; index < 130; index += 1) fake.addFile({ name: `note ${index}`, mimeType: 'text/plain' });
    fake.addFile({ name: 'other', mimeType: 'application/pdf' });
    const files = await client.queryFiles("mimeType = 'text/plain'");
    expect(files).toHaveLength(130);
    expect(fake.requests.map((request) => request.query)).toEqual([
      { q: "mimeType = 'text/plain'" },
      { q: "mimeType = 'text/plain'", pageToken: expect.any(String) },
    ]);
  });
});

describe('createHttpDriveOperationsClient: errors', () => {
  it('maps Drive and Sheets refusals to coded errors with the API message', async () => {
    const { client } = await setup();
    expect(await failure(client.getFile('missing-id'))).toMatchObject({
      code: 'NOT_FOUND',
      message: 'Drive API error: File not found: missing-id.',
      details: { operation: 'getFile', status: 404, reason: 'notFound' },
    });
    expect(await failure(client.getSpreadsheetValues('missing-id', 'A1'))).toMatchObject({
      code: 'NOT_FOUND',
      message: 'Drive API error: Requested entity was not found.',
      details: { providerStatus: 'NOT_FOUND' },
    });
    const sheet = await client.createFile({ name: 'S', mimeType: SPREADSHEET });
    expect(await failure(client.getSpreadsheetValues(sheet.id, 'Nope!A1'))).toMatchObject({
      code: 'BAD_REQUEST',
      message: 'Drive API error: Unable to parse range: Nope!A1',
    });
    expect(await failure(client.getFileMedia(sheet.id))).toMatchObject({ code: 'FORBIDDEN', details: { reason: 'fileNotDownloadable' } });
    expect(await failure(client.updateSpreadsheet(sheet.id, [{ deleteSheet: { sheetId: 0 } }]))).toMatchObject({
      code: 'BAD_REQUEST',
      message: "Drive API error: Invalid requests[0].deleteSheet: You can't remove all the sheets in a document.",
    });
  });

  it('reports a rejected token as UNAUTHENTICATED without repeating the token', async () => {
    const fake = createFakeGoogleDrive({ accessToken: 'the-right-token' });
    const url = await serve(fake.fetch);
    const client = createHttpDriveOperationsClient({ fetch, getAccessToken: () => TOKEN, baseUrls: fake.baseUrls(url) });
    expect(await failure(client.queryFiles('trashed = false'))).toMatchObject({
      code: 'UNAUTHENTICATED',
      message: expect.stringMatching(/^Drive API error: Request had invalid authentication credentials/),
    });
    expect(fake.requests).toHaveLength(1);
  });

  it('does not retry a permission refusal (403 FORBIDDEN)', async () => {
    const { client, fake } = await setup();
    fake.failNext({
      status: 403,
      body: {
        error: {
          code: 403,
          message: 'The user does not have sufficient permissions for this file.',
          errors: [{ domain: 'global', reason: 'insufficientFilePermissions', message: 'The user does not have sufficient permissions for this file.' }],
        },
      },
    });
    expect(await failure(client.getFile('any'))).toMatchObject({
      code: 'FORBIDDEN',
      message: 'Drive API error: The user does not have sufficient permissions for this file.',
    });
    expect(fake.requests).toHaveLength(1);
  });

  it('retries 429 and a Drive 403 rate limit, asking for a token each time, then succeeds', async () => {
    const state = await setup();
    const { client, fake } = state;
    const id = fake.addFile({ name: 'S', mimeType: SPREADSHEET, sheets: { Sheet1: [['a']] } });
    fake.failNext({ status: 429, times: 2, path: '/values/' });
    expect(await client.getSpreadsheetValues(id, 'Sheet1')).toEqual([['a']]);
    expect(fake.requests.map((request) => request.status)).toEqual([429, 429, 200]);
    expect(state.tokens).toBe(3);

    fake.failNext({ status: 403, path: '/drive/v3/files' });
    expect((await client.getFile(id)).id).toBe(id);
    expect(fake.requests.slice(3).map((request) => request.status)).toEqual([403, 200]);
  });

  it('takes a 403 whose status word is RESOURCE_EXHAUSTED for a rate limit, though it names no reason', async () => {
    const { client, fake } = await setup({ retry: { maxAttempts: 1 } });
    const id = fake.addFile({ name: 'S', mimeType: SPREADSHEET, sheets: { Sheet1: [['a']] } });
    fake.failNext({ status: 403, path: '/values/', body: { error: { code: 403, message: 'Quota exceeded for quota metric', status: 'RESOURCE_EXHAUSTED' } } });
    expect(await failure(client.getSpreadsheetValues(id, 'Sheet1'))).toMatchObject({ code: 'RATE_LIMITED', message: 'Drive API error: Quota exceeded for quota metric' });
  });

  it('honours Retry-After over its own backoff', async () => {
    // The backoff alone would wait a minute; Retry-After: 0 lets the retry go at once.
    const { client, fake } = await setup({ retry: { baseDelayMs: 60_000, maxDelayMs: 60_000 } });
    fake.failNext({ status: 429, headers: { 'retry-after': '0' } });
    expect(await client.queryFiles('trashed = false')).toEqual([]);
    expect(fake.requests.map((request) => request.status)).toEqual([429, 200]);
  });

  it('gives up on server errors after the configured attempts', async () => {
    const { client, fake } = await setup({ retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2 } });
    fake.failNext({ status: 500, times: 3 });
    expect(await failure(client.queryFiles('trashed = false'))).toMatchObject({
      code: 'UPSTREAM_ERROR',
      message: 'Drive API error: Backend Error',
      details: { status: 500, reason: 'backendError' },
    });
    expect(fake.requests).toHaveLength(3);
    fake.failNext({ status: 503, times: 2, path: '/v4/' });
    const id = fake.addFile({ name: 'S', mimeType: SPREADSHEET });
    await client.appendSpreadsheetValues(id, 'Sheet1', [['x']]);
    expect(fake.requests.slice(3).map((request) => request.status)).toEqual([503, 503, 200]);
  });

  it('does not send a call that may have been done again after a server error: no duplicate file or row', async () => {
    const { client, fake } = await setup({ retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2 } });
    fake.failNext({ status: 500, path: '/drive/v3/files' });
    expect(await failure(client.createFile({ name: 'Notes', mimeType: SPREADSHEET }))).toMatchObject({ code: 'UPSTREAM_ERROR', details: { status: 500 } });
    const id = fake.addFile({ name: 'S', mimeType: SPREADSHEET });
    fake.failNext({ status: 502, path: '/v4/' });
    expect(await failure(client.appendSpreadsheetValues(id, 'Sheet1', [['x']]))).toMatchObject({ details: { status: 502 } });
    expect(fake.requests.map((request) => request.status)).toEqual([500, 502]);
    // A read is safe to repeat.
    fake.failNext({ status: 500, path: '/v4/' });
    await client.getSpreadsheetValues(id, 'Sheet1!A1:A2');
    expect(fake.requests.slice(2).map((request) => request.status)).toEqual([500, 200]);
  });

  it('stops at once when the signal aborts: before sending, while waiting to retry, and mid-request', async () => {
    const { client, fake } = await setup({ retry: { baseDelayMs: 60_000, maxDelayMs: 60_000 } });
    const before = new AbortController();
    before.abort();
    expect(await failure(client.getFile('x', before.signal))).toMatchObject({ code: 'ABORTED', message: 'Drive API error: getFile cancelled' });
    expect(fake.requests).toHaveLength(0);

    fake.failNext({ status: 503 });
    const waiting = new AbortController();
    const pending = failure(client.getSpreadsheetMetadata('x', waiting.signal));
    await until(() => fake.requests.length === 1);
    waiting.abort();
    expect(await pending).toMatchObject({ code: 'ABORTED', message: 'Drive API error: getSpreadsheetMetadata cancelled' });

    let arrived = false;
    const hanging = await setup({}, () => async () => {
      arrived = true;
      return new Promise<Response>(() => undefined);
    });
    const midway = new AbortController();
    const inFlight = failure(hanging.client.getFile('x', midway.signal));
    await until(() => arrived);
    midway.abort();
    expect(await inFlight).toMatchObject({ code: 'ABORTED' });
  });

  it('times out an attempt that never answers', async () => {
    const { client } = await setup({ timeoutMs: 50, retry: { maxAttempts: 1 } }, () => () => new Promise<Response>(() => undefined));
    expect(await failure(client.getFile('x'))).toMatchObject({ code: 'TIMEOUT', message: 'Drive API error: getFile took longer than 50 ms' });
  });
});

describe('createHttpDriveOperationsClient: hostile answers and inputs', () => {
  const answering = (respond: (request: Request) => Response) => () => async (request: Request) => respond(request);

  it('rejects a success body that is not JSON, or not the expected shape', async () => {
    const html = await setup({}, answering(() => new Response('<html>proxy login</html>', { status: 200, headers: { 'content-type': 'text/html' } })));
    expect(await failure(html.client.getFile('x'))).toMatchObject({
      code: 'UPSTREAM_ERROR',
      message: 'Drive API error: getFile answered 200 with a body that is not JSON (text/html)',
    });
    const shapes = await setup({}, answering((request) => Response.json(request.url.includes('/values/') ? { values: [['a', { nested: true }]] } : { files: 'nope' })));
    expect(await failure(shapes.client.queryFiles('trashed = false'))).toMatchObject({ code: 'UPSTREAM_ERROR', message: 'Drive API error: queryFiles got an unexpected answer: files is not an array' });
    expect(await failure(shapes.client.getSpreadsheetValues('s', 'A1'))).toMatchObject({
      message: 'Drive API error: getSpreadsheetValues got an unexpected answer: values[0][1] is not a cell value',
    });
    const noId = await setup({}, answering(() => Response.json({ name: 'x' })));
    expect(await failure(noId.client.createFile({ name: 'x' }))).toMatchObject({ message: 'Drive API error: createFile got an unexpected answer: the answer has no file id' });
  });

  it('treats an error envelope on a 200 as an error', async () => {
    const { client } = await setup({}, answering(() => Response.json({ error: { code: 404, message: 'gone' } })));
    expect(await failure(client.getFile('x'))).toMatchObject({ code: 'NOT_FOUND', message: 'Drive API error: gone', details: { status: 404 } });
  });

  it('stops reading an answer larger than maxResponseBytes, declared or streamed', async () => {
    const big = 'x'.repeat(64 * 1024);
    const streamed = await setup(
      { maxResponseBytes: 100_000 },
      answering(
        () =>
          new Response(
            new ReadableStream({
              pull(controller) {
                controller.enqueue(new TextEncoder().encode(big));
              },
            }),
          ),
      ),
    );
    expect(await failure(streamed.client.getFileMedia('x'))).toMatchObject({ code: 'UPSTREAM_ERROR', message: 'Drive API error: getFileMedia answered with more than 100000 bytes' });
    const declared = await setup({ maxResponseBytes: 1000 }, answering(() => new Response(big, { headers: { 'content-type': 'application/json' } })));
    expect(await failure(declared.client.getFile('x'))).toMatchObject({ message: 'Drive API error: getFile answered with more than 1000 bytes' });
  });

  it('describes a non-JSON error page briefly and retries a 502 from a proxy', async () => {
    let calls = 0;
    const { client } = await setup(
      { retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1 } },
      answering(() => {
        calls += 1;
        return new Response(`<!DOCTYPE html><title>502</title>${'<p>padding</p>'.repeat(5000)}`, { status: 502, statusText: 'Bad Gateway' });
      }),
    );
    const error = await failure(client.getFile('x'));
    expect(error.code).toBe('UPSTREAM_ERROR');
    expect(error.message).toMatch(/^Drive API error: 502 Bad Gateway \(not a JSON error: "<!DOCTYPE html><title>502<\/title>/);
    expect(error.message.length).toBeLessThan(250);
    expect(calls).toBe(2);
  });

  it('never repeats the token, even when an answer echoes it', async () => {
    const echo = await setup(
      {},
      answering((request) =>
        Response.json(
          { error: { code: 400, message: `bad header: ${request.headers.get('authorization')}`, errors: [{ reason: `r-${TOKEN}` }] } },
          { status: 400 },
        ),
      ),
    );
    const error = await failure(echo.client.getFile('x'));
    expect(error).toMatchObject({ code: 'BAD_REQUEST', message: 'Drive API error: bad header: Bearer [redacted]' });
    const plain = await setup({}, answering((request) => new Response(`token=${request.headers.get('authorization')}`, { status: 500 })));
    expect((await failure(plain.client.getFile('x'))).message).toContain('[redacted]');
  });

  it('refuses bad input before sending anything', async () => {
    const state = await setup({ maxRequestBytes: 1000 });
    const { client, fake } = state;
    expect(await failure(client.getFile(''))).toMatchObject({ code: 'BAD_REQUEST', message: 'getFile: fileId must be a non-empty string of at most 1024 characters' });
    expect(await failure(client.setSpreadsheetValues('s', 'A1', [['ok', 3 as unknown as string]]))).toMatchObject({
      code: 'BAD_REQUEST',
      message: 'setSpreadsheetValues: values[0][1] must be a string',
      details: { field: 'values[0][1]' },
    });
    expect(await failure(client.appendSpreadsheetValues('s', ' ', []))).toMatchObject({ code: 'BAD_REQUEST', details: { field: 'range' } });
    expect(await failure(client.updateSpreadsheet('s', []))).toMatchObject({ code: 'BAD_REQUEST', details: { field: 'requests' } });
    expect(await failure(client.setSpreadsheetValues('s', 'A1', [['x'.repeat(2000)]]))).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', details: { field: 'values' } });
    expect(await failure(client.uploadFile!({ name: 'big' }, { data: new Uint8Array(5 * 1024 * 1024 + 1), mimeType: 'text/plain' }))).toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
      details: { field: 'media.data' },
    });
    expect(await failure(client.queryFiles(''))).toMatchObject({ code: 'BAD_REQUEST', details: { field: 'query' } });
    expect(fake.requests).toHaveLength(0);
    expect(state.tokens).toBe(0);
  });

  it('refuses a token a header cannot carry, and a failing token source, without echoing either', async () => {
    const fake = createFakeGoogleDrive();
    const url = await serve(fake.fetch);
    const broken = createHttpDriveOperationsClient({ fetch, getAccessToken: () => `${TOKEN}\r\nx-injected: 1`, baseUrls: fake.baseUrls(url) });
    expect(await failure(broken.getFile('x'))).toMatchObject({ code: 'UNAUTHENTICATED', message: 'Drive API error: the access token holds characters a header cannot carry' });
    const throwing = createHttpDriveOperationsClient({
      fetch,
      getAccessToken: () => Promise.reject(new Error('refresh failed')),
      baseUrls: fake.baseUrls(url),
    });
    expect(await failure(throwing.getSpreadsheetMetadata('x'))).toMatchObject({
      code: 'UNAUTHENTICATED',
      message: 'Drive API error: getAccessToken failed before getSpreadsheetMetadata',
    });
    expect(fake.requests).toHaveLength(0);
  });

  it('reports an unreachable API as UPSTREAM_ERROR and only retries calls that are safe to repeat', async () => {
    let attempts = 0;
    const client = createHttpDriveOperationsClient({
      fetch: () => {
        attempts += 1;
        return Promise.reject(new TypeError('fetch failed'));
      },
      getAccessToken: () => TOKEN,
      baseUrls: { drive: 'https://user:password@drive.example/drive/v3' },
      retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1 },
    });
    const read = await failure(client.getFile('x'));
    expect(read).toMatchObject({ code: 'UPSTREAM_ERROR', message: 'Drive API error: could not reach drive.example: fetch failed' });
    expect(attempts).toBe(3);
    await failure(client.createFile({ name: 'x' }));
    expect(attempts).toBe(4);
  });
});

function drained(outgoing: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      outgoing.off('drain', done);
      outgoing.off('close', done);
      resolve();
    };
    outgoing.on('drain', done);
    outgoing.on('close', done);
  });
}

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
}
