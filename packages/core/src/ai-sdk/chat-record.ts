import { AgentError } from '../errors/index.js';
import { encodeState } from '../interactions/index.js';
import { CHAT_RECORD_PREFIX } from '../interactions/record-id.js';
import type { InteractionStore } from '../ports/index.js';
import type { ChatAnswer } from './ui-message-chunks.js';

const CHAT_RECORD_VERSION = 1;
/** The runs a chat keeps; older ones drop out of the restored conversation. */
const MAX_RUNS = 100;
/** A user message bigger than this is kept by its texts only (files go to the run, not to the record). */
const MAX_KEPT_MESSAGE_CHARS = 256 * 1024;
const CONFLICT_ATTEMPTS = 5;

/** One run of a chat: the session it runs as, the user message that started it, the answers given to it. */
export interface ChatRun {
  sessionId: string;
  user: { id: string; parts: unknown[] };
  answers: Record<string, ChatAnswer>;
}

/** What a chat keeps besides its runs' sessions: which runs it had, in order (the last is current). */
export interface ChatRecord {
  version: typeof CHAT_RECORD_VERSION;
  runs: ChatRun[];
}

/** A chat record as read: the record, its owner, and the store version a conditional write compares. */
export interface StoredChat {
  record: ChatRecord;
  owner?: string;
  version: string;
}

/**
 * Reads the record of `chatId`. Kept in the interaction store, so every instance sharing the store
 * sees the same chats, and changed only by conditional writes. A record this runtime cannot read
 * is `STORE_ERROR`.
 */
export async function readChat(store: InteractionStore, chatId: string): Promise<StoredChat | undefined> {
  const found = await store.get(CHAT_RECORD_PREFIX + chatId);
  if (!found) return undefined;
  let meta: { owner?: unknown };
  let record: Partial<ChatRecord>;
  try {
    meta = JSON.parse(found.meta) as { owner?: unknown };
    record = JSON.parse(found.state) as Partial<ChatRecord>;
  } catch {
    throw unreadable(chatId);
  }
  if (record.version !== CHAT_RECORD_VERSION || !Array.isArray(record.runs)) throw unreadable(chatId);
  const stored: StoredChat = { record: record as ChatRecord, version: found.version };
  if (typeof meta.owner === 'string') stored.owner = meta.owner;
  return stored;
}

/**
 * Applies `change` to the chat's record (creating it, bound to `owner`) with a conditional write,
 * reading it again when another request changed it first. A chat of another owner is `FORBIDDEN`.
 */
export async function updateChat(
  store: InteractionStore,
  chatId: string,
  owner: string | undefined,
  change: (record: ChatRecord) => ChatRecord,
  known?: StoredChat,
): Promise<ChatRecord> {
  let current = known;
  for (let attempt = 0; attempt < CONFLICT_ATTEMPTS; attempt += 1) {
    if (attempt > 0 || current === undefined) current = await readChat(store, chatId);
    requireOwner(chatId, current, owner);
    const next = change(current?.record ?? { version: CHAT_RECORD_VERSION, runs: [] });
    if (next.runs.length > MAX_RUNS) next.runs = next.runs.slice(-MAX_RUNS);
    const id = CHAT_RECORD_PREFIX + chatId;
    // The owner stays the one who created the chat; the meta has the form every record has.
    const recordOwner = current === undefined ? owner : current.owner;
    const meta = JSON.stringify(recordOwner === undefined ? {} : { owner: recordOwner });
    const version = await store.set(id, { meta, state: encodeState(store, id, next) }, current?.version ?? null);
    if (version !== undefined) return next;
  }
  throw new AgentError('CONFLICT', `Chat ${chatId} is being changed by other requests; try again`);
}

/** Refuses a caller who is not the chat's owner (a chat without an owner is anyone's). */
export function requireOwner(chatId: string, chat: StoredChat | undefined, owner: string | undefined): void {
  if (chat?.owner !== undefined && chat.owner !== owner) throw new AgentError('FORBIDDEN', `Chat ${chatId} belongs to another user`);
}

/** The user message as the record keeps it: as sent, or only its texts when it is large. */
export function keptUserMessage(message: { id: string; parts: ReadonlyArray<Record<string, unknown>> }): ChatRun['user'] {
  const parts = message.parts.filter((part) => part.type === 'text' || part.type === 'file');
  if (JSON.stringify(parts).length <= MAX_KEPT_MESSAGE_CHARS) return { id: message.id, parts };
  const texts = parts
    .filter((part) => part.type === 'text')
    .map((part) => ({ type: 'text', text: String(part.text ?? '').slice(0, MAX_KEPT_MESSAGE_CHARS) }));
  return { id: message.id, parts: texts };
}

function unreadable(chatId: string): AgentError {
  return new AgentError('STORE_ERROR', `Chat ${chatId} has a saved record this runtime cannot read`);
}
