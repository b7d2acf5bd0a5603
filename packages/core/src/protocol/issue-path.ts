/** Formats a schema issue path as `start.segments[2].type` (prefix first, indexes in brackets). */
export function formatPath(prefix: string, path: ReadonlyArray<PropertyKey>): string {
  let text = prefix;
  for (const key of path) {
    if (typeof key === 'number') text += `[${key}]`;
    else text += text.length > 0 ? `.${String(key)}` : String(key);
  }
  return text.length > 0 ? text : '(root)';
}
