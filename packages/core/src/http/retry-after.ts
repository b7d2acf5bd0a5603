/**
 * How long a server asked to be left alone, in milliseconds: `retry-after-ms`, else `Retry-After`
 * in seconds or as an HTTP date (a date passed is 0). `undefined` when it said nothing readable.
 */
export function retryAfterMs(headers: Headers): number | undefined {
  const milliseconds = headers.get('retry-after-ms')?.trim();
  if (milliseconds && /^\d+(\.\d+)?$/.test(milliseconds)) return Number.parseFloat(milliseconds);
  const raw = headers.get('retry-after')?.trim();
  if (!raw) return undefined;
  if (/^\d+(\.\d+)?$/.test(raw)) return Number.parseFloat(raw) * 1000;
  const date = Date.parse(raw);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}
