import { AgentError } from '../errors/index.js';

/**
 * Where the AI SDK chat endpoint keeps a chat's record in the interaction store. No interaction id
 * starts with it, and no claim or label read takes such a record for a run.
 */
export const CHAT_RECORD_PREFIX = 'ui-chat.';

/** Whether `id` names a chat's record rather than a run. */
export function isChatRecordId(id: unknown): boolean {
  return typeof id === 'string' && id.startsWith(CHAT_RECORD_PREFIX);
}

/** The longest interaction or session id a store should keep. */
export const MAX_RECORD_ID_LENGTH = 512;

/**
 * Refuses, with `BAD_REQUEST`, an interaction or session id that no store should hold: empty,
 * longer than {@link MAX_RECORD_ID_LENGTH} characters, or with control characters (PostgreSQL's
 * `text` cannot even hold a NUL). The message shows at most 80 characters of the id. For stores
 * that key records by the id as it is given, so every store refuses the same ids the same way.
 *
 * @example
 * ```ts
 * checkRecordId('Interaction', id); // before any read or write of the record
 * ```
 */
export function checkRecordId(kind: 'Interaction' | 'Session', id: string): void {
  if (typeof id !== 'string' || id.length === 0 || id.length > MAX_RECORD_ID_LENGTH || /[\u0000-\u001f\u007f]/.test(id)) {
    const shown = typeof id === 'string' ? JSON.stringify(id.slice(0, 80)) : typeof id;
    throw new AgentError('BAD_REQUEST', `${kind} id ${shown} must be 1 to ${MAX_RECORD_ID_LENGTH} characters without control characters`);
  }
}
