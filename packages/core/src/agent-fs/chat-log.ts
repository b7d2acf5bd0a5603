import type { JsonObject, LLMContent } from '../protocol/content.js';
import type { AgentFileSystem } from './agent-file-system.js';

/** Where the model reads the conversation with the user. */
export const CHAT_LOG_PATH = '/mnt/system/chat_log.json';

/** One line of the chat log: who spoke (`model` asked, `user` answered) and what was said. */
export interface ChatLogEntry {
  role: 'user' | 'model';
  parts: [{ text: string }];
}

/** The functions whose calls and answers make up the conversation. */
const CHAT_FUNCTIONS = new Set(['chat_request_user_input', 'chat_present_choices']);

/** The id the client sends when the user picks the "none of the above" option. */
const NONE_OF_THE_ABOVE_ID = '__none_of_the_above__';

/**
 * The conversation with the user so far: `seed` (entries from earlier sessions, such as those kept
 * in memory) followed by what `history` shows: each question the model asked through
 * `chat_request_user_input` or `chat_present_choices`, and each answer. A free-form answer is
 * logged as the user wrote it (files as `<file>` tags); a choice as the labels of the selected
 * options, joined with `", "`. A skipped question has no answer entry.
 */
export function deriveChatLog(history: readonly LLMContent[], seed: readonly ChatLogEntry[] = []): ChatLogEntry[] {
  const entries: ChatLogEntry[] = [...seed];
  // Calls still waiting for their response, oldest first; a response takes the one with its id,
  // or the oldest of its name when the provider gave no ids.
  const waiting: Array<{ name: string; id?: string; args: JsonObject }> = [];
  for (const content of history) {
    for (const part of content.parts) {
      const call = part.functionCall;
      if (call && CHAT_FUNCTIONS.has(call.name)) {
        const args = (call.args ?? {}) as JsonObject;
        waiting.push(call.id === undefined ? { name: call.name, args } : { name: call.name, id: call.id, args });
        const question = args.user_message;
        if (typeof question === 'string' && question.length > 0) entries.push(entry('model', question));
        continue;
      }
      const response = part.functionResponse;
      if (!response || !CHAT_FUNCTIONS.has(response.name)) continue;
      const index = waiting.findIndex((candidate) =>
        response.id !== undefined && candidate.id !== undefined ? candidate.id === response.id : candidate.name === response.name,
      );
      const answeredCall = index >= 0 ? waiting.splice(index, 1)[0] : undefined;
      const answer = answerOf(response.response as JsonObject, answeredCall?.args ?? {});
      if (answer !== undefined) entries.push(entry('user', answer));
    }
  }
  return entries;
}

/**
 * Registers `/mnt/system/chat_log.json` on `fs`: a JSON array of {@link ChatLogEntry}, derived from
 * the live `history` (and the `seed` entries before it) each time the file is read.
 */
export function addChatLogFile(
  fs: AgentFileSystem,
  history: () => readonly LLMContent[],
  seed: () => readonly ChatLogEntry[] = () => [],
): void {
  fs.addSystemFile(CHAT_LOG_PATH, () => JSON.stringify(deriveChatLog(history(), seed())));
}

function entry(role: ChatLogEntry['role'], text: string): ChatLogEntry {
  return { role, parts: [{ text }] };
}

/** The user's answer in a chat function's response, or `undefined` when there is none. */
function answerOf(response: JsonObject, args: JsonObject): string | undefined {
  if (typeof response.user_input === 'string') return response.user_input;
  // The model sees `{"selected": [ids]}`; a response saved as the client sent it has `{"selected": {"ids": [...]}}`.
  const selected = response.selected as unknown;
  const ids = Array.isArray(selected) ? selected : idsOf(selected);
  if (!ids) return undefined;
  const labels = new Map<string, string>();
  if (Array.isArray(args.choices)) {
    for (const choice of args.choices as unknown[]) {
      const { id, label } = (choice ?? {}) as { id?: unknown; label?: unknown };
      if (typeof id === 'string' && typeof label === 'string') labels.set(id, label);
    }
  }
  if (typeof args.none_of_the_above_label === 'string') labels.set(NONE_OF_THE_ABOVE_ID, args.none_of_the_above_label);
  return ids.map((id) => labels.get(String(id)) ?? String(id)).join(', ');
}

function idsOf(selected: unknown): unknown[] | undefined {
  if (typeof selected !== 'object' || selected === null) return undefined;
  const ids = (selected as { ids?: unknown }).ids;
  return Array.isArray(ids) ? ids : undefined;
}
