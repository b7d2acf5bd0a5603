import { AgentError, isAgentError, type ErrorCode } from '../errors/index.js';
import type { DriveFile, DriveOperationsClient, SheetValues } from '../ports/index.js';

/** The `appProperties` key that marks a graph's memory spreadsheet in Drive. */
export const MEMORY_PROPERTY_KEY = 'google-drive-connector';

/** Where the agent reads memory sheets as files: `/mnt/memory/<sheet name>`. */
export const MEMORY_DIRECTORY = '/mnt/memory/';

/** The MIME type of a Google Sheets spreadsheet. */
const SPREADSHEET_MIME_TYPE = 'application/vnd.google-apps.spreadsheet';
/** The first tab of a new spreadsheet (id 0) becomes the intro; it is never listed as memory. */
const INTRO_SHEET_ID = 0;
const INTRO_SHEET = 'intro';
const INTRO_TEXT =
  'This spreadsheet is the long-term memory of an agent. Each tab is one memory sheet the agent created; ' +
  'tabs whose names start with "__" (such as the chat log) are kept by the runtime. You may read and edit ' +
  'the tabs; the agent sees your changes the next time it runs.';
/** What the model is told when the spreadsheet has gone from Drive while a run used it. */
const SPREADSHEET_GONE =
  'The memory spreadsheet is no longer in Google Drive (it was deleted, or this account lost access to it); ' +
  'what it held cannot be read. The next memory call starts a new spreadsheet if it is still gone.';
/** Drive allows 124 bytes for one property, key and value together. */
const MAX_PROPERTY_BYTES = 124;
/** Sheets refuses tab names longer than this. */
export const MAX_SHEET_NAME_LENGTH = 100;
/** Sheets refuses cells longer than this. */
export const MAX_CELL_LENGTH = 50_000;
/** The longest text a cell written as text holds: the apostrophe that marks it as text counts too. */
export const MAX_CELL_TEXT_LENGTH = MAX_CELL_LENGTH - 1;
/** Most cells one write may hold. */
export const MAX_CELLS_PER_WRITE = 100_000;
/** Most columns a sheet may be created with. */
export const MAX_COLUMNS = 1_000;
/** Largest read (as JSON text) handed to the model or kept as a file. */
export const MAX_READ_CHARACTERS = 1024 * 1024;
/** Most characters, all cells together, one write may hold. */
export const MAX_WRITE_CHARACTERS = 4 * 1024 * 1024;
/**
 * The longest A1 range taken: a quoted sheet name of {@link MAX_SHEET_NAME_LENGTH} characters
 * (every quote doubled) and the widest cell references fit.
 */
export const MAX_RANGE_LENGTH = 256;

/** The identity of the graph whose memory a {@link SheetManager} keeps. */
export interface MemoryGraph {
  /** The graph's URL, e.g. `drive:/1abc...`; it names the spreadsheet. */
  url: string;
  /** Shown in the spreadsheet's name. */
  title?: string;
}

/** Options of {@link createSheetManager}. */
export interface SheetManagerOptions {
  drive: DriveOperationsClient;
  graph: MemoryGraph;
}

/** One memory sheet as {@link SheetManager.getSheetMetadata} lists it. */
export interface MemorySheet {
  name: string;
  /** Where the agent reads it: `/mnt/memory/<name, percent-encoded>`. */
  file_path: string;
  /** The header row. */
  columns: string[];
}

/**
 * The memory of one graph: a Google Sheets spreadsheet found by an `appProperties` key derived
 * from the graph's URL, each tab a memory sheet. The spreadsheet is created (with an intro tab)
 * the first time something needs it; reads of the listing never create it. When Drive lists more
 * than one for the graph (runs that created one each at the same moment, which is why a run asks
 * again right after creating), every run uses the oldest (smallest id when the Drive client does
 * not report `createdTime`), and none is deleted. Its id is kept for
 * the life of the manager, until Sheets answers that it is gone (`NOT_FOUND`, said in those words):
 * the next call looks it up again. Failures reject with coded `AgentError`s whose messages the
 * model can act on.
 */
export interface SheetManager {
  /** The graph's id: its URL without the `drive:/` prefix. */
  readonly graphId: string;
  /** The spreadsheet's id, creating the spreadsheet when `create` is set and there is none; else `undefined` when there is none. */
  spreadsheetId(options?: { create?: boolean; signal?: AbortSignal }): Promise<string | undefined>;
  /** Adds a tab named `name` with `columns` as its header row. */
  createSheet(name: string, columns: readonly string[], signal?: AbortSignal): Promise<void>;
  /** The values of an A1 range that names its sheet (`Scores!A1:B3`); `[]` when empty. */
  readSheet(range: string, signal?: AbortSignal): Promise<SheetValues>;
  /**
   * Overwrites the cells of a range (values parsed as if typed). A range past the tab's grid (a
   * new tab has 1000 rows and 26 columns), bounded or open-ended (`A1001:C`, `A:C`), grows the
   * grid to fit it and its values first.
   */
  updateSheet(range: string, values: SheetValues, signal?: AbortSignal): Promise<void>;
  /** Appends rows after the table in a range. */
  appendToSheet(range: string, values: SheetValues, signal?: AbortSignal): Promise<void>;
  /**
   * Deletes the tab named `name` (an exact match first, else the one whose name differs only in
   * case, as Sheets resolves names); `NOT_FOUND` when there is none.
   */
  deleteSheet(name: string, signal?: AbortSignal): Promise<void>;
  /**
   * Adds a runtime-kept tab with its header row unless it exists (also when another run adds it
   * at the same moment), and resolves with the number of rows of its grid.
   */
  ensureSystemSheet(name: string, columns: readonly string[], signal?: AbortSignal): Promise<number>;
  /** The memory sheets (not the intro, not `__` tabs) with their header rows; `[]` when there is no spreadsheet yet. */
  getSheetMetadata(signal?: AbortSignal): Promise<MemorySheet[]>;
  /** The names of the memory sheets, without reading their headers; `[]` when there is no spreadsheet yet. */
  listSheetNames(signal?: AbortSignal): Promise<string[]>;
  /** A sheet's values as JSON text, or `undefined` when there is no spreadsheet or no such sheet. */
  readSheetAsText(name: string, signal?: AbortSignal): Promise<string | undefined>;
}

/**
 * Creates the {@link SheetManager} of one graph over a Drive client.
 *
 * @example
 * ```ts
 * const memory = createSheetManager({ drive, graph: { url: 'drive:/1abc', title: 'Trip planner' } });
 * await memory.createSheet('Scores', ['player', 'score']);
 * await memory.updateSheet('Scores!A2:B2', [['Ada', '42']]);
 * ```
 */
export function createSheetManager(options: SheetManagerOptions): SheetManager {
  const { drive, graph } = options;
  if (typeof graph?.url !== 'string' || graph.url.trim().length === 0) {
    throw new AgentError('BAD_REQUEST', 'graph.url: memory keeps one spreadsheet per graph, so it needs the graph URL', { details: { field: 'graph.url' } });
  }
  const graphId = graphIdOf(graph.url);
  const fileKeyPromise = memoryFileKey(graph.url);
  let known: Promise<string | undefined> | undefined;
  let created: Promise<string> | undefined;

  const query = async (signal?: AbortSignal): Promise<DriveFile[]> => {
    const key = await fileKeyPromise;
    return drive.queryFiles(`appProperties has { key = '${escapeQuery(MEMORY_PROPERTY_KEY)}' and value = '${escapeQuery(key)}' } and trashed = false`, signal);
  };

  const find = (signal?: AbortSignal): Promise<string | undefined> => {
    if (known) return known;
    const lookUp = (async () => pickSpreadsheet(await query(signal)))();
    known = lookUp;
    // A failed look-up is not kept: the next call asks again.
    lookUp.catch(() => {
      if (known === lookUp) known = undefined;
    });
    return lookUp;
  };

  /**
   * Two runs that find no spreadsheet at the same moment create one each. Drive is asked again
   * once this run's is set up: when it lists more than one, every run takes the same one
   * ({@link pickSpreadsheet}). None is deleted: another run may have written to it already. When
   * the second look-up fails, this run keeps its own; the next run's look-up still picks the same.
   */
  const converge = async (createdId: string, signal?: AbortSignal): Promise<string> => {
    let files: DriveFile[];
    try {
      files = await query(signal);
    } catch {
      return createdId;
    }
    // Drive's search may not list a file created a moment ago.
    if (!files.some((file) => file.id === createdId)) files = [...files, { id: createdId }];
    return pickSpreadsheet(files) ?? createdId;
  };

  const setUp = async (spreadsheetId: string, signal?: AbortSignal): Promise<string> => {
    await drive.updateSpreadsheet(spreadsheetId, [{ updateSheetProperties: { properties: { sheetId: INTRO_SHEET_ID, title: INTRO_SHEET }, fields: 'title' } }], signal);
    await drive.setSpreadsheetValues(spreadsheetId, `${INTRO_SHEET}!A1`, [[INTRO_TEXT]], signal);
    return converge(spreadsheetId, signal);
  };

  const ensure = async (signal?: AbortSignal): Promise<string> => {
    const existing = await find(signal);
    if (existing) return existing;
    // Concurrent first uses create one spreadsheet, not one each.
    if (created) return created;
    const creation = (async () => {
      const key = await fileKeyPromise;
      const file = await drive.createFile(
        { name: `Memory for ${graph.title?.trim() || graphId}`, mimeType: SPREADSHEET_MIME_TYPE, appProperties: { [MEMORY_PROPERTY_KEY]: key } },
        signal,
      );
      const ready = setUp(file.id, signal);
      // It exists now: should setting it up fail, later calls use it rather than create another.
      known = ready.catch(() => file.id);
      return ready;
    })();
    created = creation;
    creation.catch(() => {
      if (created === creation) created = undefined;
    });
    return creation;
  };

  /**
   * A call on the spreadsheet. Sheets answers 404 only when the spreadsheet itself is gone (a
   * missing tab is a 400): the id is forgotten, so the next call looks it up again (and a call
   * that needs one creates a new spreadsheet), and the model is told in words it can act on.
   */
  const onSpreadsheet = async <T>(call: Promise<T>): Promise<T> => {
    try {
      return await call;
    } catch (error) {
      if (!isAgentError(error) || error.code !== 'NOT_FOUND') throw error;
      known = undefined;
      created = undefined;
      throw new AgentError('NOT_FOUND', SPREADSHEET_GONE, { cause: error, ...(error.details?.status === undefined ? {} : { details: { status: error.details.status } }) });
    }
  };

  const tabs = async (spreadsheetId: string, signal?: AbortSignal) =>
    (await onSpreadsheet(drive.getSpreadsheetMetadata(spreadsheetId, signal))).sheets.map((sheet) => sheet.properties);

  /** The tab named `name`: the exact title first, else one that differs only in case (Sheets keeps titles unique regardless of case). */
  const tabNamed = async (spreadsheetId: string, name: string, signal?: AbortSignal) => {
    const all = await tabs(spreadsheetId, signal);
    return all.find((tab) => tab.title === name) ?? all.find((tab) => tab.title.toLowerCase() === name.toLowerCase());
  };

  const memoryTabs = async (signal?: AbortSignal): Promise<string[]> => {
    const id = await find(signal);
    if (!id) return [];
    return (await tabs(id, signal)).filter((tab) => tab.sheetId !== INTRO_SHEET_ID && !isSystemSheetName(tab.title)).map((tab) => tab.title);
  };

  return {
    graphId,
    async spreadsheetId(request = {}) {
      return request.create ? ensure(request.signal) : find(request.signal);
    },
    async createSheet(name, columns, signal) {
      const id = await ensure(signal);
      // A new tab is 26 columns wide unless asked for more: wide enough for every column named.
      const properties = columns.length > DEFAULT_GRID.columns ? { title: name, gridProperties: { columnCount: columns.length } } : { title: name };
      await onSpreadsheet(drive.updateSpreadsheet(id, [{ addSheet: { properties } }], signal));
      try {
        await onSpreadsheet(drive.setSpreadsheetValues(id, `${quoteSheetName(name)}!A1`, [[...columns]], signal));
      } catch (error) {
        // A tab without its header would stay behind and make every later create of it fail as
        // existing: it goes again, as far as Drive lets it, and the header's failure is reported.
        const tab = (await tabs(id).catch(() => [])).find((candidate) => candidate.title === name);
        if (tab) await drive.updateSpreadsheet(id, [{ deleteSheet: { sheetId: tab.sheetId } }]).catch(() => undefined);
        throw error;
      }
    },
    async readSheet(range, signal) {
      const id = await ensure(signal);
      return onSpreadsheet(drive.getSpreadsheetValues(id, range, signal));
    },
    async updateSheet(range, values, signal) {
      const id = await ensure(signal);
      try {
        await onSpreadsheet(drive.setSpreadsheetValues(id, range, values, signal));
      } catch (error) {
        // Sheets refuses a write past the tab's grid: the grid grows to fit it (never shrinks), once.
        const extent = isAgentError(error) && /exceeds grid limits/i.test(error.message) ? extentOf(range, values) : undefined;
        if (!extent) throw error;
        const tab = await tabNamed(id, extent.sheet, signal);
        if (!tab) throw error;
        const rowCount = Math.max(tab.gridProperties?.rowCount ?? DEFAULT_GRID.rows, extent.rows);
        const columnCount = Math.max(tab.gridProperties?.columnCount ?? DEFAULT_GRID.columns, extent.columns);
        await onSpreadsheet(
          drive.updateSpreadsheet(
            id,
            [{ updateSheetProperties: { properties: { sheetId: tab.sheetId, gridProperties: { rowCount, columnCount } }, fields: 'gridProperties.rowCount,gridProperties.columnCount' } }],
            signal,
          ),
        );
        await onSpreadsheet(drive.setSpreadsheetValues(id, range, values, signal));
      }
    },
    async appendToSheet(range, values, signal) {
      const id = await ensure(signal);
      await onSpreadsheet(drive.appendSpreadsheetValues(id, range, values, signal));
    },
    async deleteSheet(name, signal) {
      const id = await ensure(signal);
      const tab = await tabNamed(id, name, signal);
      if (!tab) throw new AgentError('NOT_FOUND', `Sheet "${name}" not found.`, { details: { field: 'name' } });
      await onSpreadsheet(drive.updateSpreadsheet(id, [{ deleteSheet: { sheetId: tab.sheetId } }], signal));
    },
    async ensureSystemSheet(name, columns, signal) {
      const id = await ensure(signal);
      const rowsOf = (tab: { gridProperties?: { rowCount?: number } } | undefined) => tab?.gridProperties?.rowCount ?? DEFAULT_GRID.rows;
      const existing = await tabNamed(id, name, signal);
      if (existing) return rowsOf(existing);
      try {
        await onSpreadsheet(drive.updateSpreadsheet(id, [{ addSheet: { properties: { title: name } } }], signal));
      } catch (error) {
        // Another run added it between the look and the add: Sheets refuses the second add, and the tab is there.
        const added = isAgentError(error) && error.code === 'BAD_REQUEST' ? await tabNamed(id, name, signal).catch(() => undefined) : undefined;
        if (added) return rowsOf(added);
        throw error;
      }
      await onSpreadsheet(drive.setSpreadsheetValues(id, `${quoteSheetName(name)}!A1`, [[...columns]], signal));
      return DEFAULT_GRID.rows;
    },
    async getSheetMetadata(signal) {
      const id = await find(signal);
      if (!id) return [];
      const names = (await tabs(id, signal)).filter((tab) => tab.sheetId !== INTRO_SHEET_ID && !isSystemSheetName(tab.title)).map((tab) => tab.title);
      const errors: string[] = [];
      const codes = new Set<ErrorCode>();
      const sheets: MemorySheet[] = [];
      for (const name of names) {
        try {
          const [header = []] = await onSpreadsheet(drive.getSpreadsheetValues(id, `${quoteSheetName(name)}!1:1`, signal));
          sheets.push({ name, file_path: memoryFilePath(name), columns: header });
        } catch (error) {
          // A refusal of the whole spreadsheet or account (a rate limit, lost access, the spreadsheet
          // gone, a cancel) is no one tab's: it is passed on as every other memory call passes it on,
          // and no more tabs are read.
          if (isAgentError(error) && WHOLE_SPREADSHEET_FAILURES.has(error.code)) throw error;
          errors.push(`${name}: ${error instanceof Error ? error.message : String(error)}`);
          codes.add(isAgentError(error) ? error.code : 'UPSTREAM_ERROR');
        }
      }
      if (errors.length > 0) throw new AgentError(codes.size === 1 ? [...codes][0]! : 'UPSTREAM_ERROR', errors.join(', '));
      return sheets;
    },
    listSheetNames: memoryTabs,
    async readSheetAsText(name, signal) {
      const id = await find(signal);
      if (!id) return undefined;
      let values: SheetValues;
      try {
        values = await onSpreadsheet(drive.getSpreadsheetValues(id, `${quoteSheetName(name)}!A:ZZ`, signal));
      } catch (error) {
        // Sheets answers 400 "Unable to parse range" for a tab that does not exist.
        if (isAgentError(error) && error.code === 'BAD_REQUEST') return undefined;
        throw error;
      }
      return checkReadSize(JSON.stringify(values), `${quoteSheetName(name)}!A:ZZ`);
    },
  };
}

/** Failures of a header read that concern every tab alike, so a listing stops at the first. */
const WHOLE_SPREADSHEET_FAILURES: ReadonlySet<ErrorCode> = new Set(['RATE_LIMITED', 'UNAUTHENTICATED', 'FORBIDDEN', 'NOT_FOUND', 'ABORTED', 'TIMEOUT']);

/** The grid of a tab Sheets adds without being told its size. */
const DEFAULT_GRID = { rows: 1000, columns: 26 };

/**
 * The sheet a write goes to and the rows and columns it reaches: from where the range starts (and
 * where it ends, when it says) and the values' extent. An open-ended range (`A1001:C`, `A:C`,
 * `5:6`) reaches as far as its values do. `undefined` for a range it cannot read.
 */
function extentOf(range: string, values: SheetValues): { sheet: string; rows: number; columns: number } | undefined {
  const sheet = parseSheetName(range);
  if (sheet === undefined) return undefined;
  const cells = /^\$?([A-Za-z]{0,3})\$?(\d{0,7})(?::\$?([A-Za-z]{0,3})\$?(\d{0,7}))?$/.exec(range.slice(range.lastIndexOf('!') + 1));
  if (!cells) return undefined;
  const [, fromColumn = '', fromRow = '', toColumn, toRow] = cells;
  if (fromColumn === '' && fromRow === '') return undefined;
  // A single reference is a cell; with an end, a missing row or column is open (`A:C`, `2:5`).
  if (toColumn === undefined && (fromColumn === '' || fromRow === '')) return undefined;
  const endColumn = toColumn ? columnNumber(toColumn) : undefined;
  const endRow = toRow ? Number(toRow) : undefined;
  const startColumn = Math.min(fromColumn ? columnNumber(fromColumn) : 1, endColumn ?? Infinity);
  const startRow = Math.min(fromRow ? Number(fromRow) : 1, endRow ?? Infinity);
  let widest = 0;
  for (const row of values) widest = Math.max(widest, row.length);
  const rows = Math.max(startRow + Math.max(values.length, 1) - 1, endRow ?? 0);
  const columns = Math.max(startColumn + Math.max(widest, 1) - 1, endColumn ?? 0);
  return { sheet, rows, columns };
}

/** `A` → 1, `Z` → 26, `AA` → 27. */
function columnNumber(letters: string): number {
  let number = 0;
  for (const letter of letters.toUpperCase()) number = number * 26 + (letter.charCodeAt(0) - 64);
  return number;
}

/**
 * The memory spreadsheet of a graph when Drive lists several (runs that created one each at the
 * same moment): the oldest, by `createdTime` when the Drive client reports it for all of them,
 * else, and on a tie, the smallest id. Every run that sees the same files takes the same one.
 */
function pickSpreadsheet(files: readonly DriveFile[]): string | undefined {
  const createdAt = (file: DriveFile) => (typeof file.createdTime === 'string' ? Date.parse(file.createdTime) : Number.NaN);
  const byTime = files.every((file) => !Number.isNaN(createdAt(file)));
  let best: DriveFile | undefined;
  for (const file of files) {
    const order = best === undefined ? -1 : byTime ? createdAt(file) - createdAt(best) : 0;
    // Ids compared by code unit, not by locale: every process must order them alike.
    if (order < 0 || (order === 0 && best !== undefined && file.id < best.id)) best = file;
  }
  return best?.id;
}

/** The graph's id: its URL without the `drive:/` prefix (any number of slashes). */
export function graphIdOf(url: string): string {
  return url.replace(/^drive:\/*/, '');
}

/**
 * The `appProperties` value that marks a graph's memory spreadsheet: `"sheet" + id + id`, the
 * key every client of the protocol uses. Drive keeps at most 124 bytes per property, so a graph
 * id too long for that is replaced by its SHA-256 (hex) in the key.
 */
export async function memoryFileKey(graphUrl: string): Promise<string> {
  const graphId = graphIdOf(graphUrl);
  const key = `sheet${graphId}${graphId}`;
  const encoder = new TextEncoder();
  if (encoder.encode(MEMORY_PROPERTY_KEY).byteLength + encoder.encode(key).byteLength <= MAX_PROPERTY_BYTES) return key;
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', encoder.encode(graphId)));
  return `sheet-sha256-${Array.from(digest, (byte) => byte.toString(16).padStart(2, '0')).join('')}`;
}

/** The sheet an A1 range names: `'My Sheet'!A1` → `My Sheet`, `Scores!A1` → `Scores`; `undefined` without `!`. */
export function parseSheetName(range: string): string | undefined {
  const bang = range.lastIndexOf('!');
  if (bang < 0) return undefined;
  const name = range.slice(0, bang);
  if (name.length >= 2 && name.startsWith("'") && name.endsWith("'")) return name.slice(1, -1).replace(/''/g, "'");
  return name;
}

/** Whether a sheet is kept by the runtime (its name starts with `__`), not by the agent. */
export function isSystemSheetName(name: string): boolean {
  return name.startsWith('__');
}

/** A sheet name as A1 notation needs it: quoted (quotes doubled) unless it is a plain word. */
export function quoteSheetName(name: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) && !/^[A-Za-z]{1,3}\d+$/.test(name) ? name : `'${name.replace(/'/g, "''")}'`;
}

/** Where the agent reads a memory sheet: `/mnt/memory/<name, percent-encoded>`. */
export function memoryFilePath(name: string): string {
  return `${MEMORY_DIRECTORY}${encodeURIComponent(name)}`;
}

/**
 * A cell value as Sheets must keep it: text, exactly as given. Writes are parsed as if typed, so a
 * leading apostrophe (which Sheets hides and never returns) stops `=…` from becoming a formula,
 * `007` a number or `true` a boolean. An empty value stays empty: it clears the cell.
 */
export function toTextCell(value: string): string {
  return value.length === 0 ? value : `'${value}`;
}

/** What a spreadsheet would take as the start of a formula (a plain signed number aside). */
const FORMULA_START = /^[=+\-@]/;
const SIGNED_NUMBER = /^[+-](?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?$/i;

/**
 * A cell value the model wrote, as Sheets must receive it: typed as a person would type it (so
 * `42` is a number a `SUM` counts), except that a value a spreadsheet could run as a formula
 * (`=IMPORTXML(…)`, `+…`, `-…`, `@…`) goes as text behind a hidden apostrophe and is never
 * evaluated. A signed number such as `-5` stays a number.
 */
export function toEnteredCell(value: string): string {
  return FORMULA_START.test(value) && !SIGNED_NUMBER.test(value) ? `'${value}` : value;
}

/** Refuses a read too large to hand to the model, naming the range. */
export function checkReadSize(text: string, range: string): string {
  if (text.length > MAX_READ_CHARACTERS) {
    throw new AgentError(
      'PAYLOAD_TOO_LARGE',
      `The range ${range} holds ${text.length} characters, more than ${MAX_READ_CHARACTERS}; read a narrower range`,
      { details: { field: 'range' } },
    );
  }
  return text;
}

/** Drive query strings are quoted with `'`; a quote or a backslash inside is escaped with a backslash. */
function escapeQuery(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/'/g, "\\'");
}
