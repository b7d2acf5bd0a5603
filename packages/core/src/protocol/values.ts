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

/** `text` percent-decoded, or as it is when it is not valid percent-encoding (a lone `%`). */
export function decodeSafely(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
