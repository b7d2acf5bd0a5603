import { deriveChatLog, type ChatLogEntry } from '../agent-fs/index.js';
import type { JsonObject, LLMContent } from '../protocol/content.js';
import { MAX_CELL_LENGTH, type SheetManager } from './sheet-manager.js';

/** The runtime-kept tab where conversations with the user are saved. */
export const CHAT_LOG_SHEET = '__chat_log__';
/** Its columns, in order. */
export const CHAT_LOG_COLUMNS = ['timestamp', 'session_id', 'role', 'content'] as const;
const CHAT_LOG_RANGE = `${CHAT_LOG_SHEET}!A:D`;
/** The most entries of earlier sessions a run recalls: the latest ones. */
export const MAX_RECALLED_ENTRIES = 1000;

/** One call of a chat function, as a run saved it. */
export interface ChatCall {
  name: string;
  args: JsonObject;
}

/** Options of {@link createChatLogSheet}. */
export interface ChatLogSheetOptions {
  sheets: SheetManager;
  /** The run's session: the rows it writes carry it, and it recalls only the rows of other sessions. */
  sessionId: string;
  /** Clock for the rows' timestamps. */
  now?: () => Date;
}

/** The conversation with the user, kept in the memory spreadsheet across sessions. */
export interface ChatLogSheet {
  /**
   * The entries of earlier sessions (the latest {@link MAX_RECALLED_ENTRIES}), creating the tab
   * when there is none. This session's own rows are left out: its history already holds them.
   */
  recall(signal?: AbortSignal): Promise<ChatLogEntry[]>;
  /** Saves the question of a chat call that is waiting for the user; other calls are ignored. */
  recordQuestion(call: ChatCall, signal?: AbortSignal): Promise<void>;
  /** Saves the user's answer to a chat call, as the model sees it (`response`). */
  recordAnswer(call: ChatCall, response: JsonObject, signal?: AbortSignal): Promise<void>;
}

const CHAT_FUNCTIONS = new Set(['chat_request_user_input', 'chat_present_choices']);

/**
 * Creates the chat log of a memory run: rows `[timestamp, session_id, role, content]` in the
 * `__chat_log__` tab, role `agent` for a question and `user` for an answer. Cells are written as
 * text (an answer such as `=1+1` or `007` is kept as typed, never evaluated).
 *
 * @example
 * ```ts
 * const chatLog = createChatLogSheet({ sheets, sessionId: crypto.randomUUID() });
 * const earlier = await chatLog.recall();
 * ```
 */
export function createChatLogSheet(options: ChatLogSheetOptions): ChatLogSheet {
  const { sheets, sessionId } = options;
  const append = async (role: 'agent' | 'user', content: string, signal?: AbortSignal): Promise<void> => {
    const timestamp = (options.now?.() ?? new Date()).toISOString();
    const row = [timestamp, sessionId, role, content.length > MAX_CELL_LENGTH - 1 ? content.slice(0, MAX_CELL_LENGTH - 2) + '…' : content];
    await sheets.appendToSheet(CHAT_LOG_RANGE, [row.map(asText)], signal);
  };
  return {
    async recall(signal) {
      await sheets.ensureSystemSheet(CHAT_LOG_SHEET, CHAT_LOG_COLUMNS, signal);
      const rows = await sheets.readSheet(CHAT_LOG_RANGE, signal);
      const entries: ChatLogEntry[] = [];
      for (const [index, row] of rows.entries()) {
        if (index === 0 || row.length < 4) continue;
        const [, rowSession, role, content] = row as [string, string, string, string];
        if (rowSession === sessionId) continue;
        entries.push({ role: role === 'agent' ? 'model' : 'user', parts: [{ text: content }] });
      }
      return entries.slice(-MAX_RECALLED_ENTRIES);
    },
    async recordQuestion(call, signal) {
      if (!CHAT_FUNCTIONS.has(call.name)) return;
      const question = call.args.user_message;
      if (typeof question === 'string' && question.length > 0) await append('agent', question, signal);
    },
    async recordAnswer(call, response, signal) {
      if (!CHAT_FUNCTIONS.has(call.name)) return;
      // The same reading of an answer as the chat log file's: free text as written, choices as their labels.
      const history: LLMContent[] = [
        { role: 'model', parts: [{ functionCall: { name: call.name, args: { ...call.args, user_message: '' } } }] },
        { role: 'user', parts: [{ functionResponse: { name: call.name, response } }] },
      ];
      for (const entry of deriveChatLog(history)) {
        if (entry.role === 'user') await append('user', entry.parts[0].text, signal);
      }
    },
  };
}

/** A leading apostrophe makes Sheets keep the value as typed text; it is not shown or read back. */
function asText(value: string): string {
  return `'${value}`;
}
