import { AgentError } from '../errors/index.js';

/** One dispatched server-sent event. */
export interface SseEvent {
  data: string;
  /** The `event:` field, when the stream set one. */
  event?: string;
  /** The last `id:` seen, when the stream set one. */
  id?: string;
  /**
   * A `retry:` value (milliseconds) read since the event before: in this event's block, or in a
   * block without data before it (WHATWG sets the reconnection time whether or not a block is an
   * event, so a server may send `retry:` on its own).
   */
  retry?: number;
}

/** An incremental parser: push bytes as they arrive, call `end()` when the stream ends. */
export interface SseParser {
  push(bytes: Uint8Array): void;
  end(): void;
}

/** Options of {@link createSseParser}. */
export interface SseParserOptions {
  /**
   * Longest line, in characters, and longest `data` of one event; more fails the stream with a
   * `PAYLOAD_TOO_LARGE` error instead of growing without bound. Default 256 Mi characters.
   */
  maxLineLength?: number;
  /**
   * Called with each line the parser ignores because its field is not an SSE field (`{`,
   * `  "error": {`): the text a server wrote outside the event framing, such as an error object
   * sent bare in the body. Lines of known fields and comments are not reported.
   */
  onIgnoredLine?: (line: string) => void;
  /**
   * Whether an event whose block has no `id:` line gets the last id seen (WHATWG's last event
   * ID). Default true; false leaves `id` off such events, so a repeated id can be told from none.
   */
  carryId?: boolean;
  /**
   * Whether `end()` drops an event not closed by a blank line, as WHATWG says, instead of
   * dispatching it. Default false: a last event without its blank line is still delivered. A
   * reader that can ask again for what it missed sets it, so a stream cut mid-event is not a
   * truncated event.
   */
  discardIncompleteEvent?: boolean;
}

const DEFAULT_MAX_LINE_LENGTH = 256 * 1024 * 1024;

/**
 * Creates an incremental SSE parser (WHATWG event-stream rules) that calls `onEvent` for each
 * event. Chunks may split anywhere, even inside a UTF-8 sequence or between `\r` and `\n`; a last
 * event not followed by a blank line is still dispatched by `end()`. Each character is scanned
 * once, so a line that arrives in many chunks costs time in proportion to its length.
 *
 * @example
 * ```ts
 * const parser = createSseParser((event) => console.log(event.data));
 * parser.push(new TextEncoder().encode('data: hi\n\n'));
 * parser.end();
 * ```
 */
export function createSseParser(onEvent: (event: SseEvent) => void, options: SseParserOptions = {}): SseParser {
  const maxLineLength = options.maxLineLength ?? DEFAULT_MAX_LINE_LENGTH;
  const onIgnoredLine = options.onIgnoredLine;
  const carryId = options.carryId ?? true;
  const discardIncompleteEvent = options.discardIncompleteEvent ?? false;
  const decoder = new TextDecoder();
  // The start of a line not yet ended, kept as pieces and joined once when its end arrives.
  let pending: string[] = [];
  let pendingLength = 0;
  let skipLeadingNewline = false;
  let data: string[] = [];
  let dataLength = 0;
  let eventName: string | undefined;
  let lastId: string | undefined;
  let blockHasId = false;
  let retry: number | undefined;
  let sawField = false;

  const tooLong = (what: string): AgentError =>
    new AgentError('PAYLOAD_TOO_LARGE', `SSE ${what} exceeds the limit of ${maxLineLength} characters`, {
      details: { limit: maxLineLength },
    });

  const dispatch = (): void => {
    if (data.length > 0) {
      const event: SseEvent = { data: data.length === 1 ? (data[0] as string) : data.join('\n') };
      if (eventName !== undefined) event.event = eventName;
      if (lastId !== undefined && (carryId || blockHasId)) event.id = lastId;
      if (retry !== undefined) event.retry = retry;
      retry = undefined;
      onEvent(event);
    }
    data = [];
    dataLength = 0;
    eventName = undefined;
    sawField = false;
    blockHasId = false;
  };

  const line = (text: string): void => {
    if (text.length === 0) {
      if (sawField) dispatch();
      return;
    }
    if (text.charCodeAt(0) === 58 /* ':' */) return;
    const colon = text.indexOf(':');
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? '' : text.slice(colon + 1);
    if (value.charCodeAt(0) === 32 /* ' ' */) value = value.slice(1);
    sawField = true;
    switch (field) {
      case 'data':
        dataLength += value.length + 1;
        if (dataLength > maxLineLength) throw tooLong('event data');
        data.push(value);
        break;
      case 'event':
        eventName = value;
        break;
      case 'id':
        if (!value.includes('\0')) {
          lastId = value;
          blockHasId = true;
        }
        break;
      case 'retry':
        if (/^\d+$/.test(value)) retry = Number(value);
        break;
      default:
        onIgnoredLine?.(text);
        break;
    }
  };

  /** The line ending at `end` of `text`, with whatever of it arrived in earlier chunks. */
  const completeLine = (text: string, start: number, end: number): string => {
    if (pending.length === 0) return text.slice(start, end);
    pending.push(text.slice(start, end));
    const whole = pending.join('');
    pending = [];
    pendingLength = 0;
    return whole;
  };

  const consume = (text: string): void => {
    const length = text.length;
    let start = 0;
    if (skipLeadingNewline && length > 0) {
      if (text.charCodeAt(0) === 10) start = 1;
      skipLeadingNewline = false;
    }
    // Native searches for the next LF and CR, each repeated only once the scan has passed it.
    let index = start;
    let lf = -2;
    let cr = -2;
    while (index < length) {
      if (lf !== -1 && lf < index) lf = text.indexOf('\n', index);
      if (cr !== -1 && cr < index) cr = text.indexOf('\r', index);
      const end = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr);
      if (end === -1) break;
      line(completeLine(text, start, end));
      if (end === cr) {
        if (end + 1 < length) {
          index = text.charCodeAt(end + 1) === 10 ? end + 2 : end + 1;
        } else {
          // A `\r` at the end of a chunk: its `\n` may arrive in the next one.
          index = end + 1;
          skipLeadingNewline = true;
        }
      } else {
        index = end + 1;
      }
      start = index;
    }
    if (start < length) {
      pendingLength += length - start;
      if (pendingLength > maxLineLength) throw tooLong('line');
      pending.push(start === 0 ? text : text.slice(start));
    }
  };

  return {
    push(bytes) {
      consume(decoder.decode(bytes, { stream: true }));
    },
    end() {
      consume(decoder.decode());
      if (discardIncompleteEvent) return;
      if (pending.length > 0) line(completeLine('', 0, 0));
      if (sawField) dispatch();
    },
  };
}

/**
 * Parses a byte stream of server-sent events, with the options of {@link createSseParser}.
 *
 * @example
 * ```ts
 * for await (const event of parseSseStream(response.body!)) console.log(JSON.parse(event.data));
 * ```
 */
export async function* parseSseStream(
  stream: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>,
  options: SseParserOptions = {},
): AsyncGenerator<SseEvent> {
  let queue: SseEvent[] = [];
  const parser = createSseParser((event) => queue.push(event), options);
  const iterable: AsyncIterable<Uint8Array> =
    Symbol.asyncIterator in stream ? (stream as AsyncIterable<Uint8Array>) : readerIterable(stream as ReadableStream<Uint8Array>);
  // The events of a chunk are handed over as a batch: taking them one by one off the front of the
  // array (`shift()`) costs time in proportion to what is left once it is large, so a chunk holding
  // a few hundred thousand small events would take minutes.
  for await (const bytes of iterable) {
    parser.push(bytes);
    if (queue.length === 0) continue;
    const batch = queue;
    queue = [];
    for (const event of batch) yield event;
  }
  parser.end();
  yield* queue;
}

async function* readerIterable(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}
