/** Fields of one server-sent event besides its data. */
export interface SseEventOptions {
  /** `id:` line: the client reports it back as `Last-Event-ID` on reconnect. */
  id?: string;
  /** `event:` line: the event's name (absent means `message`). */
  event?: string;
}

/**
 * Encodes one server-sent event. Objects are serialised as one line of JSON; a string with line
 * breaks becomes several `data:` lines, which the client joins back with `\n`.
 *
 * @example
 * ```ts
 * encodeSseEvent({ thought: { text: 'hi' } }); // 'data: {"thought":{"text":"hi"}}\n\n'
 * ```
 */
export function encodeSseEvent(data: string | object, options: SseEventOptions = {}): string {
  let frame = '';
  if (options.event !== undefined) frame += `event: ${singleLine(options.event, 'event')}\n`;
  if (options.id !== undefined) frame += `id: ${singleLine(options.id, 'id')}\n`;
  // JSON text never holds a raw line break (JSON.stringify escapes them): one data line.
  if (typeof data !== 'string') return `${frame}data: ${JSON.stringify(data)}\n\n`;
  const text = data;
  if (text.includes('\n') || text.includes('\r')) {
    for (const line of text.split(/\r\n|\r|\n/)) frame += `data: ${line}\n`;
  } else {
    frame += `data: ${text}\n`;
  }
  return `${frame}\n`;
}

/** Encodes a comment line, which clients ignore: used as a keep-alive. */
export function encodeSseComment(text = ''): string {
  return `: ${text.replace(/\r\n|\r|\n/g, ' ')}\n\n`;
}

function singleLine(value: string, field: string): string {
  if (/[\r\n]/.test(value)) throw new TypeError(`SSE ${field} must not contain line breaks`);
  return value;
}
