import { z } from 'zod';
import { lazy } from '../protocol/lazy.js';

/**
 * A string the model must pick from `values` (declared as an `enum`). A call that leaves it out or
 * sends something else still runs with `fallback`, as the built-in handlers always have; with
 * `whenMissing`, a call that leaves it out runs with that instead. With `declaredDefault` the
 * declaration also shows `fallback` as the default.
 *
 * Meant for definitions with `strictDeclaration: true`: the declaration describes the parsed value.
 */
export function oneOf<const T extends readonly [string, ...string[]]>(
  values: T,
  fallback: T[number],
  options: { declaredDefault?: boolean; whenMissing?: T[number] } = {},
) {
  const known: readonly unknown[] = values;
  const whenMissing = options.whenMissing ?? fallback;
  const coerce = (value: unknown): unknown => (value === undefined ? whenMissing : known.includes(value) ? value : fallback);
  const inner = z.enum(values);
  return options.declaredDefault ? z.preprocess(coerce, inner.default(fallback)) : z.preprocess(coerce, inner);
}

/** The longest status line shown for a call (500 characters); a longer one is cut. */
const MAX_STATUS_LENGTH = 500;

/**
 * The most characters of text a built-in function hands back to the model in one result (512 Ki,
 * some 130k tokens: a whole chat log of 1000 entries fits). A result stays in every later request of
 * the run, so a longer one would crowd out everything else, or make the next request fail.
 */
export const MAX_RESULT_TEXT_LENGTH = 512 * 1024;

/**
 * `text`, or its first {@link MAX_RESULT_TEXT_LENGTH} characters followed by a line saying how much
 * was left out and `hint` (where the rest is).
 */
export function boundResultText(text: string, hint: string): string {
  if (text.length <= MAX_RESULT_TEXT_LENGTH) return text;
  return `${text.slice(0, MAX_RESULT_TEXT_LENGTH)}\n[… cut: ${text.length - MAX_RESULT_TEXT_LENGTH} more characters of ${text.length}. ${hint}]`;
}

const STATUS_DESCRIPTION = 'A short status for the user while this runs, e.g. "Drafting the memo".';

function cutStatus(value: unknown): unknown {
  return typeof value === 'string' && value.length > MAX_STATUS_LENGTH ? `${value.slice(0, MAX_STATUS_LENGTH)}…` : value;
}

/**
 * The parameters and response fields many built-in functions share, built once on first use (by the
 * first built-in group created) rather than when core is imported.
 */
export const commonParameters = lazy(() => ({
  /** The status line the model sends with a call: declared required, `''` when a call leaves it out. */
  statusUpdate: z.string().prefault('').describe(STATUS_DESCRIPTION),
  /**
   * {@link statusUpdate}, cut to 500 characters rather than refused when longer: it is shown in the
   * client and kept in the event log, and a call that does work should not fail for its status.
   */
  cutStatusUpdate: z.preprocess(cutStatus, z.string().prefault('')).describe(STATUS_DESCRIPTION),
  /** The `task_id` the model may send to tie a call to a task of its task tree. */
  taskId: z.string().optional().describe('The task-tree task this call works on; it is marked in progress.'),
  /** The name of a file a call produces. */
  fileName: z.string().optional().describe('A snake_case name for the output file, without extension.'),
  /** The `error` every response may carry. */
  responseError: z.string().optional().describe('What went wrong, when the call failed.'),
}));
