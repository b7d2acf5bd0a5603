import { deriveChatLog, type ChatLogEntry } from '../agent-fs/index.js';
import { isAgentError } from '../errors/index.js';
import type { JsonObject, LLMContent } from '../protocol/content.js';
import { MAX_CELL_TEXT_LENGTH, MAX_READ_CHARACTERS, toTextCell, type SheetManager } from './sheet-manager.js';

/** The runtime-kept tab where conversations with the user are saved. */
export const CHAT_LOG_SHEET = '__chat_log__';
/** Its columns, in order. */
export const CHAT_LOG_COLUMNS = ['timestamp', 'session_id', 'role', 'content'] as const;
const CHAT_LOG_RANGE = `${CHAT_LOG_SHEET}!A:D`;
/** The most entries of earlier sessions a run recalls: the latest ones. */
export const MAX_RECALLED_ENTRIES = 1000;
/** The most characters (of their texts together) the recalled entries hold: the latest ones that fit. */
export const MAX_RECALLED_CHARACTERS = MAX_READ_CHARACTERS;
/**
 * A log too large to read whole is read from its end, this many rows at a time and at most
 * {@link MAX_RECALL_READS} times.
 */
const RECALL_WINDOW_ROWS = 1000;
const MAX_RECALL_READS = 3;

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
   * The entries of earlier sessions (the latest ones, at most {@link MAX_RECALLED_ENTRIES} and
   * {@link MAX_RECALLED_CHARACTERS}), creating the tab when there is none. This session's own rows
   * are left out: its history already holds them. A log too large to read whole is read from its end.
   */
  recall(signal?: AbortSignal): Promise<ChatLogEntry[]>;
  /** Saves the question of a chat call that is waiting for the user; other calls are ignored. */
  recordQuestion(call: ChatCall, signal?: AbortSignal): Promise<void>;
  /**
   * Saves the user's answer to a chat call, as the model sees it (`response`), unless this
   * session's rows, as last recalled and written since, already end with that call's question and
   * this answer: a resume tried again after it saved the answer logs it once.
   */
  recordAnswer(call: ChatCall, response: JsonObject, signal?: AbortSignal): Promise<void>;
}

const CHAT_FUNCTIONS = new Set(['chat_request_user_input', 'chat_present_choices']);

/**
 * Creates the chat log of a memory run: rows `[timestamp, session_id, role, content]` in the
 * `__chat_log__` tab, role `agent` for a question and `user` for an answer. Cells are written as
 * text (an answer such as `=1+1` or `007` is kept as typed, never evaluated). Rows a person edited
 * are read leniently: too short ones and header rows are skipped, extra columns ignored, and the
 * role `agent` (or `model`) is read in any case.
 *
 * @example
 * ```ts
 * const chatLog = createChatLogSheet({ sheets, sessionId: crypto.randomUUID() });
 * const earlier = await chatLog.recall();
 * ```
 */
export function createChatLogSheet(options: ChatLogSheetOptions): ChatLogSheet {
  const { sheets, sessionId } = options;
  /** This session's latest rows in the log, newest first, as `[role, content]`: the last two the last recall read, then the rows written since. */
  let ownLatest: Array<[string, string]> = [];
  const append = async (role: 'agent' | 'user', content: string, signal?: AbortSignal): Promise<void> => {
    const timestamp = (options.now?.() ?? new Date()).toISOString();
    const text = asLogged(content);
    await sheets.appendToSheet(CHAT_LOG_RANGE, [[timestamp, sessionId, role, text].map(toTextCell)], signal);
    const written: [string, string] = [role, text];
    ownLatest = [written, ...ownLatest].slice(0, 2);
  };
  /**
   * Whether the log already ends, for this session, with this question and then this answer: a
   * resume that saved the answer here and stopped before the run saved it is tried again, and
   * each question is logged before its answer, so that pair is the answer logged once already.
   */
  const answerLogged = (question: unknown, answer: string): boolean => {
    const [last, before] = ownLatest;
    return (
      typeof question === 'string' &&
      question.length > 0 &&
      last?.[0] === 'user' &&
      last[1] === asLogged(answer) &&
      before?.[0] === 'agent' &&
      before[1] === asLogged(question)
    );
  };
  return {
    async recall(signal) {
      const rowCount = await sheets.ensureSystemSheet(CHAT_LOG_SHEET, CHAT_LOG_COLUMNS, signal);
      const recall = new Recall(sessionId);
      ownLatest = [];
      try {
        recall.addNewestFirst(await sheets.readSheet(CHAT_LOG_RANGE, signal));
      } catch (error) {
        if (!isAnswerTooLarge(error)) throw error;
        // A log grown past what one answer may carry is read from its end, a window at a time.
        for (let read = 0, end = rowCount; read < MAX_RECALL_READS && end >= 1 && !recall.full; read += 1) {
          const start = Math.max(1, end - RECALL_WINDOW_ROWS + 1);
          recall.addNewestFirst(await sheets.readSheet(`${CHAT_LOG_SHEET}!A${start}:D${end}`, signal));
          end = start - 1;
        }
      }
      ownLatest = recall.ownLatest;
      return recall.entries();
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
        if (entry.role === 'user' && !answerLogged(call.args.user_message, entry.parts[0].text)) await append('user', entry.parts[0].text, signal);
      }
    },
  };
}

/** The entries of earlier sessions a recall keeps: the latest ones, within its limits. */
class Recall {
  readonly #sessionId: string;
  /** Newest first. */
  readonly #entries: ChatLogEntry[] = [];
  #characters = 0;
  full = false;
  /** This session's latest two rows read, newest first, as `[role in lower case, content]`. */
  readonly ownLatest: Array<[string, string]> = [];

  constructor(sessionId: string) {
    this.#sessionId = sessionId;
  }

  /** Takes rows of the log from the last one back, until the recall is full. */
  addNewestFirst(rows: readonly string[][]): void {
    for (let index = rows.length - 1; index >= 0 && !this.full; index -= 1) {
      const row = rows[index] as string[];
      if (row.length >= CHAT_LOG_COLUMNS.length && row[1] === this.#sessionId && this.ownLatest.length < 2) {
        this.ownLatest.push([(row[2] as string).trim().toLowerCase(), row[3] as string]);
      }
      const entry = toEntry(row, this.#sessionId);
      if (!entry) continue;
      this.#characters += entry.parts[0].text.length;
      if (this.#entries.length === MAX_RECALLED_ENTRIES || this.#characters > MAX_RECALLED_CHARACTERS) this.full = true;
      else this.#entries.push(entry);
    }
  }

  /** Oldest first. */
  entries(): ChatLogEntry[] {
    return this.#entries.reverse();
  }
}

/** A text as its cell in the log holds it: cut to what a cell takes. */
function asLogged(content: string): string {
  return content.length > MAX_CELL_TEXT_LENGTH ? content.slice(0, MAX_CELL_TEXT_LENGTH - 1) + '…' : content;
}

/** Whether a read failed because its answer was larger than the Drive client takes (its `details.limit`). */
function isAnswerTooLarge(error: unknown): boolean {
  return isAgentError(error) && typeof error.details?.limit === 'number';
}

/** The entry a row of the log holds, or `undefined` for a row to skip (too short, a header, this session's). */
function toEntry(row: readonly string[], sessionId: string): ChatLogEntry | undefined {
  if (row.length < CHAT_LOG_COLUMNS.length) return undefined;
  const [, rowSession, role = '', content = ''] = row;
  if (CHAT_LOG_COLUMNS.every((column, index) => row[index]?.trim().toLowerCase() === column)) return undefined;
  if (rowSession === sessionId) return undefined;
  const speaker = role.trim().toLowerCase();
  return { role: speaker === 'agent' || speaker === 'model' ? 'model' : 'user', parts: [{ text: content }] };
}
