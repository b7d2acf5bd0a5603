// Small checks of values that come from outside (bodies, records, model answers, paths).

/** Whether `value` is a JSON object: not `null`, not an array. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The JSON type of `value` as a message names it: `null`, `array`, or its `typeof`. */
export function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

/**
 * `text` cut to at most `max` characters (never inside a surrogate pair), marked with `...` when
 * cut: for a caller's value quoted in an error message, which ends up in a response and in logs.
 */
export function clipped(text: string, max = 80): string {
  if (text.length <= max) return text;
  const code = text.charCodeAt(max - 1);
  return `${text.slice(0, code >= 0xd800 && code <= 0xdbff ? max - 1 : max)}...`;
}

/** `text` percent-decoded, or as it is when it is not valid percent-encoding (a lone `%`). */
export function decodeSafely(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
