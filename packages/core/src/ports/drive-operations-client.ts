/** A Drive file's metadata as the Drive v3 API returns it. */
export interface DriveFile {
  id: string;
  name?: string;
  mimeType?: string;
  appProperties?: Record<string, string>;
  [key: string]: unknown;
}

/** Sheets values: rows of cells. */
export type SheetValues = string[][];

/**
 * Google Drive and Sheets operations used by the memory and chat-log features.
 * Auth is baked into the instance.
 *
 * @example
 * ```ts
 * const drive: DriveOperationsClient = createDriveOperationsClient({ accessToken, fetch });
 * const files = await drive.queryFiles("trashed = false");
 * ```
 */
export interface DriveOperationsClient {
  createFile(metadata: Record<string, unknown>): Promise<DriveFile>;
  getFile(fileId: string): Promise<DriveFile>;
  getFileMedia(fileId: string): Promise<Uint8Array>;
  deleteFile(fileId: string): Promise<void>;
  queryFiles(query: string): Promise<DriveFile[]>;
  getSpreadsheetMetadata(spreadsheetId: string): Promise<{
    sheets?: Array<{ properties?: { sheetId?: number; title?: string; [key: string]: unknown } }>;
  }>;
  getSpreadsheetValues(spreadsheetId: string, range: string): Promise<SheetValues>;
  setSpreadsheetValues(spreadsheetId: string, range: string, values: SheetValues): Promise<void>;
  appendSpreadsheetValues(spreadsheetId: string, range: string, values: SheetValues): Promise<void>;
  updateSpreadsheet(spreadsheetId: string, requests: Array<Record<string, unknown>>): Promise<void>;
}
