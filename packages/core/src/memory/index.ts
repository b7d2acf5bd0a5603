/**
 * Memory: one Google Sheets spreadsheet per graph (the sheets the agent keeps, read as
 * `/mnt/memory/<sheet>`), and the chat log kept in it across sessions.
 */
export {
  checkReadSize,
  createSheetManager,
  graphIdOf,
  isSystemSheetName,
  MAX_CELL_LENGTH,
  MAX_CELL_TEXT_LENGTH,
  MAX_CELLS_PER_WRITE,
  MAX_COLUMNS,
  MAX_RANGE_LENGTH,
  MAX_READ_CHARACTERS,
  MAX_SHEET_NAME_LENGTH,
  MAX_WRITE_CHARACTERS,
  MEMORY_DIRECTORY,
  MEMORY_PROPERTY_KEY,
  memoryFileKey,
  memoryFilePath,
  parseSheetName,
  quoteSheetName,
  toEnteredCell,
  toTextCell,
  type MemoryGraph,
  type MemorySheet,
  type SheetManager,
  type SheetManagerOptions,
} from './sheet-manager.js';
export {
  CHAT_LOG_COLUMNS,
  CHAT_LOG_SHEET,
  createChatLogSheet,
  MAX_RECALLED_CHARACTERS,
  MAX_RECALLED_ENTRIES,
  type ChatCall,
  type ChatLogSheet,
  type ChatLogSheetOptions,
} from './chat-log-sheet.js';
