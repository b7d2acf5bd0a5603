import { AgentError, HTTP_STATUS_BY_CODE, isAgentError, type ErrorCode } from '../errors/index.js';
import type { DriveFile, DriveOperationsClient, DriveUploadMedia, SheetValues, SpreadsheetMetadata } from '../ports/index.js';
import type { RetryOptions } from './gemini-backend-client.js';
import { retryAfterMs } from './retry-after.js';
import { readBoundedBody } from './bounded-body.js';

/** Where the Drive and Sheets REST APIs live; point them at a gateway or a local fake. */
export interface DriveBaseUrls {
  /** Drive v3 metadata endpoint. Default `https://www.googleapis.com/drive/v3`. */
  drive?: string;
  /** Drive v3 upload endpoint. Default `https://www.googleapis.com/upload/drive/v3`. */
  upload?: string;
  /** Sheets v4 endpoint. Default `https://sheets.googleapis.com/v4`. */
  sheets?: string;
}

/** Options of {@link createHttpDriveOperationsClient}. */
export interface HttpDriveOperationsClientOptions {
  fetch: typeof fetch;
  /** The user's OAuth token, asked for before every request (so a refreshed token is picked up on a retry). */
  getAccessToken: () => string | Promise<string>;
  baseUrls?: DriveBaseUrls;
  /** Retries of 429, Drive's 403 rate-limit answers and 5xx. Default 5 attempts, 500 ms doubling, 32 s cap. */
  retry?: RetryOptions;
  /** Longest wait for one attempt, answer body included. Default 120 000 ms. */
  timeoutMs?: number;
  /** Largest answer accepted, media included. Default 32 MiB. */
  maxResponseBytes?: number;
  /** Largest JSON request body sent (values, batch requests, metadata). Default 10 MiB. */
  maxRequestBytes?: number;
}

const DEFAULT_BASE_URLS: Required<DriveBaseUrls> = {
  drive: 'https://www.googleapis.com/drive/v3',
  upload: 'https://www.googleapis.com/upload/drive/v3',
  sheets: 'https://sheets.googleapis.com/v4',
};

/** Drive documents multipart upload for files of 5 MB or less; larger ones need a resumable upload. */
const MAX_MULTIPART_UPLOAD_BYTES = 5 * 1024 * 1024;
/** Error answers are only read for their message; the rest is dropped. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;
/** `files.list` pages followed by `queryFiles` (100 files each by default). */
const MAX_QUERY_PAGES = 50;
const MAX_ID_LENGTH = 1024;
const MAX_QUERY_LENGTH = 8192;
const MAX_RANGE_LENGTH = 1024;
/** Drive answers 403 with these reasons when a rate limit, not a permission, refused the call. */
const RATE_LIMIT_REASONS = new Set(['rateLimitExceeded', 'userRateLimitExceeded']);
/** Statuses whose code comes straight from the error table; every other failure is `UPSTREAM_ERROR`. */
const CODES_BY_STATUS: ReadonlyMap<number, ErrorCode> = new Map(
  (['BAD_REQUEST', 'UNAUTHENTICATED', 'FORBIDDEN', 'NOT_FOUND', 'CONFLICT', 'PAYLOAD_TOO_LARGE', 'RATE_LIMITED'] as const).map(
    (code) => [HTTP_STATUS_BY_CODE[code], code],
  ),
);

/**
 * How every failure of this client starts, Sheets calls included: Opal's Drive client gives all its
 * errors this one prefix, and code (and models) that recognise Drive failures go by it.
 */
const PREFIX = 'Drive API error:';

interface Call {
  /** The method of the port, named in errors. */
  operation: string;
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  url: string;
  body?: string | Uint8Array<ArrayBuffer>;
  contentType?: string;
  expect: 'json' | 'bytes' | 'none';
  signal: AbortSignal | undefined;
}

/**
 * A {@link DriveOperationsClient} over the Drive v3 and Sheets v4 REST APIs, authenticated with
 * the user's bearer token.
 *
 * Each call asks `getAccessToken()` for a token, retries rate limits and server errors with
 * jittered exponential backoff (honouring `Retry-After`), caps the size of what it reads, and
 * rejects with an `AgentError` whose message starts `Drive API error:` (Sheets calls too) and
 * never contains the token. A refusal with Google's error envelope reads
 * `Drive API error: <the envelope's message>`; any other refusal `Drive API error: <status> <text>`.
 *
 * @example
 * ```ts
 * const drive = createHttpDriveOperationsClient({ fetch, getAccessToken: () => session.accessToken });
 * const sheet = await drive.createFile({ name: 'Memory', mimeType: 'application/vnd.google-apps.spreadsheet' });
 * await drive.appendSpreadsheetValues(sheet.id, 'Sheet1!A:B', [['score', '42']]);
 * ```
 */
export function createHttpDriveOperationsClient(options: HttpDriveOperationsClientOptions): DriveOperationsClient {
  const drive = trimSlash(options.baseUrls?.drive ?? DEFAULT_BASE_URLS.drive);
  const upload = trimSlash(options.baseUrls?.upload ?? DEFAULT_BASE_URLS.upload);
  const sheets = trimSlash(options.baseUrls?.sheets ?? DEFAULT_BASE_URLS.sheets);
  const maxRequestBytes = options.maxRequestBytes ?? 10 * 1024 * 1024;
  const send = createSender(options);

  const json = (operation: string, value: unknown, field: string): string => {
    const text = JSON.stringify(value);
    if (text.length * 3 > maxRequestBytes && new TextEncoder().encode(text).byteLength > maxRequestBytes) {
      throw new AgentError('PAYLOAD_TOO_LARGE', `${operation}: ${field} is larger than ${maxRequestBytes} bytes`, { details: { field } });
    }
    return text;
  };
  const valuesUrl = (operation: string, spreadsheetId: string, range: string): string =>
    `${sheets}/spreadsheets/${encodeURIComponent(checkId(operation, 'spreadsheetId', spreadsheetId))}/values/${encodeURIComponent(checkRange(operation, range))}`;

  return {
    async createFile(metadata, signal) {
      const body = json('createFile', checkObject('createFile', 'metadata', metadata), 'metadata');
      const file = await send({ operation: 'createFile', method: 'POST', url: `${drive}/files`, body, contentType: 'application/json', expect: 'json', signal });
      return toDriveFile('createFile', file);
    },
    async getFile(fileId, signal) {
      const url = `${drive}/files/${encodeURIComponent(checkId('getFile', 'fileId', fileId))}`;
      return toDriveFile('getFile', await send({ operation: 'getFile', method: 'GET', url, expect: 'json', signal }));
    },
    async getFileMedia(fileId, signal) {
      const url = `${drive}/files/${encodeURIComponent(checkId('getFileMedia', 'fileId', fileId))}?alt=media`;
      return (await send({ operation: 'getFileMedia', method: 'GET', url, expect: 'bytes', signal })) as Uint8Array;
    },
    async deleteFile(fileId, signal) {
      const url = `${drive}/files/${encodeURIComponent(checkId('deleteFile', 'fileId', fileId))}`;
      await send({ operation: 'deleteFile', method: 'DELETE', url, expect: 'none', signal });
    },
    async queryFiles(query, signal) {
      if (typeof query !== 'string' || query.length === 0 || query.length > MAX_QUERY_LENGTH) {
        throw new AgentError('BAD_REQUEST', `queryFiles: query must be a non-empty string of at most ${MAX_QUERY_LENGTH} characters`, {
          details: { field: 'query' },
        });
      }
      const files: DriveFile[] = [];
      let pageToken: string | undefined;
      for (let page = 0; page < MAX_QUERY_PAGES; page += 1) {
        const url = `${drive}/files?q=${encodeURIComponent(query)}${pageToken ? `&pageToken=${encodeURIComponent(pageToken)}` : ''}`;
        const answer = await send({ operation: 'queryFiles', method: 'GET', url, expect: 'json', signal });
        const list = (answer as { files?: unknown }).files ?? [];
        if (!Array.isArray(list)) throw malformed('queryFiles', 'files is not an array');
        list.forEach((file, index) => files.push(toDriveFile('queryFiles', file, `files[${index}]`)));
        const next = (answer as { nextPageToken?: unknown }).nextPageToken;
        if (typeof next !== 'string' || next.length === 0) return files;
        pageToken = next;
      }
      throw new AgentError('UPSTREAM_ERROR', `Drive API error: queryFiles matched more than ${MAX_QUERY_PAGES} pages of files; narrow the query`, {
        details: { operation: 'queryFiles' },
      });
    },
    async getSpreadsheetMetadata(spreadsheetId, signal) {
      const url = `${sheets}/spreadsheets/${encodeURIComponent(checkId('getSpreadsheetMetadata', 'spreadsheetId', spreadsheetId))}?fields=sheets.properties`;
      const answer = await send({ operation: 'getSpreadsheetMetadata', method: 'GET', url, expect: 'json', signal });
      return toSpreadsheetMetadata(answer);
    },
    async getSpreadsheetValues(spreadsheetId, range, signal) {
      const url = valuesUrl('getSpreadsheetValues', spreadsheetId, range);
      const answer = await send({ operation: 'getSpreadsheetValues', method: 'GET', url, expect: 'json', signal });
      return toSheetValues((answer as { values?: unknown }).values);
    },
    async setSpreadsheetValues(spreadsheetId, range, values, signal) {
      const url = `${valuesUrl('setSpreadsheetValues', spreadsheetId, range)}?valueInputOption=USER_ENTERED`;
      const body = json('setSpreadsheetValues', { values: checkValues('setSpreadsheetValues', values) }, 'values');
      await send({ operation: 'setSpreadsheetValues', method: 'PUT', url, body, contentType: 'application/json', expect: 'json', signal });
    },
    async appendSpreadsheetValues(spreadsheetId, range, values, signal) {
      const url = `${valuesUrl('appendSpreadsheetValues', spreadsheetId, range)}:append?valueInputOption=USER_ENTERED`;
      const body = json('appendSpreadsheetValues', { values: checkValues('appendSpreadsheetValues', values) }, 'values');
      await send({ operation: 'appendSpreadsheetValues', method: 'POST', url, body, contentType: 'application/json', expect: 'json', signal });
    },
    async updateSpreadsheet(spreadsheetId, requests, signal) {
      const id = checkId('updateSpreadsheet', 'spreadsheetId', spreadsheetId);
      if (!Array.isArray(requests) || requests.length === 0) {
        throw new AgentError('BAD_REQUEST', 'updateSpreadsheet: requests must be a non-empty array', { details: { field: 'requests' } });
      }
      requests.forEach((request, index) => checkObject('updateSpreadsheet', `requests[${index}]`, request));
      const body = json('updateSpreadsheet', { requests }, 'requests');
      const url = `${sheets}/spreadsheets/${encodeURIComponent(id)}:batchUpdate`;
      await send({ operation: 'updateSpreadsheet', method: 'POST', url, body, contentType: 'application/json', expect: 'json', signal });
    },
    async uploadFile(metadata, media, signal) {
      const { body, contentType } = multipartBody(checkObject('uploadFile', 'metadata', metadata), checkMedia(media));
      const url = `${upload}/files?uploadType=multipart`;
      const file = await send({ operation: 'uploadFile', method: 'POST', url, body, contentType, expect: 'json', signal });
      return toDriveFile('uploadFile', file);
    },
  };
}

/** Builds the function that performs one call: token, fetch, bounded read, error mapping, retries. */
function createSender(options: HttpDriveOperationsClientOptions): (call: Call) => Promise<unknown> {
  const maxAttempts = Math.max(1, options.retry?.maxAttempts ?? 5);
  const baseDelayMs = options.retry?.baseDelayMs ?? 500;
  const maxDelayMs = options.retry?.maxDelayMs ?? 32_000;
  const timeoutMs = options.timeoutMs ?? 120_000;
  const maxResponseBytes = options.maxResponseBytes ?? 32 * 1024 * 1024;
  // Called detached: a browser's fetch throws "Illegal invocation" when called as a method of another object.
  const fetcher = options.fetch;

  return async (call) => {
    for (let attempt = 1; ; attempt += 1) {
      if (call.signal?.aborted) throw cancelled(call);
      const token = await accessToken(options, call);
      const attemptSignal = createAttemptSignal(call.signal, timeoutMs);
      let hintedMs: number | undefined;
      let failure: AgentError;
      try {
        let response: Response;
        try {
          response = await fetcher(call.url, {
            method: call.method,
            headers: { authorization: `Bearer ${token}`, ...(call.contentType ? { 'content-type': call.contentType } : {}) },
            ...(call.body === undefined ? {} : { body: call.body }),
            signal: attemptSignal.signal,
          });
        } catch (error) {
          if (call.signal?.aborted) throw cancelled(call, error);
          if (attemptSignal.timedOut()) throw timedOut(call, timeoutMs, error);
          // The request may or may not have reached Google; only calls that are safe to repeat are retried.
          failure = new AgentError('UPSTREAM_ERROR', `${PREFIX} could not reach ${hostOf(call.url)}: ${redact(messageOf(error), token)}`, {
            cause: error,
            details: { operation: call.operation },
          });
          if (call.method === 'POST' || attempt >= maxAttempts) throw failure;
          await sleep(backoff(attempt, baseDelayMs, maxDelayMs), call);
          continue;
        }
        try {
          if (response.ok) return await readAnswer(call, response, maxResponseBytes, token);
          const text = decodeText(await readBody(response, MAX_ERROR_BODY_BYTES, true, call));
          failure = toApiError(call, response.status, response.statusText, text, token);
          hintedMs = retryAfterMs(response.headers);
        } catch (error) {
          if (call.signal?.aborted) throw cancelled(call, error);
          if (attemptSignal.timedOut()) throw timedOut(call, timeoutMs, error);
          throw error;
        }
      } finally {
        attemptSignal.dispose();
      }
      // A rate limit or a 503 means Google did nothing; after another 5xx it may have done the
      // work, so only calls safe to repeat go again (a second createFile or append would make a
      // duplicate).
      const status = typeof failure.details?.status === 'number' ? failure.details.status : 0;
      const retryable = failure.code === 'RATE_LIMITED' || status === 503 || (call.method !== 'POST' && status >= 500);
      if (!retryable || attempt >= maxAttempts) throw failure;
      const hinted = hintedMs ?? retryInfoMs(failure.details);
      await sleep(hinted === undefined ? backoff(attempt, baseDelayMs, maxDelayMs) : Math.min(maxDelayMs, hinted), call);
    }
  };
}

async function accessToken(options: HttpDriveOperationsClientOptions, call: Call): Promise<string> {
  let token: unknown;
  try {
    token = await options.getAccessToken();
  } catch (error) {
    throw new AgentError('UNAUTHENTICATED', `${PREFIX} getAccessToken failed before ${call.operation}`, {
      cause: error,
      details: { operation: call.operation },
    });
  }
  if (typeof token !== 'string' || token.length === 0) {
    throw new AgentError('UNAUTHENTICATED', `${PREFIX} getAccessToken returned no token for ${call.operation}`, {
      details: { operation: call.operation },
    });
  }
  // A header value with a line break or a non-ASCII character makes fetch throw an error that quotes it.
  if (!/^[\x21-\x7e]+$/.test(token)) {
    throw new AgentError('UNAUTHENTICATED', `${PREFIX} the access token holds characters a header cannot carry`, {
      details: { operation: call.operation },
    });
  }
  return token;
}

async function readAnswer(call: Call, response: Response, maxResponseBytes: number, token: string): Promise<unknown> {
  if (call.expect === 'none') {
    await response.body?.cancel();
    return undefined;
  }
  const bytes = await readBody(response, maxResponseBytes, false, call);
  if (call.expect === 'bytes') return bytes;
  const text = decodeText(bytes);
  let parsed: unknown;
  try {
    parsed = text.length === 0 ? {} : JSON.parse(text);
  } catch (error) {
    const type = response.headers.get('content-type') ?? 'no content type';
    throw new AgentError('UPSTREAM_ERROR', `${PREFIX} ${call.operation} answered ${response.status} with a body that is not JSON (${clean(type, token, 80)})`, {
      cause: error,
      details: { operation: call.operation, status: response.status },
    });
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw malformed(call.operation, 'the answer is not a JSON object');
  }
  // An error envelope on a 2xx status is still an error.
  if ('error' in parsed && parsed.error !== null && typeof parsed.error === 'object') {
    const envelope = parsed.error as { code?: unknown };
    const status = typeof envelope.code === 'number' && envelope.code >= 400 && envelope.code < 600 ? envelope.code : 502;
    throw toApiError(call, status, '', text, token);
  }
  return parsed;
}

/** Reads at most `limit` bytes; beyond it either truncates (error bodies) or fails. */
function readBody(response: Response, limit: number, truncate: boolean, call: Call): Promise<Uint8Array> {
  const tooLarge = (): AgentError =>
    new AgentError('UPSTREAM_ERROR', `${PREFIX} ${call.operation} answered with more than ${limit} bytes`, {
      details: { operation: call.operation, status: response.status, limit },
    });
  return readBoundedBody(response, limit, { tooLarge, truncate });
}

interface GoogleErrorEnvelope {
  error?: {
    code?: unknown;
    message?: unknown;
    status?: unknown;
    errors?: Array<{ reason?: unknown; message?: unknown }>;
    details?: unknown;
  };
}

/** Maps a refused call (Google's `{"error": {...}}` envelope or anything else) to a coded error. */
function toApiError(call: Call, status: number, statusText: string, text: string, token: string): AgentError {
  let envelope: GoogleErrorEnvelope['error'];
  try {
    const parsed = JSON.parse(text) as GoogleErrorEnvelope;
    if (parsed && typeof parsed === 'object' && parsed.error && typeof parsed.error === 'object') envelope = parsed.error;
  } catch {
    // Not JSON (an HTML error page from a proxy, say): described below by status and a snippet.
  }
  const firstError = Array.isArray(envelope?.errors) ? envelope.errors[0] : undefined;
  const reason = typeof firstError?.reason === 'string' ? firstError.reason : undefined;
  let code = status >= 500 ? 'UPSTREAM_ERROR' : (CODES_BY_STATUS.get(status) ?? 'UPSTREAM_ERROR');
  // A quota refused with 403 says so by its reason (Drive) or its status word (Sheets, Google's newer APIs).
  if (status === 403 && ((reason && RATE_LIMIT_REASONS.has(reason)) || envelope?.status === 'RESOURCE_EXHAUSTED')) code = 'RATE_LIMITED';
  // The status stays in `details`; Google's own message already says what went wrong.
  let description: string;
  if (typeof envelope?.message === 'string' && envelope.message.length > 0) {
    description = clean(envelope.message, token, 500);
  } else if (text.trim().length > 0) {
    description = `${status} ${clean(statusText || 'error', token, 80)} (not a JSON error: ${JSON.stringify(clean(text, token, 120))})`;
  } else {
    description = `${status} ${clean(statusText || 'error', token, 80)}`;
  }
  return new AgentError(code, `${PREFIX} ${description}`, {
    details: {
      operation: call.operation,
      status,
      ...(reason ? { reason: clean(reason, token, 80) } : {}),
      ...(typeof envelope?.status === 'string' ? { providerStatus: clean(envelope.status, token, 80) } : {}),
      ...(Array.isArray(envelope?.details) ? { providerDetails: envelope.details.slice(0, 10) } : {}),
    },
  });
}

function toDriveFile(operation: string, value: unknown, path = 'the answer'): DriveFile {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || typeof (value as { id?: unknown }).id !== 'string') {
    throw malformed(operation, `${path} has no file id`);
  }
  return value as DriveFile;
}

function toSpreadsheetMetadata(value: unknown): SpreadsheetMetadata {
  const list = (value as { sheets?: unknown }).sheets ?? [];
  if (!Array.isArray(list)) throw malformed('getSpreadsheetMetadata', 'sheets is not an array');
  list.forEach((sheet: unknown, index) => {
    const properties = (sheet as { properties?: { sheetId?: unknown; title?: unknown } } | null)?.properties;
    if (!properties || typeof properties.sheetId !== 'number' || typeof properties.title !== 'string') {
      throw malformed('getSpreadsheetMetadata', `sheets[${index}].properties needs a numeric sheetId and a title`);
    }
  });
  return { sheets: list as SpreadsheetMetadata['sheets'] };
}

function toSheetValues(value: unknown): SheetValues {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw malformed('getSpreadsheetValues', 'values is not an array');
  return value.map((row: unknown, rowIndex) => {
    if (!Array.isArray(row)) throw malformed('getSpreadsheetValues', `values[${rowIndex}] is not an array`);
    return row.map((cell: unknown, cellIndex) => {
      if (typeof cell === 'string') return cell;
      if (typeof cell === 'number' || typeof cell === 'boolean') return String(cell);
      throw malformed('getSpreadsheetValues', `values[${rowIndex}][${cellIndex}] is not a cell value`);
    });
  });
}

function malformed(operation: string, what: string): AgentError {
  return new AgentError('UPSTREAM_ERROR', `${PREFIX} ${operation} got an unexpected answer: ${what}`, { details: { operation } });
}

function checkId(operation: string, field: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_ID_LENGTH) {
    throw new AgentError('BAD_REQUEST', `${operation}: ${field} must be a non-empty string of at most ${MAX_ID_LENGTH} characters`, {
      details: { field },
    });
  }
  return value;
}

function checkRange(operation: string, value: unknown): string {
  if (typeof value !== 'string' || value.trim().length === 0 || value.length > MAX_RANGE_LENGTH) {
    throw new AgentError('BAD_REQUEST', `${operation}: range must be an A1 range of at most ${MAX_RANGE_LENGTH} characters`, {
      details: { field: 'range' },
    });
  }
  return value;
}

function checkObject(operation: string, field: string, value: unknown): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new AgentError('BAD_REQUEST', `${operation}: ${field} must be an object`, { details: { field } });
  }
  return value as Record<string, unknown>;
}

function checkValues(operation: string, values: unknown): SheetValues {
  if (!Array.isArray(values)) throw new AgentError('BAD_REQUEST', `${operation}: values must be an array of rows`, { details: { field: 'values' } });
  values.forEach((row: unknown, rowIndex) => {
    if (!Array.isArray(row)) {
      throw new AgentError('BAD_REQUEST', `${operation}: values[${rowIndex}] must be an array of strings`, { details: { field: `values[${rowIndex}]` } });
    }
    row.forEach((cell: unknown, cellIndex) => {
      if (typeof cell !== 'string') {
        const field = `values[${rowIndex}][${cellIndex}]`;
        throw new AgentError('BAD_REQUEST', `${operation}: ${field} must be a string`, { details: { field } });
      }
    });
  });
  return values as SheetValues;
}

function checkMedia(media: unknown): DriveUploadMedia {
  const candidate = media as Partial<DriveUploadMedia> | null;
  if (!candidate || !(candidate.data instanceof Uint8Array)) {
    throw new AgentError('BAD_REQUEST', 'uploadFile: media.data must be a Uint8Array', { details: { field: 'media.data' } });
  }
  if (typeof candidate.mimeType !== 'string' || !/^[\w.+-]+\/[\w.+-]+$/.test(candidate.mimeType)) {
    throw new AgentError('BAD_REQUEST', 'uploadFile: media.mimeType must be a MIME type such as text/csv', { details: { field: 'media.mimeType' } });
  }
  if (candidate.data.byteLength > MAX_MULTIPART_UPLOAD_BYTES) {
    throw new AgentError('PAYLOAD_TOO_LARGE', `uploadFile: media.data is larger than ${MAX_MULTIPART_UPLOAD_BYTES} bytes`, {
      details: { field: 'media.data' },
    });
  }
  return candidate as DriveUploadMedia;
}

/** A `multipart/related` body: the metadata as JSON, then the content (Drive's multipart upload). */
function multipartBody(metadata: Record<string, unknown>, media: DriveUploadMedia): { body: Uint8Array<ArrayBuffer>; contentType: string } {
  const boundary = `drive-upload-${crypto.randomUUID()}`;
  const encoder = new TextEncoder();
  const head = encoder.encode(
    `--${boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n${JSON.stringify(metadata)}\r\n` +
      `--${boundary}\r\nContent-Type: ${media.mimeType}\r\n\r\n`,
  );
  const tail = encoder.encode(`\r\n--${boundary}--\r\n`);
  const body = new Uint8Array(head.byteLength + media.data.byteLength + tail.byteLength);
  body.set(head, 0);
  body.set(media.data, head.byteLength);
  body.set(tail, head.byteLength + media.data.byteLength);
  return { body, contentType: `multipart/related; boundary=${boundary}` };
}

interface AttemptSignal {
  signal: AbortSignal;
  timedOut(): boolean;
  dispose(): void;
}

/** One attempt's signal: aborts when the caller aborts or the attempt runs past `timeoutMs`. */
function createAttemptSignal(outer: AbortSignal | undefined, timeoutMs: number): AttemptSignal {
  const controller = new AbortController();
  let expired = false;
  const timer = setTimeout(() => {
    expired = true;
    controller.abort();
  }, timeoutMs);
  const onAbort = (): void => controller.abort();
  if (outer?.aborted) onAbort();
  else outer?.addEventListener('abort', onAbort, { once: true });
  return {
    signal: controller.signal,
    timedOut: () => expired,
    dispose: () => {
      clearTimeout(timer);
      outer?.removeEventListener('abort', onAbort);
    },
  };
}

function cancelled(call: Call, cause?: unknown): AgentError {
  if (isAgentError(cause)) return cause;
  return new AgentError('ABORTED', `${PREFIX} ${call.operation} cancelled`, {
    ...(cause === undefined ? {} : { cause }),
    details: { operation: call.operation },
  });
}

function timedOut(call: Call, timeoutMs: number, cause: unknown): AgentError {
  return new AgentError('TIMEOUT', `${PREFIX} ${call.operation} took longer than ${timeoutMs} ms`, {
    cause,
    details: { operation: call.operation },
  });
}

function sleep(ms: number, call: Call): Promise<void> {
  return new Promise((resolve, reject) => {
    if (call.signal?.aborted) {
      reject(cancelled(call));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(cancelled(call));
    };
    const timer = setTimeout(() => {
      call.signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    call.signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Exponential backoff with jitter: half to all of `base * 2^(attempt-1)`, capped. */
function backoff(attempt: number, baseDelayMs: number, maxDelayMs: number): number {
  return Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1)) * (0.5 + Math.random() * 0.5);
}


/** `google.rpc.RetryInfo.retryDelay` ("2s", "1.5s") from the error's details, in ms. */
function retryInfoMs(details: Record<string, unknown> | undefined): number | undefined {
  const list = details?.providerDetails;
  if (!Array.isArray(list)) return undefined;
  for (const item of list) {
    const entry = item as { '@type'?: unknown; retryDelay?: unknown } | null;
    if (typeof entry?.['@type'] === 'string' && entry['@type'].endsWith('google.rpc.RetryInfo') && typeof entry.retryDelay === 'string') {
      const seconds = Number.parseFloat(entry.retryDelay);
      if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
    }
  }
  return undefined;
}

/** Text from an untrusted answer, safe for a message: no token, no control characters, bounded. */
function clean(text: string, token: string, limit: number): string {
  const flat = redact(text, token).replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  return flat.length > limit ? `${flat.slice(0, limit)}…` : flat;
}

function redact(text: string, token: string): string {
  return token.length > 0 ? text.split(token).join('[redacted]') : text;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'the API';
  }
}

function trimSlash(url: string): string {
  return url.replace(/\/+$/, '');
}

function decodeText(bytes: Uint8Array): string {
  return new TextDecoder().decode(bytes);
}
