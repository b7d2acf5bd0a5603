import type { LLMContent } from './content.js';
import type { SuspendEventType } from './events.js';

/** The answer to each kind of suspend event, as the client sends it in `resume.response`. */
export interface ResumeResponses {
  /** The user's answer; `{ parts: [{ text: '__skipped__' }] }` when they skipped the question. */
  waitForInput: { input: LLMContent };
  /** The ids of the chosen options (`__none_of_the_above__` for that option). */
  waitForChoice: { selected: { ids: string[] } };
  /** Whether the user allowed what the consent asked for. */
  queryConsent: { consent: boolean };
  readGraph: { graph: Record<string, unknown> };
  inspectNode: { node: Record<string, unknown> };
  applyEdits: { applied: boolean } | { success: boolean };
}

/** The answer to a suspend event of type `T`. */
export type ResumeResponseOf<T extends SuspendEventType> = ResumeResponses[T];

/**
 * The answer to any suspend event, or `{}` to continue a paused run (a run saved after a model
 * failure waits for no answer).
 */
export type ResumeResponse = ResumeResponses[SuspendEventType] | Record<string, undefined>;
