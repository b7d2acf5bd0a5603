import { fieldsJson } from './fixed-json.js';

/** What is kept of one content: the value made of it, and the `parts` and index it was made from. */
interface KeptContent<T> {
  parts: unknown;
  partCount: number;
  index: number;
  value: T;
}

/**
 * Keeps what `make` gives for each content of a history that only grows, so work done on every
 * request (serialising a body, translating it for a provider) is done once per content. A
 * content counts as final once it has been made (the loop only appends whole contents); one
 * whose `parts` array was replaced or grew, or that moved to another index, is made again.
 * `make` may refuse a content by throwing.
 */
export function createContentCache<T>(make: (content: unknown, index: number) => T): (content: unknown, index: number) => T {
  const kept = new WeakMap<object, KeptContent<T>>();
  return (content, index) => {
    if (typeof content !== 'object' || content === null) return make(content, index);
    const parts = (content as { parts?: unknown }).parts;
    const partCount = Array.isArray(parts) ? parts.length : -1;
    const known = kept.get(content);
    if (known && known.parts === parts && known.partCount === partCount && known.index === index) return known.value;
    const value = make(content, index);
    kept.set(content, { parts, partCount, index, value });
    return value;
  };
}

/**
 * The JSON of an object whose `contents` come as text from `contentJson` (a
 * {@link createContentCache} of texts), its other fields serialised whole by `restJson` (by
 * default fixed ones from their kept text, see {@link fieldsJson}): `contents` goes first.
 */
export function jsonWithContents(
  contents: readonly unknown[],
  rest: object,
  contentJson: (content: unknown, index: number) => string,
  restJson: (rest: object) => string = fieldsJson,
): string {
  let text = '{"contents":[';
  for (let index = 0; index < contents.length; index += 1) {
    if (index > 0) text += ',';
    text += contentJson(contents[index], index);
  }
  text += ']';
  const others = restJson(rest);
  return others === '{}' ? `${text}}` : `${text},${others.slice(1)}`;
}
