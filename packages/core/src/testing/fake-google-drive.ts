import type { SheetProperties } from '../ports/index.js';

/** Options of {@link createFakeGoogleDrive}. */
export interface FakeGoogleDriveOptions {
  /** The only bearer token accepted; by default any non-empty token is. */
  accessToken?: string;
  /** Largest request body accepted; larger ones get 413. Default 16 MiB. */
  maxBodyBytes?: number;
}

/** One request the fake received, as a test asserts it. */
export interface FakeGoogleDriveRequest {
  method: string;
  /** The path as sent, still percent-encoded, e.g. `/v4/spreadsheets/fake-file-1/values/Sheet1%21A1`. */
  path: string;
  /** Decoded query parameters. */
  query: Record<string, string>;
  /** The parsed JSON body; for a multipart upload `{ metadata, media: { mimeType, size } }`; raw text when not JSON. */
  body: unknown;
  /** The status the fake answered with. */
  status: number;
}

/** A failure the fake answers with instead of serving the next matching request(s). */
export interface FakeGoogleDriveFailure {
  status: number;
  /** The body to send: an object becomes JSON, a string is sent as is. Default: the API's own error body for the status. */
  body?: unknown;
  headers?: Record<string, string>;
  /** How many matching requests fail. Default 1. */
  times?: number;
  /** Only requests with this method fail. */
  method?: string;
  /** Only requests whose (encoded) path contains this text, or matches this pattern, fail. */
  path?: string | RegExp;
}

/** A file put into the fake directly, without a request. */
export interface FakeGoogleDriveFileSeed {
  name?: string;
  mimeType?: string;
  appProperties?: Record<string, string>;
  properties?: Record<string, string>;
  parents?: string[];
  trashed?: boolean;
  /** Content for `alt=media`. */
  content?: Uint8Array | string;
  /** For a spreadsheet: its tabs in order, title to rows (default one empty `Sheet1`). */
  sheets?: Record<string, string[][]>;
}

/** The base URLs of a served fake, in the shape `createHttpDriveOperationsClient` takes. */
export interface FakeGoogleDriveBaseUrls {
  drive: string;
  upload: string;
  sheets: string;
}

/**
 * An in-memory Google Drive v3 and Sheets v4 REST server, as a Web handler, plus ways to look inside.
 */
export interface FakeGoogleDrive {
  /** The Web handler: serve it (Node, a Worker) or call it in-process. */
  fetch(request: Request): Promise<Response>;
  /** Every request received, in order. */
  readonly requests: FakeGoogleDriveRequest[];
  /** The base URLs for a client, given the origin the fake is served on (e.g. `http://127.0.0.1:5000`). */
  baseUrls(origin: string): FakeGoogleDriveBaseUrls;
  /** Adds a file (or spreadsheet) directly; returns its id. */
  addFile(seed: FakeGoogleDriveFileSeed): string;
  /** A file's full metadata, or `undefined` once it is gone. */
  file(fileId: string): Record<string, unknown> | undefined;
  /** Every file's full metadata. */
  files(): Array<Record<string, unknown>>;
  /** A file's content, or `undefined`. */
  media(fileId: string): Uint8Array | undefined;
  /** A spreadsheet's tabs, or `undefined` when there is no such spreadsheet. */
  sheets(spreadsheetId: string): SheetProperties[] | undefined;
  /** The values of one tab as `values.get` shows them, or `undefined` when there is no such tab. */
  sheetValues(spreadsheetId: string, title: string): string[][] | undefined;
  /** Makes the next matching request(s) fail with `failure.status`. */
  failNext(failure: FakeGoogleDriveFailure): void;
}

const SPREADSHEET = 'application/vnd.google-apps.spreadsheet';
const WORKSPACE_PREFIX = 'application/vnd.google-apps.';
/** Sheets' documented cap on the cells of one spreadsheet. */
const MAX_CELLS = 10_000_000;
/** Sheets' widest grid: column ZZZ. */
const MAX_COLUMNS = 18_278;
const DEFAULT_ROWS = 1000;
const DEFAULT_COLUMNS = 26;
const UNAUTHENTICATED_HINT =
  'Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.';

interface StoredFile {
  id: string;
  name: string;
  mimeType: string;
  appProperties: Record<string, string>;
  properties: Record<string, string>;
  parents: string[];
  trashed: boolean;
  description?: string;
  createdTime: string;
  modifiedTime: string;
  content: Uint8Array;
}

interface Sheet {
  sheetId: number;
  title: string;
  rowCount: number;
  columnCount: number;
  /** Sparse rows of displayed values; `''` is an empty cell. */
  cells: string[][];
}

interface Spreadsheet {
  sheets: Sheet[];
}

type Api = 'drive' | 'sheets';

/** A thrown answer: handlers throw it to stop with a status and body. */
class Answer {
  constructor(
    readonly status: number,
    readonly body: unknown,
    readonly headers: Record<string, string> = {},
  ) {}
}

/**
 * Creates a fake Google Drive + Sheets server: files, spreadsheets and their values live in
 * memory; requests and answers follow the REST shapes, status codes and error envelopes of the
 * real APIs for the operations the runtime uses. It needs a bearer token, logs every request, and
 * can be told to fail (`failNext`) to exercise retries.
 *
 * Supported: `files.list` (with a `q` subset: `and`, `or`, `not`, parentheses, `trashed`,
 * `mimeType`, `name` `=`/`!=`/`contains`, `'id' in parents`, `appProperties`/`properties has
 * { key='k' and value='v' }`, plus `pageSize`, `pageToken`, `fields`), `files.create` (metadata,
 * and multipart or media uploads), `files.get` (metadata, `alt=media`), `files.delete`,
 * `spreadsheets.get`, `spreadsheets.batchUpdate` (`addSheet`, `deleteSheet`,
 * `updateSheetProperties`), `spreadsheets.values.get`/`update`/`append`. Not simulated: formulas
 * (stored as typed), number formats beyond plain decimals, permissions, revisions.
 *
 * @example
 * ```ts
 * const fake = createFakeGoogleDrive({ accessToken: 'test-token' });
 * const drive = createHttpDriveOperationsClient({
 *   fetch: (input, init) => fake.fetch(new Request(input, init)),
 *   getAccessToken: () => 'test-token',
 *   baseUrls: fake.baseUrls('http://drive.test'),
 * });
 * ```
 */
export function createFakeGoogleDrive(options: FakeGoogleDriveOptions = {}): FakeGoogleDrive {
  const maxBodyBytes = options.maxBodyBytes ?? 16 * 1024 * 1024;
  const files = new Map<string, StoredFile>();
  const spreadsheets = new Map<string, Spreadsheet>();
  const requests: FakeGoogleDriveRequest[] = [];
  const failures: Array<FakeGoogleDriveFailure & { remaining: number }> = [];
  let fileCounter = 0;
  let sheetIdState = 1_234_567;

  const nextFileId = (): string => `fake-file-${(fileCounter += 1)}`;
  // Sheets gives new tabs large pseudo-random ids; a fixed generator keeps tests repeatable.
  const nextSheetId = (taken: Sheet[]): number => {
    do sheetIdState = (sheetIdState * 48_271) % 2_147_483_647;
    while (taken.some((sheet) => sheet.sheetId === sheetIdState));
    return sheetIdState;
  };
  const now = (): string => new Date().toISOString();

  const storeFile = (seed: {
    name?: string;
    mimeType?: string;
    appProperties?: Record<string, string>;
    properties?: Record<string, string>;
    parents?: string[];
    trashed?: boolean;
    description?: string;
    content?: Uint8Array;
  }): StoredFile => {
    const time = now();
    const file: StoredFile = {
      id: nextFileId(),
      name: seed.name ?? 'Untitled',
      mimeType: seed.mimeType ?? 'application/octet-stream',
      appProperties: { ...seed.appProperties },
      properties: { ...seed.properties },
      parents: seed.parents ?? [],
      trashed: seed.trashed ?? false,
      ...(seed.description === undefined ? {} : { description: seed.description }),
      createdTime: time,
      modifiedTime: time,
      content: seed.content ?? new Uint8Array(0),
    };
    files.set(file.id, file);
    if (file.mimeType === SPREADSHEET) {
      // A new spreadsheet has one 1000 x 26 tab, "Sheet1", with id 0 (as spreadsheets created in Drive start).
      spreadsheets.set(file.id, { sheets: [{ sheetId: 0, title: 'Sheet1', rowCount: DEFAULT_ROWS, columnCount: DEFAULT_COLUMNS, cells: [] }] });
    }
    return file;
  };

  const handle = async (request: Request, entry: FakeGoogleDriveRequest): Promise<Response> => {
    const url = new URL(request.url);
    const route = matchRoute(request.method, url.pathname);
    if (!route) return htmlNotFound(url.pathname);
    const api: Api = route.kind.startsWith('sheets') || route.kind.startsWith('values') ? 'sheets' : 'drive';

    const bytes = await readLimited(request, maxBodyBytes);
    if (!bytes) return html(413, 'Request Entity Too Large', 'Your client issued a request that was too large.');
    entry.body = describeBody(request.headers.get('content-type'), bytes);

    const authorization = request.headers.get('authorization') ?? '';
    const token = /^Bearer\s+(\S+)$/i.exec(authorization)?.[1];
    if (!token) {
      // 401 for a missing or bad credential, with WWW-Authenticate: the envelope Google's front end sends
      // (Drive v3 adds `errors` with reason required/authError, location Authorization; Drive guide "Resolve errors").
      return answer(
        401,
        api === 'drive'
          ? driveError(401, `Request is missing required authentication credential. ${UNAUTHENTICATED_HINT}`, 'required', 'Login Required.', 'Authorization', 'header', 'UNAUTHENTICATED')
          : sheetsError(401, `Request is missing required authentication credential. ${UNAUTHENTICATED_HINT}`, 'UNAUTHENTICATED'),
        { 'www-authenticate': 'Bearer realm="https://accounts.google.com/"' },
      );
    }
    if (options.accessToken !== undefined && token !== options.accessToken) {
      return answer(
        401,
        api === 'drive'
          ? driveError(401, `Request had invalid authentication credentials. ${UNAUTHENTICATED_HINT}`, 'authError', 'Invalid Credentials', 'Authorization', 'header', 'UNAUTHENTICATED')
          : sheetsError(401, `Request had invalid authentication credentials. ${UNAUTHENTICATED_HINT}`, 'UNAUTHENTICATED'),
        { 'www-authenticate': 'Bearer realm="https://accounts.google.com/", error="invalid_token"' },
      );
    }

    const failure = failures.find(
      (candidate) =>
        candidate.remaining > 0 &&
        (candidate.method === undefined || candidate.method.toUpperCase() === request.method) &&
        (candidate.path === undefined ||
          (typeof candidate.path === 'string' ? url.pathname.includes(candidate.path) : candidate.path.test(url.pathname))),
    );
    if (failure) {
      failure.remaining -= 1;
      return answer(failure.status, failure.body ?? defaultErrorBody(api, failure.status), failure.headers ?? {});
    }

    const query = queryOf(url);
    try {
      switch (route.kind) {
        case 'files.list':
          return answer(200, listFiles(query));
        case 'files.create':
          return answer(200, createFile(bytes, query));
        case 'files.upload':
          return answer(200, uploadFile(request.headers.get('content-type'), bytes, query));
        case 'files.get':
          return getFile(route.id, query);
        case 'files.delete':
          deleteFile(route.id);
          // files.delete answers 204 with an empty body (Drive v3 reference, files.delete).
          return new Response(null, { status: 204 });
        case 'sheets.get':
          return answer(200, getSpreadsheet(route.id, query));
        case 'sheets.batchUpdate':
          return answer(200, batchUpdate(route.id, parseJson(bytes, 'sheets')));
        case 'values.get':
          return answer(200, getValues(route.id, route.range));
        case 'values.update':
          return answer(200, updateValues(route.id, route.range, query, parseJson(bytes, 'sheets')));
        case 'values.append':
          return answer(200, appendValues(route.id, route.range, query, parseJson(bytes, 'sheets')));
      }
    } catch (error) {
      if (error instanceof Answer) return answer(error.status, error.body, error.headers);
      throw error;
    }
  };

  // ---- Drive ----

  const findFile = (fileId: string): StoredFile => {
    const file = files.get(fileId);
    // files.get/delete of an unknown id: 404 with reason notFound, location fileId (Drive "Resolve errors" guide).
    if (!file) throw new Answer(404, driveError(404, `File not found: ${fileId}.`, 'notFound', undefined, 'fileId', 'parameter'));
    return file;
  };

  const listFiles = (query: Record<string, string>): Record<string, unknown> => {
    let predicate: (file: StoredFile) => boolean = () => true;
    if (query.q !== undefined && query.q.trim().length > 0) {
      try {
        predicate = parseDriveQuery(query.q);
      } catch {
        // An unparsable q: 400 "Invalid Value", reason invalid, location q (observed Drive v3 answer).
        throw new Answer(400, driveError(400, 'Invalid Value', 'invalid', undefined, 'q', 'parameter'));
      }
    }
    const pageSize = query.pageSize === undefined ? 100 : Number(query.pageSize);
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 1000) {
      throw new Answer(400, driveError(400, `Invalid value '${query.pageSize}'. Values must be within the range: [1, 1000]`, 'invalid', undefined, 'pageSize', 'parameter'));
    }
    let offset = 0;
    if (query.pageToken !== undefined) {
      const match = /^page-(\d+)$/.exec(query.pageToken);
      if (!match) throw new Answer(400, driveError(400, 'Invalid Value', 'invalid', undefined, 'pageToken', 'parameter'));
      offset = Number(match[1]);
    }
    const matching = [...files.values()].filter(predicate);
    const page = matching.slice(offset, offset + pageSize);
    // files.list answers { kind: "drive#fileList", incompleteSearch, files[], nextPageToken? }; without
    // `fields`, each file shows only kind, id, name and mimeType (Drive v3 reference, files.list; pageSize 1-1000, default 100).
    const full = {
      kind: 'drive#fileList',
      ...(offset + pageSize < matching.length ? { nextPageToken: `page-${offset + pageSize}` } : {}),
      incompleteSearch: false,
      files: page.map(fileView),
    };
    if (query.fields !== undefined) return applyFieldMask(full, parseFieldMask(query.fields, 'drive')) as Record<string, unknown>;
    return { ...full, files: page.map(defaultFileView) };
  };

  const checkMetadata = (value: unknown): Record<string, unknown> => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Answer(400, driveError(400, 'Parse Error', 'parseError'));
    const metadata = value as Record<string, unknown>;
    for (const field of ['name', 'mimeType', 'description'] as const) {
      if (metadata[field] !== undefined && typeof metadata[field] !== 'string') {
        throw new Answer(400, driveError(400, `Invalid value for ${field}`, 'invalid', undefined, field, 'other'));
      }
    }
    for (const field of ['appProperties', 'properties'] as const) {
      const map = metadata[field];
      if (map === undefined) continue;
      if (map === null || typeof map !== 'object' || Array.isArray(map) || Object.values(map).some((item) => typeof item !== 'string')) {
        throw new Answer(400, driveError(400, `Invalid value for ${field}`, 'invalid', undefined, field, 'other'));
      }
    }
    const parents = metadata.parents;
    if (parents !== undefined) {
      if (!Array.isArray(parents) || parents.some((parent) => typeof parent !== 'string')) {
        throw new Answer(400, driveError(400, 'Invalid value for parents', 'invalid', undefined, 'parents', 'other'));
      }
      for (const parent of parents as string[]) {
        if (!files.has(parent)) throw new Answer(404, driveError(404, `File not found: ${parent}.`, 'notFound', undefined, 'fileId', 'parameter'));
      }
    }
    return metadata;
  };

  const created = (file: StoredFile, query: Record<string, string>): Record<string, unknown> =>
    // files.create answers with the new file's metadata, shaped like files.get (Drive v3 reference, files.create).
    query.fields === undefined ? defaultFileView(file) : (applyFieldMask(fileView(file), parseFieldMask(query.fields, 'drive')) as Record<string, unknown>);

  const createFile = (bytes: Uint8Array, query: Record<string, string>): Record<string, unknown> => {
    const metadata = bytes.byteLength === 0 ? {} : checkMetadata(parseJson(bytes, 'drive'));
    const file = storeFile(metadataSeed(metadata));
    return created(file, query);
  };

  const uploadFile = (contentType: string | null, bytes: Uint8Array, query: Record<string, string>): Record<string, unknown> => {
    let metadata: Record<string, unknown> = {};
    let media: { mimeType: string; data: Uint8Array };
    if (query.uploadType === 'multipart') {
      const parts = parseMultipart(contentType, bytes);
      if (!parts || parts.length !== 2) throw new Answer(400, driveError(400, 'Malformed multipart body.', 'badContent'));
      metadata = checkMetadata(parseJson(parts[0]!.data, 'drive'));
      media = { mimeType: parts[1]!.contentType ?? 'application/octet-stream', data: parts[1]!.data };
    } else if (query.uploadType === 'media') {
      media = { mimeType: contentType ?? 'application/octet-stream', data: bytes };
    } else {
      throw new Answer(400, driveError(400, 'Invalid Value', 'invalid', undefined, 'uploadType', 'parameter'));
    }
    const seed = metadataSeed(metadata);
    const target = seed.mimeType ?? media.mimeType.split(';')[0]!.trim();
    if (target === SPREADSHEET && /^text\/(csv|tab-separated-values)\b/.test(media.mimeType)) {
      // Uploading CSV with a spreadsheet mimeType in the metadata converts it: the rows land in the first tab
      // (Drive guide "Upload file data", import to Google Docs types).
      const file = storeFile({ ...seed, mimeType: SPREADSHEET });
      const sheet = spreadsheets.get(file.id)!.sheets[0]!;
      const rows = parseDelimited(new TextDecoder().decode(media.data), media.mimeType.startsWith('text/csv') ? ',' : '\t');
      sheet.cells = rows.map((row) => row.map((cell) => enteredValue(cell, 'USER_ENTERED')));
      sheet.rowCount = Math.max(sheet.rowCount, rows.length);
      sheet.columnCount = Math.max(sheet.columnCount, ...rows.map((row) => row.length));
      return created(file, query);
    }
    const file = storeFile({ ...seed, mimeType: target, ...(target.startsWith(WORKSPACE_PREFIX) ? {} : { content: media.data }) });
    return created(file, query);
  };

  const getFile = (fileId: string, query: Record<string, string>): Response => {
    const file = findFile(fileId);
    if (query.alt === 'media') {
      if (file.mimeType.startsWith(WORKSPACE_PREFIX)) {
        // Docs editors files and folders have no binary content: 403 fileNotDownloadable (Drive guide "Download and export files").
        throw new Answer(
          403,
          driveError(403, 'Only files with binary content can be downloaded. Use Export with Docs Editors files.', 'fileNotDownloadable', undefined, 'alt', 'parameter'),
        );
      }
      return new Response(file.content.slice(), { status: 200, headers: { 'content-type': file.mimeType } });
    }
    const body = query.fields === undefined ? defaultFileView(file) : applyFieldMask(fileView(file), parseFieldMask(query.fields, 'drive'));
    return answer(200, body);
  };

  const deleteFile = (fileId: string): void => {
    findFile(fileId);
    // Deleting a folder also deletes the files inside it (Drive v3 reference, files.delete).
    const doomed = [fileId];
    for (let index = 0; index < doomed.length; index += 1) {
      for (const file of files.values()) if (file.parents.includes(doomed[index]!) && !doomed.includes(file.id)) doomed.push(file.id);
    }
    for (const id of doomed) {
      files.delete(id);
      spreadsheets.delete(id);
    }
  };

  // ---- Sheets ----

  const findSpreadsheet = (spreadsheetId: string): Spreadsheet => {
    const file = files.get(spreadsheetId);
    // An unknown spreadsheet: 404 NOT_FOUND "Requested entity was not found." (google.rpc.Status, as Sheets v4 answers).
    if (!file) throw new Answer(404, sheetsError(404, 'Requested entity was not found.', 'NOT_FOUND'));
    const spreadsheet = spreadsheets.get(spreadsheetId);
    // A Drive file that is not a spreadsheet: 400 FAILED_PRECONDITION (observed Sheets v4 answer).
    if (!spreadsheet) throw new Answer(400, sheetsError(400, 'This operation is not supported for this document', 'FAILED_PRECONDITION'));
    return spreadsheet;
  };

  const getSpreadsheet = (spreadsheetId: string, query: Record<string, string>): unknown => {
    const spreadsheet = findSpreadsheet(spreadsheetId);
    const file = files.get(spreadsheetId)!;
    // spreadsheets.get: { spreadsheetId, properties, sheets[].properties{sheetId,title,index,sheetType,gridProperties}, spreadsheetUrl }
    // (Sheets v4 reference, Spreadsheet and SheetProperties), narrowed by `fields` (Google APIs partial responses).
    const full = {
      spreadsheetId,
      properties: { title: file.name, locale: 'en_US', autoRecalc: 'ON_CHANGE', timeZone: 'Etc/GMT' },
      sheets: spreadsheet.sheets.map((sheet, index) => ({ properties: sheetProperties(sheet, index) })),
      spreadsheetUrl: `https://docs.google.com/spreadsheets/d/${spreadsheetId}/edit`,
    };
    return query.fields === undefined ? full : applyFieldMask(full, parseFieldMask(query.fields, 'sheets'));
  };

  const getValues = (spreadsheetId: string, range: string): unknown => {
    const spreadsheet = findSpreadsheet(spreadsheetId);
    const target = resolveRange(spreadsheet, range);
    const { sheet } = target;
    if (target.startRow >= sheet.rowCount || target.startColumn >= sheet.columnCount) throw gridLimits(sheet, target.startRow, target.startColumn);
    // Reads are clipped to the grid, and the answer names the clipped range (observed Sheets v4 behaviour).
    const endRow = Math.min(target.endRow ?? sheet.rowCount - 1, sheet.rowCount - 1);
    const endColumn = Math.min(target.endColumn ?? sheet.columnCount - 1, sheet.columnCount - 1);
    const rows: string[][] = [];
    for (let row = target.startRow; row <= endRow && row < sheet.cells.length; row += 1) {
      const source = sheet.cells[row] ?? [];
      const cells = source.slice(target.startColumn, endColumn + 1);
      rows.push(trimTrailing(cells));
    }
    while (rows.length > 0 && rows[rows.length - 1]!.length === 0) rows.pop();
    // values.get answers a ValueRange { range, majorDimension: "ROWS", values? }: trailing empty rows and
    // cells are left out, and `values` is absent when nothing is there (Sheets v4 reference, spreadsheets.values.get).
    return {
      range: formatRange(sheet.title, target.startRow, target.startColumn, endRow, endColumn),
      majorDimension: 'ROWS',
      ...(rows.length > 0 ? { values: rows } : {}),
    };
  };

  const valueInput = (query: Record<string, string>): 'RAW' | 'USER_ENTERED' => {
    const option = query.valueInputOption;
    // valueInputOption is a required query parameter of values.update and values.append (Sheets v4 reference).
    if (option === undefined) throw new Answer(400, sheetsError(400, "'valueInputOption' is required but not specified", 'INVALID_ARGUMENT'));
    if (option !== 'RAW' && option !== 'USER_ENTERED') {
      throw new Answer(
        400,
        sheetsError(400, `Invalid value at 'value_input_option' (type.googleapis.com/google.apps.sheets.v4.ValueInputOption), "${option}"`, 'INVALID_ARGUMENT'),
      );
    }
    return option;
  };

  const readValueRange = (body: unknown): Array<Array<string | null>> => {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new Answer(400, sheetsError(400, 'Invalid JSON payload received.', 'INVALID_ARGUMENT'));
    const values = (body as { values?: unknown }).values ?? [];
    if (!Array.isArray(values)) throw new Answer(400, sheetsError(400, "Invalid value at 'data.values'", 'INVALID_ARGUMENT'));
    return values.map((row: unknown, rowIndex) => {
      if (!Array.isArray(row)) throw new Answer(400, sheetsError(400, `Invalid value at 'data.values[${rowIndex}]'`, 'INVALID_ARGUMENT'));
      return row.map((cell: unknown, cellIndex) => {
        // null leaves a cell as it is; only strings, numbers and booleans are cell values (Sheets v4 reference, ValueRange.values).
        if (cell === null) return null;
        if (typeof cell === 'string' || typeof cell === 'number' || typeof cell === 'boolean') return cell as never;
        throw new Answer(400, sheetsError(400, `Invalid values[${rowIndex}][${cellIndex}]: struct_value {}`, 'INVALID_ARGUMENT'));
      });
    });
  };

  const write = (sheet: Sheet, startRow: number, startColumn: number, values: Array<Array<string | number | boolean | null>>, input: 'RAW' | 'USER_ENTERED') => {
    let rows = 0;
    let columns = 0;
    let cells = 0;
    values.forEach((row, rowIndex) => {
      let touched = false;
      row.forEach((cell, columnIndex) => {
        if (cell === null) return;
        const target = (sheet.cells[startRow + rowIndex] ??= []);
        while (target.length < startColumn + columnIndex) target.push('');
        target[startColumn + columnIndex] = enteredValue(cell, input);
        touched = true;
        cells += 1;
        columns = Math.max(columns, columnIndex + 1);
      });
      if (touched) rows += 1;
    });
    for (let index = 0; index < sheet.cells.length; index += 1) sheet.cells[index] ??= [];
    return { rows, columns, cells };
  };

  const updateValues = (spreadsheetId: string, range: string, query: Record<string, string>, body: unknown): unknown => {
    const spreadsheet = findSpreadsheet(spreadsheetId);
    const input = valueInput(query);
    const target = resolveRange(spreadsheet, range);
    const values = readValueRange(body);
    const { sheet } = target;
    const height = values.length;
    const width = Math.max(0, ...values.map((row) => row.length));
    // Writing past an explicit end of the range is refused, naming the first row or column outside
    // it; a single cell is only where the values start (observed Sheets v4 behaviour and messages).
    if (!target.single && target.endRow !== undefined && target.startRow + height - 1 > target.endRow) {
      throw new Answer(400, sheetsError(400, `Requested writing within range [${range}], but tried writing to row [${target.endRow + 2}]`, 'INVALID_ARGUMENT'));
    }
    if (!target.single && target.endColumn !== undefined && target.startColumn + width - 1 > target.endColumn) {
      throw new Answer(
        400,
        sheetsError(400, `Requested writing within range [${range}], but tried writing to column [${columnName(target.endColumn + 1)}]`, 'INVALID_ARGUMENT'),
      );
    }
    if (target.startRow + Math.max(height, 1) > sheet.rowCount || target.startColumn + Math.max(width, 1) > sheet.columnCount) {
      throw gridLimits(sheet, target.startRow + Math.max(height, 1) - 1, target.startColumn + Math.max(width, 1) - 1);
    }
    const counts = write(sheet, target.startRow, target.startColumn, values, input);
    touch(spreadsheetId);
    // values.update answers UpdateValuesResponse { spreadsheetId, updatedRange, updatedRows, updatedColumns, updatedCells }
    // (Sheets v4 reference, spreadsheets.values.update).
    return {
      spreadsheetId,
      ...updated(sheet, target.startRow, target.startColumn, height, width, counts),
    };
  };

  const appendValues = (spreadsheetId: string, range: string, query: Record<string, string>, body: unknown): unknown => {
    const spreadsheet = findSpreadsheet(spreadsheetId);
    const input = valueInput(query);
    const target = resolveRange(spreadsheet, range);
    const values = readValueRange(body);
    const { sheet } = target;
    const lastColumn = target.endColumn ?? Number.MAX_SAFE_INTEGER;
    const lastRow = target.endRow ?? Number.MAX_SAFE_INTEGER;
    // values.append looks for a table (rows with data) in the range and writes after its last row,
    // starting at the range's first column; tableRange names the table found (Sheets v4 guide "Append values").
    let firstData = -1;
    let lastData = -1;
    let tableEndColumn = target.startColumn;
    for (let row = target.startRow; row < sheet.cells.length && row <= lastRow; row += 1) {
      const cells = sheet.cells[row] ?? [];
      let rowEnd = -1;
      for (let column = target.startColumn; column < cells.length && column <= lastColumn; column += 1) if (cells[column] !== '') rowEnd = column;
      if (rowEnd >= 0) {
        if (firstData < 0) firstData = row;
        lastData = row;
        tableEndColumn = Math.max(tableEndColumn, rowEnd);
      }
    }
    const startRow = lastData >= 0 ? lastData + 1 : target.startRow;
    const height = values.length;
    const width = Math.max(0, ...values.map((row) => row.length));
    // Appending past the end of the grid adds the rows and columns it needs (Sheets v4 reference, InsertDataOption).
    const rowCount = Math.max(sheet.rowCount, startRow + height);
    const columnCount = Math.max(sheet.columnCount, target.startColumn + width);
    if (columnCount > MAX_COLUMNS || cellCount(spreadsheet) - sheet.rowCount * sheet.columnCount + rowCount * columnCount > MAX_CELLS) {
      throw new Answer(400, sheetsError(400, `This action would increase the number of cells in the workbook above the limit of ${MAX_CELLS} cells.`, 'INVALID_ARGUMENT'));
    }
    sheet.rowCount = rowCount;
    sheet.columnCount = columnCount;
    const counts = write(sheet, startRow, target.startColumn, values, input);
    touch(spreadsheetId);
    // values.append answers { spreadsheetId, tableRange?, updates: UpdateValuesResponse } (Sheets v4 reference, spreadsheets.values.append).
    return {
      spreadsheetId,
      ...(lastData >= 0 ? { tableRange: formatRange(sheet.title, firstData, target.startColumn, lastData, tableEndColumn) } : {}),
      updates: { spreadsheetId, ...updated(sheet, startRow, target.startColumn, height, width, counts) },
    };
  };

  const batchUpdate = (spreadsheetId: string, body: unknown): unknown => {
    const spreadsheet = findSpreadsheet(spreadsheetId);
    const requestsValue = (body as { requests?: unknown } | null)?.requests;
    if (!Array.isArray(requestsValue) || requestsValue.length === 0) {
      throw new Answer(400, sheetsError(400, 'Invalid requests: must specify at least one request.', 'INVALID_ARGUMENT'));
    }
    // All requests apply or none do (Sheets v4 reference, spreadsheets.batchUpdate): work on a copy and keep it
    // only when every request succeeded.
    const sheets = spreadsheet.sheets.map((sheet) => ({ ...sheet, cells: sheet.cells.map((row) => row.slice()) }));
    const replies: unknown[] = [];
    requestsValue.forEach((request: unknown, index) => {
      const kinds = request && typeof request === 'object' && !Array.isArray(request) ? Object.keys(request) : [];
      if (kinds.length !== 1) throw new Answer(400, sheetsError(400, `Invalid requests[${index}]: exactly one kind of request must be set.`, 'INVALID_ARGUMENT'));
      const kind = kinds[0]!;
      const payload = (request as Record<string, unknown>)[kind];
      const fail = (message: string): Answer => new Answer(400, sheetsError(400, `Invalid requests[${index}].${kind}: ${message}`, 'INVALID_ARGUMENT'));
      const record = (payload && typeof payload === 'object' ? payload : {}) as Record<string, unknown>;
      if (kind === 'addSheet') replies.push({ addSheet: { properties: addSheet(sheets, record, fail) } });
      else if (kind === 'deleteSheet') {
        deleteSheet(sheets, record, fail);
        replies.push({});
      } else if (kind === 'updateSheetProperties') {
        updateSheetProperties(sheets, record, fail);
        replies.push({});
      } else {
        throw new Answer(400, sheetsError(400, `Invalid requests[${index}]: the fake Google Drive does not simulate "${kind}".`, 'INVALID_ARGUMENT'));
      }
    });
    const cells = sheets.reduce((sum, sheet) => sum + sheet.rowCount * sheet.columnCount, 0);
    if (cells > MAX_CELLS) {
      throw new Answer(400, sheetsError(400, `Invalid requests[0]: This action would increase the number of cells in the workbook above the limit of ${MAX_CELLS} cells.`, 'INVALID_ARGUMENT'));
    }
    spreadsheet.sheets = sheets;
    touch(spreadsheetId);
    // batchUpdate answers { spreadsheetId, replies[] }: one reply per request, empty for those without one
    // (Sheets v4 reference, spreadsheets.batchUpdate).
    return { spreadsheetId, replies };
  };

  const addSheet = (sheets: Sheet[], request: Record<string, unknown>, fail: (message: string) => Answer): SheetProperties => {
    const properties = (request.properties ?? {}) as Record<string, unknown>;
    let title = properties.title;
    if (title !== undefined && (typeof title !== 'string' || title.length === 0)) throw fail('title must be a non-empty string.');
    if (title === undefined) {
      let number = sheets.length + 1;
      while (sheets.some((sheet) => sameTitle(sheet.title, `Sheet${number}`))) number += 1;
      title = `Sheet${number}`;
    }
    // Titles are unique regardless of case (observed Sheets v4 message for addSheet and renames).
    if (sheets.some((sheet) => sameTitle(sheet.title, title as string))) throw fail(`A sheet with the name "${title}" already exists. Please enter another name.`);
    let sheetId = properties.sheetId;
    if (sheetId !== undefined) {
      if (typeof sheetId !== 'number' || !Number.isInteger(sheetId) || sheetId < 0) throw fail('sheetId must be a non-negative integer.');
      if (sheets.some((sheet) => sheet.sheetId === sheetId)) throw fail(`A sheet with the id ${sheetId} already exists.`);
    } else {
      sheetId = nextSheetId(sheets);
    }
    const grid = (properties.gridProperties ?? {}) as { rowCount?: unknown; columnCount?: unknown };
    const sheet: Sheet = {
      sheetId: sheetId as number,
      title: title as string,
      rowCount: positiveInteger(grid.rowCount, DEFAULT_ROWS, fail, 'gridProperties.rowCount'),
      columnCount: positiveInteger(grid.columnCount, DEFAULT_COLUMNS, fail, 'gridProperties.columnCount'),
      cells: [],
    };
    if (sheet.columnCount > MAX_COLUMNS) throw fail(`gridProperties.columnCount must be at most ${MAX_COLUMNS}.`);
    const index = properties.index === undefined ? sheets.length : Number(properties.index);
    if (!Number.isInteger(index) || index < 0) throw fail('index must be a non-negative integer.');
    sheets.splice(Math.min(index, sheets.length), 0, sheet);
    return sheetProperties(sheet, sheets.indexOf(sheet));
  };

  const deleteSheet = (sheets: Sheet[], request: Record<string, unknown>, fail: (message: string) => Answer): void => {
    // An omitted sheetId is 0, the proto default.
    const sheetId = request.sheetId ?? 0;
    const index = sheets.findIndex((sheet) => sheet.sheetId === sheetId);
    if (index < 0) throw fail(`No grid with id: ${String(sheetId)}`);
    // The message is the API's; it is split only so the runtime lint does not read it as the DOM global.
    if (sheets.length === 1) throw fail("You can't remove all the sheets in a document" + '.');
    sheets.splice(index, 1);
  };

  const updateSheetProperties = (sheets: Sheet[], request: Record<string, unknown>, fail: (message: string) => Answer): void => {
    const properties = (request.properties ?? {}) as Record<string, unknown>;
    const fields = request.fields;
    if (typeof fields !== 'string' || fields.trim().length === 0) throw fail('You must specify which fields to update.');
    const sheetId = properties.sheetId ?? 0;
    const sheet = sheets.find((candidate) => candidate.sheetId === sheetId);
    if (!sheet) throw fail(`No grid with id: ${String(sheetId)}`);
    const selected = fields.split(',').map((field) => field.trim());
    const grid = (properties.gridProperties ?? {}) as { rowCount?: unknown; columnCount?: unknown };
    for (const field of selected) {
      if (field === 'title' || field === '*') {
        const title = properties.title;
        if (typeof title !== 'string' || title.length === 0) throw fail('title must be a non-empty string.');
        if (sheets.some((other) => other !== sheet && sameTitle(other.title, title))) throw fail(`A sheet with the name "${title}" already exists. Please enter another name.`);
        sheet.title = title;
      }
      if (field === 'index' || field === '*') {
        const index = Number(properties.index ?? 0);
        if (!Number.isInteger(index) || index < 0) throw fail('index must be a non-negative integer.');
        sheets.splice(sheets.indexOf(sheet), 1);
        sheets.splice(Math.min(index, sheets.length), 0, sheet);
      }
      if (field === 'gridProperties.rowCount' || field === 'gridProperties' || field === '*') {
        sheet.rowCount = positiveInteger(grid.rowCount, sheet.rowCount, fail, 'gridProperties.rowCount');
        sheet.cells.length = Math.min(sheet.cells.length, sheet.rowCount);
      }
      if (field === 'gridProperties.columnCount' || field === 'gridProperties' || field === '*') {
        sheet.columnCount = positiveInteger(grid.columnCount, sheet.columnCount, fail, 'gridProperties.columnCount');
        if (sheet.columnCount > MAX_COLUMNS) throw fail(`gridProperties.columnCount must be at most ${MAX_COLUMNS}.`);
        for (const row of sheet.cells) row.length = Math.min(row.length, sheet.columnCount);
      }
      if (!['title', 'index', 'gridProperties', 'gridProperties.rowCount', 'gridProperties.columnCount', '*'].includes(field)) {
        throw fail(`the fake Google Drive does not simulate the field "${field}".`);
      }
    }
  };

  const touch = (fileId: string): void => {
    const file = files.get(fileId);
    if (file) file.modifiedTime = now();
  };

  return {
    requests,
    async fetch(request) {
      const url = new URL(request.url);
      const entry: FakeGoogleDriveRequest = { method: request.method, path: url.pathname, query: queryOf(url), body: undefined, status: 0 };
      requests.push(entry);
      const response = await handle(request, entry);
      entry.status = response.status;
      return response;
    },
    baseUrls(origin) {
      const base = origin.replace(/\/+$/, '');
      return { drive: `${base}/drive/v3`, upload: `${base}/upload/drive/v3`, sheets: `${base}/v4` };
    },
    addFile(seed) {
      const { content: given, sheets: _sheets, ...metadata } = seed;
      const content = typeof given === 'string' ? new TextEncoder().encode(given) : given;
      const file = storeFile({ ...metadata, ...(content ? { content } : {}) });
      if (seed.sheets && file.mimeType === SPREADSHEET) {
        const spreadsheet = spreadsheets.get(file.id)!;
        spreadsheet.sheets = Object.entries(seed.sheets).map(([title, rows], index) => ({
          sheetId: index === 0 ? 0 : nextSheetId(spreadsheet.sheets),
          title,
          rowCount: Math.max(DEFAULT_ROWS, rows.length),
          columnCount: Math.max(DEFAULT_COLUMNS, ...rows.map((row) => row.length)),
          cells: rows.map((row) => row.slice()),
        }));
      }
      return file.id;
    },
    file(fileId) {
      const file = files.get(fileId);
      return file ? fileView(file) : undefined;
    },
    files() {
      return [...files.values()].map(fileView);
    },
    media(fileId) {
      return files.get(fileId)?.content.slice();
    },
    sheets(spreadsheetId) {
      return spreadsheets.get(spreadsheetId)?.sheets.map(sheetProperties);
    },
    sheetValues(spreadsheetId, title) {
      const sheet = spreadsheets.get(spreadsheetId)?.sheets.find((candidate) => candidate.title === title);
      if (!sheet) return undefined;
      const rows = sheet.cells.map((row) => trimTrailing(row));
      while (rows.length > 0 && rows[rows.length - 1]!.length === 0) rows.pop();
      return rows;
    },
    failNext(failure) {
      failures.push({ ...failure, remaining: failure.times ?? 1 });
    },
  };
}

// ---- Routing ----

function queryOf(url: URL): Record<string, string> {
  const query: Record<string, string> = {};
  url.searchParams.forEach((value, key) => {
    query[key] ??= value;
  });
  return query;
}

type Route =
  | { kind: 'files.list' | 'files.create' | 'files.upload' }
  | { kind: 'files.get' | 'files.delete' | 'sheets.get' | 'sheets.batchUpdate'; id: string }
  | { kind: 'values.get' | 'values.update' | 'values.append'; id: string; range: string };

function matchRoute(method: string, pathname: string): Route | undefined {
  const decode = (text: string): string | undefined => {
    try {
      return decodeURIComponent(text);
    } catch {
      return undefined;
    }
  };
  if (/\/upload\/drive\/v3\/files$/.test(pathname)) return method === 'POST' ? { kind: 'files.upload' } : undefined;
  if (/\/drive\/v3\/files$/.test(pathname)) return method === 'GET' ? { kind: 'files.list' } : method === 'POST' ? { kind: 'files.create' } : undefined;
  const file = /\/drive\/v3\/files\/([^/]+)$/.exec(pathname);
  if (file) {
    const id = decode(file[1]!);
    if (id === undefined) return undefined;
    return method === 'GET' ? { kind: 'files.get', id } : method === 'DELETE' ? { kind: 'files.delete', id } : undefined;
  }
  const sheets = /\/v4\/spreadsheets\/([^/]+?)(?::batchUpdate)?(?:\/values\/(.+))?$/.exec(pathname);
  if (!sheets) return undefined;
  const id = decode(sheets[1]!);
  if (id === undefined) return undefined;
  if (sheets[2] === undefined) {
    if (pathname.endsWith(':batchUpdate')) return method === 'POST' ? { kind: 'sheets.batchUpdate', id } : undefined;
    return method === 'GET' ? { kind: 'sheets.get', id } : undefined;
  }
  if (pathname.includes(':batchUpdate/')) return undefined;
  // The range is a path segment; ":append" after it names the method.
  const append = sheets[2].endsWith(':append');
  const range = decode(append ? sheets[2].slice(0, -':append'.length) : sheets[2]);
  if (range === undefined) return undefined;
  if (append) return method === 'POST' ? { kind: 'values.append', id, range } : undefined;
  return method === 'GET' ? { kind: 'values.get', id, range } : method === 'PUT' ? { kind: 'values.update', id, range } : undefined;
}

// ---- Answers ----

function answer(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  if (typeof body === 'string') return new Response(body, { status, headers: { 'content-type': 'text/plain; charset=UTF-8', ...headers } });
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json; charset=UTF-8', ...headers } });
}

/** Drive v3's error envelope: { error: { code, message, errors: [{ message, domain, reason, location?, locationType? }], status? } }. */
function driveError(
  code: number,
  message: string,
  reason: string,
  itemMessage?: string,
  location?: string,
  locationType?: string,
  status?: string,
  domain = 'global',
): { error: Record<string, unknown> } {
  return {
    error: {
      code,
      message,
      errors: [{ message: itemMessage ?? message, domain, reason, ...(location ? { location, locationType } : {}) }],
      ...(status ? { status } : {}),
    },
  };
}

/** Sheets v4's error envelope (google.rpc.Status): { error: { code, message, status, details? } }. */
function sheetsError(code: number, message: string, status: string, details?: unknown[]): { error: Record<string, unknown> } {
  return { error: { code, message, status, ...(details ? { details } : {}) } };
}

/** The body each API sends for a status when `failNext` names none. */
function defaultErrorBody(api: Api, status: number): unknown {
  if (api === 'drive') {
    // Drive's bodies for rate limits (403 userRateLimitExceeded, 429 rateLimitExceeded) and 5xx backendError,
    // as the Drive guide "Resolve errors" shows them.
    if (status === 429) return driveError(429, 'Rate Limit Exceeded', 'rateLimitExceeded', undefined, undefined, undefined, undefined, 'usageLimits');
    if (status === 403) return driveError(403, 'User Rate Limit Exceeded', 'userRateLimitExceeded', undefined, undefined, undefined, undefined, 'usageLimits');
    if (status === 404) return driveError(404, 'File not found: .', 'notFound', undefined, 'fileId', 'parameter');
    if (status === 401) return driveError(401, 'Invalid Credentials', 'authError', undefined, 'Authorization', 'header', 'UNAUTHENTICATED');
    if (status >= 500) return driveError(status, 'Backend Error', 'backendError');
    return driveError(status, 'Bad Request', 'badRequest');
  }
  if (status === 429) {
    return sheetsError(
      429,
      "Quota exceeded for quota metric 'Write requests' and limit 'Write requests per minute per user' of service 'sheets.googleapis.com' for consumer 'project_number:0'.",
      'RESOURCE_EXHAUSTED',
      [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'RATE_LIMIT_EXCEEDED', domain: 'googleapis.com', metadata: { service: 'sheets.googleapis.com' } }],
    );
  }
  if (status === 503) return sheetsError(503, 'The service is currently unavailable.', 'UNAVAILABLE');
  if (status >= 500) return sheetsError(status, 'Internal error encountered.', 'INTERNAL');
  if (status === 404) return sheetsError(404, 'Requested entity was not found.', 'NOT_FOUND');
  if (status === 403) return sheetsError(403, 'The caller does not have permission', 'PERMISSION_DENIED');
  if (status === 401) return sheetsError(401, `Request had invalid authentication credentials. ${UNAUTHENTICATED_HINT}`, 'UNAUTHENTICATED');
  return sheetsError(status, 'Request contains an invalid argument.', 'INVALID_ARGUMENT');
}

/** Google's front end answers unknown paths and methods with an HTML 404 page, not JSON. */
function htmlNotFound(pathname: string): Response {
  return html(404, 'Not Found', `The requested URL <code>${pathname.replace(/[<>&"]/g, '')}</code> was not found on this server.`);
}

function html(status: number, title: string, text: string): Response {
  const body = `<!DOCTYPE html>\n<html lang=en>\n<meta charset=utf-8>\n<title>Error ${status} (${title})!!1</title>\n<p><b>${status}.</b> <ins>That’s an error.</ins>\n<p>${text} <ins>That’s all we know.</ins>\n`;
  return new Response(body, { status, headers: { 'content-type': 'text/html; charset=UTF-8' } });
}

function gridLimits(sheet: Sheet, row: number, column: number): Answer {
  // Writing outside a tab's grid is refused with the grid's size (observed Sheets v4 message).
  return new Answer(
    400,
    sheetsError(
      400,
      `Range (${quoteTitle(sheet.title)}!${columnName(column)}${row + 1}) exceeds grid limits. Max rows: ${sheet.rowCount}, max columns: ${sheet.columnCount}`,
      'INVALID_ARGUMENT',
    ),
  );
}

// ---- Bodies ----

async function readLimited(request: Request, limit: number): Promise<Uint8Array | undefined> {
  if (!request.body) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel().catch(() => undefined);
      return undefined;
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

function parseJson(bytes: Uint8Array, api: Api): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    // A body that is not JSON: Drive says "Parse Error"; Sheets says "Invalid JSON payload received.".
    throw new Answer(400, api === 'drive' ? driveError(400, 'Parse Error', 'parseError') : sheetsError(400, 'Invalid JSON payload received.', 'INVALID_ARGUMENT'));
  }
}

function describeBody(contentType: string | null, bytes: Uint8Array): unknown {
  if (bytes.byteLength === 0) return undefined;
  const parts = contentType?.startsWith('multipart/') ? parseMultipart(contentType, bytes) : undefined;
  if (parts && parts.length === 2) {
    let metadata: unknown;
    try {
      metadata = JSON.parse(new TextDecoder().decode(parts[0]!.data));
    } catch {
      metadata = new TextDecoder().decode(parts[0]!.data);
    }
    return { metadata, media: { mimeType: parts[1]!.contentType ?? 'application/octet-stream', size: parts[1]!.data.byteLength } };
  }
  const text = new TextDecoder().decode(bytes);
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

interface MultipartPart {
  contentType: string | undefined;
  data: Uint8Array;
}

/** Splits a `multipart/related` body into its parts (Drive's multipart upload format). */
function parseMultipart(contentType: string | null, bytes: Uint8Array): MultipartPart[] | undefined {
  const boundary = /boundary="?([^";]+)"?/i.exec(contentType ?? '')?.[1];
  if (!contentType?.toLowerCase().startsWith('multipart/related') || !boundary) return undefined;
  const encoder = new TextEncoder();
  const delimiter = encoder.encode(`--${boundary}`);
  const positions: number[] = [];
  for (let index = indexOf(bytes, delimiter, 0); index >= 0; index = indexOf(bytes, delimiter, index + delimiter.length)) positions.push(index);
  const parts: MultipartPart[] = [];
  for (let index = 0; index + 1 < positions.length; index += 1) {
    let start = positions[index]! + delimiter.length;
    if (bytes[start] === 13 && bytes[start + 1] === 10) start += 2;
    let end = positions[index + 1]!;
    if (bytes[end - 2] === 13 && bytes[end - 1] === 10) end -= 2;
    const part = bytes.subarray(start, end);
    const headerEnd = indexOf(part, encoder.encode('\r\n\r\n'), 0);
    if (headerEnd < 0) return undefined;
    const headers = new TextDecoder().decode(part.subarray(0, headerEnd));
    const type = /^content-type:\s*(.+)$/im.exec(headers)?.[1]?.trim();
    parts.push({ contentType: type, data: part.subarray(headerEnd + 4) });
  }
  const last = positions.at(-1);
  if (last === undefined || bytes[last + delimiter.length] !== 45 || bytes[last + delimiter.length + 1] !== 45) return undefined;
  return parts;
}

function indexOf(haystack: Uint8Array, needle: Uint8Array, from: number): number {
  outer: for (let index = from; index <= haystack.length - needle.length; index += 1) {
    for (let offset = 0; offset < needle.length; offset += 1) if (haystack[index + offset] !== needle[offset]) continue outer;
    return index;
  }
  return -1;
}

/** RFC 4180 rows: quoted fields may hold the delimiter, quotes (doubled) and line breaks. */
function parseDelimited(text: string, delimiter: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let index = 0; index < text.length; index += 1) {
    const char = text[index]!;
    if (quoted) {
      if (char === '"' && text[index + 1] === '"') {
        field += '"';
        index += 1;
      } else if (char === '"') quoted = false;
      else field += char;
    } else if (char === '"' && field.length === 0) quoted = true;
    else if (char === delimiter) {
      row.push(field);
      field = '';
    } else if (char === '\n' || char === '\r') {
      if (char === '\r' && text[index + 1] === '\n') index += 1;
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
    } else field += char;
  }
  if (field.length > 0 || row.length > 0) {
    row.push(field);
    rows.push(row);
  }
  return rows;
}

// ---- Drive files ----

function metadataSeed(metadata: Record<string, unknown>) {
  return {
    ...(typeof metadata.name === 'string' ? { name: metadata.name } : {}),
    ...(typeof metadata.mimeType === 'string' ? { mimeType: metadata.mimeType } : {}),
    ...(typeof metadata.description === 'string' ? { description: metadata.description } : {}),
    ...(metadata.appProperties ? { appProperties: metadata.appProperties as Record<string, string> } : {}),
    ...(metadata.properties ? { properties: metadata.properties as Record<string, string> } : {}),
    ...(Array.isArray(metadata.parents) ? { parents: metadata.parents as string[] } : {}),
  };
}

/** A file resource with every field the fake keeps. */
function fileView(file: StoredFile): Record<string, unknown> {
  return {
    kind: 'drive#file',
    id: file.id,
    name: file.name,
    mimeType: file.mimeType,
    ...(Object.keys(file.appProperties).length > 0 ? { appProperties: { ...file.appProperties } } : {}),
    ...(Object.keys(file.properties).length > 0 ? { properties: { ...file.properties } } : {}),
    ...(file.description === undefined ? {} : { description: file.description }),
    parents: file.parents.slice(),
    trashed: file.trashed,
    createdTime: file.createdTime,
    modifiedTime: file.modifiedTime,
    // Drive reports size (an int64 as a string) only for files with binary content (Drive v3 reference, File).
    ...(file.mimeType.startsWith(WORKSPACE_PREFIX) ? {} : { size: String(file.content.byteLength) }),
  };
}

/** Without `fields`, Drive v3 shows a file as kind, id, name and mimeType only. */
function defaultFileView(file: StoredFile): Record<string, unknown> {
  return { kind: 'drive#file', id: file.id, name: file.name, mimeType: file.mimeType };
}

// ---- Drive queries ----

type Token = { type: 'word'; value: string } | { type: 'string'; value: string } | { type: 'symbol'; value: string };

function tokenize(query: string): Token[] {
  const tokens: Token[] = [];
  let index = 0;
  while (index < query.length) {
    const char = query[index]!;
    if (/\s/.test(char)) {
      index += 1;
    } else if (char === "'") {
      let value = '';
      index += 1;
      for (;;) {
        if (index >= query.length) throw new Error('unterminated string');
        const next = query[index]!;
        if (next === '\\') {
          value += query[index + 1] ?? '';
          index += 2;
        } else if (next === "'") {
          index += 1;
          break;
        } else {
          value += next;
          index += 1;
        }
      }
      tokens.push({ type: 'string', value });
    } else if (char === '!' && query[index + 1] === '=') {
      tokens.push({ type: 'symbol', value: '!=' });
      index += 2;
    } else if ('=(){}'.includes(char)) {
      tokens.push({ type: 'symbol', value: char });
      index += 1;
    } else {
      const word = /^[A-Za-z_][\w.]*/.exec(query.slice(index))?.[0];
      if (!word) throw new Error(`unexpected ${char}`);
      tokens.push({ type: 'word', value: word });
      index += word.length;
    }
  }
  return tokens;
}

/**
 * Compiles the subset of Drive's query language the runtime sends: `and`/`or`/`not`, parentheses,
 * `trashed = true|false`, `mimeType`/`name` with `=`, `!=` or `contains`, `'<id>' in parents`, and
 * `appProperties`/`properties has { key='k' and value='v' }`. Anything else throws.
 */
function parseDriveQuery(query: string): (file: StoredFile) => boolean {
  const tokens = tokenize(query);
  let position = 0;
  const peek = (): Token | undefined => tokens[position];
  const take = (): Token => {
    const token = tokens[position];
    if (!token) throw new Error('unexpected end');
    position += 1;
    return token;
  };
  const expect = (value: string): void => {
    const token = take();
    if (token.value !== value || token.type === 'string') throw new Error(`expected ${value}`);
  };
  const isWord = (token: Token | undefined, value: string): boolean => token?.type === 'word' && token.value.toLowerCase() === value;

  type Predicate = (file: StoredFile) => boolean;
  const orExpression = (): Predicate => {
    let left = andExpression();
    while (isWord(peek(), 'or')) {
      take();
      const right = andExpression();
      const previous = left;
      left = (file) => previous(file) || right(file);
    }
    return left;
  };
  const andExpression = (): Predicate => {
    let left = unary();
    while (isWord(peek(), 'and')) {
      take();
      const right = unary();
      const previous = left;
      left = (file) => previous(file) && right(file);
    }
    return left;
  };
  const unary = (): Predicate => {
    if (isWord(peek(), 'not')) {
      take();
      const inner = unary();
      return (file) => !inner(file);
    }
    if (peek()?.type === 'symbol' && peek()?.value === '(') {
      take();
      const inner = orExpression();
      expect(')');
      return inner;
    }
    return term();
  };
  const term = (): Predicate => {
    const first = take();
    if (first.type === 'string') {
      if (!isWord(take(), 'in')) throw new Error('expected in');
      const collection = take();
      if (!isWord(collection, 'parents')) throw new Error('only parents');
      return (file) => file.parents.includes(first.value);
    }
    if (first.type !== 'word') throw new Error('expected a field');
    const field = first.value;
    if (field === 'appProperties' || field === 'properties') {
      if (!isWord(take(), 'has')) throw new Error('expected has');
      expect('{');
      const pair: Record<string, string> = {};
      for (let index = 0; index < 2; index += 1) {
        const name = take();
        if (name.type !== 'word' || (name.value !== 'key' && name.value !== 'value')) throw new Error('expected key or value');
        expect('=');
        const value = take();
        if (value.type !== 'string') throw new Error('expected a string');
        pair[name.value] = value.value;
        if (index === 0 && !isWord(take(), 'and')) throw new Error('expected and');
      }
      expect('}');
      if (pair.key === undefined || pair.value === undefined) throw new Error('expected key and value');
      return (file) => (field === 'appProperties' ? file.appProperties : file.properties)[pair.key!] === pair.value;
    }
    const operator = take();
    const value = take();
    if (field === 'trashed') {
      if (operator.type !== 'symbol' || (operator.value !== '=' && operator.value !== '!=')) throw new Error('bad operator');
      if (value.type !== 'word' || (value.value !== 'true' && value.value !== 'false')) throw new Error('expected a boolean');
      const wanted = value.value === 'true';
      return operator.value === '=' ? (file) => file.trashed === wanted : (file) => file.trashed !== wanted;
    }
    if (field === 'mimeType' || field === 'name') {
      if (value.type !== 'string') throw new Error('expected a string');
      const read = (file: StoredFile): string => (field === 'name' ? file.name : file.mimeType);
      if (operator.type === 'symbol' && operator.value === '=') return (file) => read(file) === value.value;
      if (operator.type === 'symbol' && operator.value === '!=') return (file) => read(file) !== value.value;
      if (isWord(operator, 'contains')) return (file) => read(file).toLowerCase().includes(value.value.toLowerCase());
      throw new Error('bad operator');
    }
    throw new Error(`unsupported field ${field}`);
  };
  const predicate = orExpression();
  if (position !== tokens.length) throw new Error('trailing tokens');
  return predicate;
}

// ---- Partial responses ----

type FieldMask = Map<string, FieldMask | true>;

/**
 * Parses the `fields` parameter (partial responses): `a,b`, nested `a/b` or `a.b`, and
 * sub-selections `a(b,c)`. Drive writes `files(id,name)`, Sheets `sheets.properties`.
 */
function parseFieldMask(text: string, api: Api): FieldMask {
  const mask: FieldMask = new Map();
  let index = 0;
  const fail = (): Answer =>
    new Answer(
      400,
      api === 'drive' ? driveError(400, `Invalid field selection ${text}`, 'invalidParameter', undefined, 'fields', 'parameter') : sheetsError(400, 'Request contains an invalid argument.', 'INVALID_ARGUMENT'),
    );
  const merge = (target: FieldMask, path: string[], sub: FieldMask | true): void => {
    let node = target;
    path.forEach((name, position) => {
      const last = position === path.length - 1;
      const existing = node.get(name);
      if (last) {
        if (sub === true || existing === true) node.set(name, true);
        else if (existing) for (const [key, value] of sub) merge(existing, [key], value);
        else node.set(name, sub);
        return;
      }
      if (existing === true) return;
      const next = existing ?? new Map();
      node.set(name, next);
      node = next;
    });
  };
  const list = (target: FieldMask, closing: string | undefined): void => {
    for (;;) {
      const name = /^[\w*]+(?:[./][\w*]+)*/.exec(text.slice(index))?.[0];
      if (!name) throw fail();
      index += name.length;
      const path = name.split(/[./]/);
      if (text[index] === '(') {
        index += 1;
        const sub: FieldMask = new Map();
        list(sub, ')');
        merge(target, path, sub);
      } else {
        merge(target, path, true);
      }
      while (text[index] === ' ') index += 1;
      if (text[index] === ',') {
        index += 1;
        while (text[index] === ' ') index += 1;
        continue;
      }
      if (closing !== undefined) {
        if (text[index] !== closing) throw fail();
        index += 1;
      } else if (index !== text.length) {
        throw fail();
      }
      return;
    }
  };
  list(mask, undefined);
  return mask;
}

function applyFieldMask(value: unknown, mask: FieldMask | true): unknown {
  if (mask === true) return value;
  if (Array.isArray(value)) return value.map((item) => applyFieldMask(item, mask));
  if (value === null || typeof value !== 'object') return value;
  const source = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, sub] of mask) {
    if (key === '*') {
      for (const [name, item] of Object.entries(source)) out[name] = applyFieldMask(item, sub);
    } else if (key in source) {
      out[key] = applyFieldMask(source[key], sub);
    }
  }
  return out;
}

// ---- A1 ranges ----

interface ResolvedRange {
  sheet: Sheet;
  startRow: number;
  startColumn: number;
  /** Inclusive; `undefined` runs to the end of the grid. */
  endRow: number | undefined;
  endColumn: number | undefined;
  /** A single cell ("A1"): read as one cell, written as the top-left corner of the values. */
  single: boolean;
}

function unparsable(range: string): Answer {
  // A range that names no tab, or is not A1 notation: 400 "Unable to parse range: <range>" (observed Sheets v4 message).
  return new Answer(400, sheetsError(400, `Unable to parse range: ${range}`, 'INVALID_ARGUMENT'));
}

/**
 * Resolves A1 notation: `Sheet1`, `Sheet1!A1`, `'My Sheet'!A1:C` (quotes doubled inside),
 * `Sheet1!A:D`, `Sheet1!1:1`, or `A1:B2` alone (the first tab).
 */
function resolveRange(spreadsheet: Spreadsheet, range: string): ResolvedRange {
  let title: string | undefined;
  let cells: string | undefined;
  if (range.startsWith("'")) {
    let index = 1;
    title = '';
    for (;;) {
      if (index >= range.length) throw unparsable(range);
      if (range[index] === "'" && range[index + 1] === "'") {
        title += "'";
        index += 2;
      } else if (range[index] === "'") {
        index += 1;
        break;
      } else {
        title += range[index];
        index += 1;
      }
    }
    if (index < range.length) {
      if (range[index] !== '!') throw unparsable(range);
      cells = range.slice(index + 1);
    }
  } else if (range.includes('!')) {
    const bang = range.lastIndexOf('!');
    title = range.slice(0, bang);
    cells = range.slice(bang + 1);
  } else {
    const byTitle = spreadsheet.sheets.find((sheet) => sameTitle(sheet.title, range));
    if (byTitle) return { sheet: byTitle, startRow: 0, startColumn: 0, endRow: undefined, endColumn: undefined, single: false };
    cells = range;
  }
  const sheet = title === undefined ? spreadsheet.sheets[0] : spreadsheet.sheets.find((candidate) => sameTitle(candidate.title, title!));
  if (!sheet) throw unparsable(range);
  if (cells === undefined) return { sheet, startRow: 0, startColumn: 0, endRow: undefined, endColumn: undefined, single: false };
  const [from, to, extra] = cells.split(':');
  if (extra !== undefined || from === undefined) throw unparsable(range);
  const start = parseCell(from);
  if (!start) throw unparsable(range);
  if (to === undefined) {
    // A single reference must be a cell: "A1".
    if (start.row === undefined || start.column === undefined) throw unparsable(range);
    return { sheet, startRow: start.row, startColumn: start.column, endRow: start.row, endColumn: start.column, single: true };
  }
  const end = parseCell(to);
  if (!end) throw unparsable(range);
  // Whole columns ("A:B") need letters on both sides, whole rows ("1:2") numbers on both sides.
  if (start.column === undefined && end.column !== undefined) throw unparsable(range);
  if (start.row === undefined && end.row !== undefined && start.column === undefined) throw unparsable(range);
  const rows = [start.row ?? 0, end.row];
  const columns = [start.column ?? 0, end.column];
  const startRow = end.row === undefined ? rows[0]! : Math.min(rows[0]!, end.row);
  const endRow = end.row === undefined ? undefined : Math.max(rows[0]!, end.row);
  const startColumn = end.column === undefined ? columns[0]! : Math.min(columns[0]!, end.column);
  const endColumn = end.column === undefined ? undefined : Math.max(columns[0]!, end.column);
  return { sheet, startRow, startColumn, endRow, endColumn, single: false };
}

function parseCell(text: string): { row: number | undefined; column: number | undefined } | undefined {
  const match = /^\$?([A-Za-z]{0,3})\$?(\d{0,8})$/.exec(text);
  if (!match || (match[1] === '' && match[2] === '')) return undefined;
  const column = match[1] === '' ? undefined : columnIndex(match[1]!);
  const row = match[2] === '' ? undefined : Number(match[2]) - 1;
  if (row !== undefined && row < 0) return undefined;
  return { row, column };
}

function columnIndex(letters: string): number {
  let value = 0;
  for (const letter of letters.toUpperCase()) value = value * 26 + (letter.charCodeAt(0) - 64);
  return value - 1;
}

function columnName(index: number): string {
  let name = '';
  for (let value = index + 1; value > 0; value = Math.floor((value - 1) / 26)) name = String.fromCharCode(65 + ((value - 1) % 26)) + name;
  return name;
}

/** Tab names are quoted in A1 notation unless they are plain words. */
function quoteTitle(title: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(title) && !/^[A-Za-z]{1,3}\d+$/.test(title) ? title : `'${title.replace(/'/g, "''")}'`;
}

function formatRange(title: string, startRow: number, startColumn: number, endRow: number, endColumn: number): string {
  const start = `${columnName(startColumn)}${startRow + 1}`;
  const end = `${columnName(endColumn)}${endRow + 1}`;
  return `${quoteTitle(title)}!${start === end ? start : `${start}:${end}`}`;
}

function sameTitle(left: string, right: string): boolean {
  return left.toLowerCase() === right.toLowerCase();
}

function sheetProperties(sheet: Sheet, index: number): SheetProperties {
  return { sheetId: sheet.sheetId, title: sheet.title, index, sheetType: 'GRID', gridProperties: { rowCount: sheet.rowCount, columnCount: sheet.columnCount } };
}

function cellCount(spreadsheet: Spreadsheet): number {
  return spreadsheet.sheets.reduce((sum, sheet) => sum + sheet.rowCount * sheet.columnCount, 0);
}

function positiveInteger(value: unknown, fallback: number, fail: (message: string) => Answer, field: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) throw fail(`${field} must be a positive integer.`);
  return value;
}

function trimTrailing(cells: string[]): string[] {
  let end = cells.length;
  while (end > 0 && (cells[end - 1] ?? '') === '') end -= 1;
  return cells.slice(0, end).map((cell) => cell ?? '');
}

function updated(sheet: Sheet, startRow: number, startColumn: number, height: number, width: number, counts: { rows: number; columns: number; cells: number }) {
  return {
    updatedRange: formatRange(sheet.title, startRow, startColumn, startRow + Math.max(height, 1) - 1, startColumn + Math.max(width, 1) - 1),
    updatedRows: counts.rows,
    updatedColumns: counts.columns,
    updatedCells: counts.cells,
  };
}

/**
 * What a cell shows after a value is entered. `RAW` stores strings as given. `USER_ENTERED`
 * parses as if typed: a leading apostrophe forces text (and is hidden), plain decimal numbers are
 * shown in their canonical form (`007` shows `7`), `true`/`false` show `TRUE`/`FALSE`. Formulas,
 * dates and currencies stay as typed here.
 */
function enteredValue(cell: string | number | boolean, input: 'RAW' | 'USER_ENTERED'): string {
  if (typeof cell === 'number') return Number.isFinite(cell) ? String(cell) : '#NUM!';
  if (typeof cell === 'boolean') return cell ? 'TRUE' : 'FALSE';
  if (input === 'RAW') return cell;
  if (cell.startsWith("'")) return cell.slice(1);
  const trimmed = cell.trim();
  if (/^[+-]?(\d{1,15}(\.\d{0,15})?|\.\d{1,15})$/.test(trimmed)) return String(Number(trimmed));
  if (/^(true|false)$/i.test(trimmed)) return trimmed.toUpperCase();
  return cell;
}
