import { fieldsJson } from './fixed-json.js';

/** What is kept of one content: its text, and the `parts` it was taken from. */
interface KeptContent {
  parts: unknown;
  partCount: number;
  json: string;
}

/**
 * Keeps the JSON text of the contents of a history that only grows, so a body or a saved state
 * written again every turn serialises each content once. A content counts as final once it has
 * been written (the loop only appends whole contents); one whose `parts` array was replaced or
 * grew is written again. `write` turns one content into its text, and may refuse it by throwing.
 */
export function createContentJsonCache(write: (content: unknown, index: number) => string): (content: unknown, index: number) => string {
  const kept = new WeakMap<object, KeptContent>();
  return (content, index) => {
    if (typeof content !== 'object' || content === null) return write(content, index);
    const parts = (content as { parts?: unknown }).parts;
    const partCount = Array.isArray(parts) ? parts.length : -1;
    const known = kept.get(content);
    if (known && known.parts === parts && known.partCount === partCount) return known.json;
    const json = write(content, index);
    kept.set(content, { parts, partCount, json });
    return json;
  };
}

/**
 * The JSON of an object whose `contents` come as text from `contentJson` (a
 * {@link createContentJsonCache}), its other fields serialised whole (fixed ones from their kept
 * text, see {@link fieldsJson}): `contents` goes first.
 */
export function jsonWithContents(
  contents: readonly unknown[],
  rest: object,
  contentJson: (content: unknown, index: number) => string,
): string {
  let text = '{"contents":[';
  for (let index = 0; index < contents.length; index += 1) {
    if (index > 0) text += ',';
    text += contentJson(contents[index], index);
  }
  text += ']';
  const others = fieldsJson(rest);
  return others === '{}' ? `${text}}` : `${text},${others.slice(1)}`;
}
