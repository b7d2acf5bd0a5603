import { z } from 'zod';
import { fromPidginString } from '../agent-fs/index.js';
import { AgentError, messageOf } from '../errors/index.js';
import {
  checkReadSize,
  isSystemSheetName,
  MAX_CELL_TEXT_LENGTH,
  MAX_CELLS_PER_WRITE,
  MAX_COLUMNS,
  MAX_RANGE_LENGTH,
  MAX_SHEET_NAME_LENGTH,
  MAX_WRITE_CHARACTERS,
  parseSheetName,
  toEnteredCell,
  type SheetManager,
} from '../memory/index.js';
import type { SheetValues } from '../ports/index.js';
import { defineFunction, type FunctionContext, type FunctionGroup } from './define-function.js';
import { commonParameters, oneOf } from './parameters.js';

const INSTRUCTION = `## Memory

When the objective contains the phrase "Use Memory", you have a memory that outlives this session: a spreadsheet that belongs to this agent, where each sheet is a table you keep. Whatever you save there is there the next time this agent runs, for this user.

- Start by calling memory_get_metadata: it lists the sheets you already have, with their columns.
- Unless the objective asks for particular sheets, keep everything in one sheet named "memory", with columns that fit what you need to remember. Create it with memory_create_sheet when it does not exist yet.
- Read with memory_read_sheet. The range always names the sheet, e.g. "memory!A1:D20" or "memory!A:D". Ask for "json" to get the values in the response, or for "file" to get them saved as a file you can pass to other functions with a <file> tag.
- Every sheet can also be read as a file: /mnt/memory/<sheet name>, e.g. <file src="/mnt/memory/memory" />.
- Write with memory_update_sheet: it overwrites the cells of a range, so read first and write to the first empty row when you add something. A value that starts with "=" is kept as text, never calculated. Cells may hold <file> tags; each is replaced by the text of that file.
- Remove a sheet you no longer need with memory_delete_sheet.
- The conversation with the user is remembered for you: /mnt/system/chat_log.json lists what was said in earlier sessions too. Do not copy it into a sheet.`;

/** The longest status line a call may show the user. */
const MAX_STATUS_LENGTH = 1000;
/** The longest task id a call may name. */
const MAX_TASK_ID_LENGTH = 200;
/** The longest name a read may give its file. */
const MAX_FILE_NAME_LENGTH = 200;
/** The folders of `/mnt/` the runtime serves itself (memory sheets, system files): a file saved there could never be read back. */
const RESERVED_FOLDERS = ['memory', 'system'];

function refuse(field: string, message: string): never {
  throw new AgentError('BAD_REQUEST', `${field}: ${message}`, { details: { field } });
}

/** Refuses a text field longer than `limit`, naming it. */
function checkLength(field: string, value: string | undefined, limit: number): void {
  if (value !== undefined && value.length > limit) refuse(field, `${value.length} characters, more than the ${limit} taken`);
}

/** The sheet a range names, refusing ranges that name none or are too long to be one. */
function sheetOf(range: string): string {
  checkLength('range', range, MAX_RANGE_LENGTH);
  const name = parseSheetName(range);
  if (!name) throw new AgentError('BAD_REQUEST', `range "${range}" must name its sheet, e.g. "Scores!A1:B3"`, { details: { field: 'range' } });
  return name;
}

/** The name a read gives its file: `undefined` (an automatic one) when none is given. */
function fileNameOf(fileName: string | undefined): string | undefined {
  if (fileName === undefined || fileName.trim().length === 0) return undefined;
  checkLength('file_name', fileName, MAX_FILE_NAME_LENGTH);
  const segments = fileName
    .replace(/^\/?(mnt\/)?/, '')
    .split(/[/\\]/)
    .filter((segment) => segment !== '' && segment !== '.' && segment !== '..');
  if (segments.length > 1 && RESERVED_FOLDERS.includes(segments[0] as string)) {
    refuse('file_name', `/mnt/${segments[0]}/ holds the runtime's own files; choose a plain name such as "scores"`);
  }
  return fileName;
}

/** Sheets whose names start with "__" belong to the runtime (the chat log): the model may read them, never change them. */
function checkWritable(name: string, field: string): void {
  if (name.length === 0 || name.length > MAX_SHEET_NAME_LENGTH) {
    throw new AgentError('BAD_REQUEST', `${field} must be a sheet name of 1 to ${MAX_SHEET_NAME_LENGTH} characters`, { details: { field } });
  }
  if (isSystemSheetName(name)) {
    throw new AgentError('BAD_REQUEST', `${field}: sheet names starting with "__" are kept by the system and cannot be changed`, { details: { field } });
  }
}

function memoryOf(context: FunctionContext): SheetManager {
  if (!context.memory) {
    throw new AgentError('BAD_REQUEST', 'Memory is not available in this run: the objective has no memory tool, or there is no Google Drive access');
  }
  return context.memory;
}

/** Checks the task id and status every memory call may carry, then marks the task in progress. */
function markTask(context: FunctionContext, task: string | undefined, status: string): void {
  checkLength('task_id', task, MAX_TASK_ID_LENGTH);
  checkLength('status_update', status, MAX_STATUS_LENGTH);
  if (task) context.taskTree.setInProgress(task, status);
}

/**
 * Cells as Sheets receives them: `<file>` tags replaced by the text of their files, and a value
 * that could run as a formula written as text (see {@link toEnteredCell}).
 */
async function resolveCells(values: string[][], context: FunctionContext): Promise<SheetValues> {
  const cells = values.reduce((sum, row) => sum + row.length, 0);
  if (cells > MAX_CELLS_PER_WRITE) {
    throw new AgentError('BAD_REQUEST', `values holds ${cells} cells, more than ${MAX_CELLS_PER_WRITE}; write in smaller ranges`, { details: { field: 'values' } });
  }
  for (const [rowIndex, row] of values.entries()) {
    if (row.length > MAX_COLUMNS) {
      throw new AgentError('BAD_REQUEST', `values[${rowIndex}] holds ${row.length} cells, more than ${MAX_COLUMNS} columns; a memory sheet is at most ${MAX_COLUMNS} columns wide`, {
        details: { field: 'values' },
      });
    }
  }
  const errors: string[] = [];
  const resolved: SheetValues = [];
  let characters = 0;
  for (const [rowIndex, row] of values.entries()) {
    const out: string[] = [];
    for (const [cellIndex, cell] of row.entries()) {
      let text = cell;
      if (cell.includes('<file')) {
        try {
          const content = await fromPidginString(cell, context.fs);
          text = content.parts.flatMap((part) => (typeof part.text === 'string' ? [part.text] : [])).join('');
        } catch (error) {
          errors.push(messageOf(error));
          continue;
        }
      }
      if (text.length > MAX_CELL_TEXT_LENGTH) {
        errors.push(`values[${rowIndex}][${cellIndex}] holds ${text.length} characters, more than a cell takes (${MAX_CELL_TEXT_LENGTH})`);
        continue;
      }
      characters += text.length;
      if (characters > MAX_WRITE_CHARACTERS) refuse('values', `more than ${MAX_WRITE_CHARACTERS} characters in one write; write in smaller ranges`);
      out.push(toEnteredCell(text));
    }
    resolved.push(out);
  }
  if (errors.length > 0) throw new AgentError('BAD_REQUEST', errors.join(', '), { details: { field: 'values' } });
  return resolved;
}

/**
 * The memory functions: sheets of a spreadsheet that belongs to the graph, created, read,
 * written, deleted and listed by the model. They work on `context.memory`, which a run has when
 * the objective carries a memory tool and a Google Drive client is present.
 */
export function createMemoryGroup(): FunctionGroup {
  const { responseError, statusUpdate, taskId } = commonParameters();
  return {
    name: 'memory',
    instruction: INSTRUCTION,
    functions: [
      defineFunction({
        name: 'memory_create_sheet',
        description: 'Creates a new sheet in memory, with the given column names as its header row.',
        strictDeclaration: true,
        parameters: z.object({
          name: z.string().describe('The name of the new sheet, e.g. "memory" or "Scores".'),
          columns: z.array(z.string()).describe('The column names, in order, written as the first row.'),
          task_id: taskId,
          status_update: statusUpdate,
        }),
        icon: 'table_chart',
        title: 'Creating a new memory sheet',
        sideEffects: true,
        async handler({ name, columns, task_id, status_update }, context) {
          markTask(context, task_id, status_update);
          checkWritable(name, 'name');
          if (columns.length === 0 || columns.length > MAX_COLUMNS) {
            throw new AgentError('BAD_REQUEST', `columns must list 1 to ${MAX_COLUMNS} column names`, { details: { field: 'columns' } });
          }
          if (columns.some((column) => column.length > MAX_CELL_TEXT_LENGTH)) {
            throw new AgentError('BAD_REQUEST', `columns: a column name is longer than ${MAX_CELL_TEXT_LENGTH} characters`, { details: { field: 'columns' } });
          }
          context.update(status_update || 'Creating a memory sheet');
          await memoryOf(context).createSheet(name, columns.map(toEnteredCell), context.signal);
          return { success: true };
        },
      }),
      defineFunction({
        name: 'memory_read_sheet',
        description: 'Reads a range of a memory sheet, as JSON in the response or saved as a file.',
        strictDeclaration: true,
        parameters: z.object({
          range: z.string().describe('An A1 range that names the sheet, e.g. "Scores!A1:C10" or "Scores!A:C".'),
          file_name: z.string().optional().describe('With "file" output: a snake_case name for the file, without extension.'),
          output_format: oneOf(['file', 'json'], 'json').describe('"json" returns the values in the response; "file" saves them as a file and returns its path.'),
          task_id: taskId,
          status_update: statusUpdate,
        }),
        response: z.object({
          file_path: z.string().optional().describe('With "file" output: the file holding {"values": [[...], ...]}.'),
          json: z.string().optional().describe('With "json" output: {"values": [[...], ...]}, one array per row.'),
          error: responseError,
        }),
        icon: 'table_chart',
        title: 'Reading memory',
        async handler({ range, file_name, output_format, task_id, status_update }, context) {
          markTask(context, task_id, status_update);
          sheetOf(range);
          const fileName = fileNameOf(file_name);
          context.update(status_update || 'Reading memory');
          const values = await memoryOf(context).readSheet(range, context.signal);
          if (values.length === 0) return { error: 'The sheet is empty' };
          const json = checkReadSize(JSON.stringify({ values }), range);
          // Kept as a file whatever the output format, so later steps can refer to it.
          const filePath = context.fs.addPart({ text: json }, fileName);
          return output_format === 'file' ? { file_path: filePath } : { json };
        },
      }),
      defineFunction({
        name: 'memory_update_sheet',
        description: 'Overwrites the cells of a range of a memory sheet. Cells may contain <file src="/mnt/name.ext" /> tags, replaced by the text of those files.',
        strictDeclaration: true,
        parameters: z.object({
          range: z.string().describe('An A1 range that names the sheet, e.g. "Scores!A2:C3".'),
          values: z.array(z.array(z.string())).describe('The rows to write, each an array of cells.'),
          task_id: taskId,
        }),
        icon: 'table_chart',
        title: 'Updating memory',
        sideEffects: true,
        async handler({ range, values, task_id }, context) {
          markTask(context, task_id, '');
          checkWritable(sheetOf(range), 'range');
          const cells = await resolveCells(values, context);
          await memoryOf(context).updateSheet(range, cells, context.signal);
          return { success: true };
        },
      }),
      defineFunction({
        name: 'memory_delete_sheet',
        description: 'Deletes a memory sheet and everything in it.',
        strictDeclaration: true,
        parameters: z.object({
          name: z.string().describe('The name of the sheet to delete.'),
          task_id: taskId,
          status_update: statusUpdate,
        }),
        icon: 'table_chart',
        title: 'Deleting a memory sheet',
        sideEffects: true,
        async handler({ name, task_id, status_update }, context) {
          markTask(context, task_id, status_update);
          checkWritable(name, 'name');
          context.update(status_update || 'Deleting a memory sheet');
          await memoryOf(context).deleteSheet(name, context.signal);
          return { success: true };
        },
      }),
      defineFunction({
        name: 'memory_get_metadata',
        description: 'Lists the memory sheets with their columns and the file path each can be read from.',
        strictDeclaration: true,
        parameters: z.object({ task_id: taskId, status_update: statusUpdate }),
        response: z.object({
          sheets: z
            .array(
              z.object({
                name: z.string().describe('The sheet name.'),
                file_path: z.string().describe('Where the sheet can be read as a file.'),
                columns: z.array(z.string()).describe('The header row.'),
              }),
            )
            .optional()
            .describe('Every memory sheet; empty when there is none yet.'),
          error: responseError,
        }),
        icon: 'table_chart',
        title: 'Reading memory metadata',
        async handler({ task_id, status_update }, context) {
          markTask(context, task_id, status_update);
          context.update(status_update || 'Reading memory metadata');
          return { sheets: (await memoryOf(context).getSheetMetadata(context.signal)).map((sheet) => ({ ...sheet, columns: [...sheet.columns] })) };
        },
      }),
    ],
  };
}
