/** A Drive file's metadata as the Drive v3 API returns it (by default `kind`, `id`, `name`, `mimeType`). */
export interface DriveFile {
  id: string;
  name?: string;
  mimeType?: string;
  appProperties?: Record<string, string>;
  [key: string]: unknown;
}

/** Sheets values: rows of cells, as the Sheets API shows them (formatted strings). */
export type SheetValues = string[][];

/** One tab of a spreadsheet, as `spreadsheets.get` describes it under `sheets[].properties`. */
export interface SheetProperties {
  sheetId: number;
  title: string;
  index?: number;
  gridProperties?: { rowCount?: number; columnCount?: number; [key: string]: unknown };
  [key: string]: unknown;
}

/** The part of a spreadsheet's metadata the runtime reads: its tabs. */
export interface SpreadsheetMetadata {
  sheets: Array<{ properties: SheetProperties }>;
}

/** The content of a file to upload. */
export interface DriveUploadMedia {
  /** The file's bytes. */
  data: Uint8Array;
  /** Their MIME type, e.g. `text/csv`. */
  mimeType: string;
}

/**
 * Google Drive and Sheets operations used by the memory, chat-log and Drive features.
 *
 * Auth is baked into the instance. Every method takes an optional `signal` that cancels it, and
 * rejects with a coded `AgentError` (`NOT_FOUND`, `UNAUTHENTICATED`, `FORBIDDEN`, `RATE_LIMITED`,
 * `UPSTREAM_ERROR`, `ABORTED`, ...) when the API refuses.
 *
 * @example
 * ```ts
 * const drive: DriveOperationsClient = createHttpDriveOperationsClient({ fetch, getAccessToken: () => token });
 * const [memory] = await drive.queryFiles("appProperties has { key = 'app' and value = 'memory' } and trashed = false");
 * const values = await drive.getSpreadsheetValues(memory!.id, 'Scores!A1:B3');
 * ```
 */
export interface DriveOperationsClient {
  /** Creates a file from metadata alone (`files.create`): a spreadsheet, a folder, an empty file. Resolves with its metadata. */
  createFile(metadata: Record<string, unknown>, signal?: AbortSignal): Promise<DriveFile>;
  /** Reads a file's metadata (`files.get`). */
  getFile(fileId: string, signal?: AbortSignal): Promise<DriveFile>;
  /** Downloads a file's content (`files.get` with `alt=media`); Google Docs editors files cannot be downloaded this way. */
  getFileMedia(fileId: string, signal?: AbortSignal): Promise<Uint8Array>;
  /** Deletes a file for good, skipping the trash (`files.delete`). */
  deleteFile(fileId: string, signal?: AbortSignal): Promise<void>;
  /** Lists the files matching a Drive query (`files.list` with `q`), every page of them; `[]` when none match. */
  queryFiles(query: string, signal?: AbortSignal): Promise<DriveFile[]>;
  /** Reads a spreadsheet's tabs (`spreadsheets.get` with `fields=sheets.properties`); `sheets` is `[]` when there are none. */
  getSpreadsheetMetadata(spreadsheetId: string, signal?: AbortSignal): Promise<SpreadsheetMetadata>;
  /**
   * Reads the values in an A1 range such as `Scores!A1:B3`, `'My Sheet'!A:D` or a bare tab name
   * (`spreadsheets.values.get`). Pass the range as written; the client encodes it. Trailing empty
   * rows and cells are absent, so an empty range gives `[]`.
   */
  getSpreadsheetValues(spreadsheetId: string, range: string, signal?: AbortSignal): Promise<SheetValues>;
  /** Overwrites the cells of a range, parsing each value as if a user typed it (`spreadsheets.values.update`, `USER_ENTERED`). */
  setSpreadsheetValues(spreadsheetId: string, range: string, values: SheetValues, signal?: AbortSignal): Promise<void>;
  /** Appends rows after the last row of the table found in a range (`spreadsheets.values.append`, `USER_ENTERED`). */
  appendSpreadsheetValues(spreadsheetId: string, range: string, values: SheetValues, signal?: AbortSignal): Promise<void>;
  /**
   * Applies structural changes atomically (`spreadsheets.batchUpdate`), e.g. `{ addSheet: { properties: { title } } }`,
   * `{ deleteSheet: { sheetId } }`, `{ updateSheetProperties: { properties, fields } }`: all or none apply.
   */
  updateSpreadsheet(spreadsheetId: string, requests: Array<Record<string, unknown>>, signal?: AbortSignal): Promise<void>;
  /**
   * Uploads a file with its content in one multipart request (`files.create` on the upload
   * endpoint). Metadata alone cannot carry bytes, so saving an agent's file to Drive needs this;
   * a Google Workspace `mimeType` in the metadata (e.g. a spreadsheet for `text/csv` content) asks
   * Drive to convert. Optional: memory and the chat log never upload.
   */
  uploadFile?(metadata: Record<string, unknown>, media: DriveUploadMedia, signal?: AbortSignal): Promise<DriveFile>;
}
