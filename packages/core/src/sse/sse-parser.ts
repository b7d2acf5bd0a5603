/** One dispatched server-sent event. */
export interface SseEvent {
  data: string;
  /** The `event:` field, when the stream set one. */
  event?: string;
  /** The last `id:` seen, when the stream set one. */
  id?: string;
  /** A `retry:` value (milliseconds) carried by this event's block. */
  retry?: number;
}

/** An incremental parser: push bytes as they arrive, call `end()` when the stream ends. */
export interface SseParser {
  push(bytes: Uint8Array): void;
  end(): void;
}

/**
 * Creates an incremental SSE parser (WHATWG event-stream rules) that calls `onEvent` for each
 * event. Chunks may split anywhere, even inside a UTF-8 sequence or between `\r` and `\n`; a last
 * event not followed by a blank line is still dispatched by `end()`.
 */
export function createSseParser(onEvent: (event: SseEvent) => void): SseParser {
  const decoder = new TextDecoder();
  let buffer = '';
  let skipLeadingNewline = false;
  let data: string[] = [];
  let eventName: string | undefined;
  let lastId: string | undefined;
  let retry: number | undefined;
  let sawField = false;

  const dispatch = (): void => {
    if (data.length > 0) {
      const event: SseEvent = { data: data.join('\n') };
      if (eventName !== undefined) event.event = eventName;
      if (lastId !== undefined) event.id = lastId;
      if (retry !== undefined) event.retry = retry;
      onEvent(event);
    }
    data = [];
    eventName = undefined;
    retry = undefined;
    sawField = false;
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
        data.push(value);
        break;
      case 'event':
        eventName = value;
        break;
      case 'id':
        if (!value.includes('\0')) lastId = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) retry = Number(value);
        break;
      default:
        break;
    }
  };

  const consume = (text: string): void => {
    buffer += text;
    let start = 0;
    if (skipLeadingNewline && buffer.length > 0) {
      if (buffer.charCodeAt(0) === 10) start = 1;
      skipLeadingNewline = false;
    }
    for (;;) {
      let index = start;
      const length = buffer.length;
      while (index < length) {
        const code = buffer.charCodeAt(index);
        if (code === 10 || code === 13) break;
        index += 1;
      }
      if (index >= length) break;
      line(buffer.slice(start, index));
      if (buffer.charCodeAt(index) === 13) {
        if (index + 1 < length) start = buffer.charCodeAt(index + 1) === 10 ? index + 2 : index + 1;
        else {
          // A `\r` at the end of a chunk: its `\n` may arrive in the next one.
          start = index + 1;
          skipLeadingNewline = true;
        }
      } else {
        start = index + 1;
      }
    }
    buffer = start === 0 ? buffer : buffer.slice(start);
  };

  return {
    push(bytes) {
      consume(decoder.decode(bytes, { stream: true }));
    },
    end() {
      consume(decoder.decode());
      if (buffer.length > 0) {
        line(buffer);
        buffer = '';
      }
      if (sawField) dispatch();
    },
  };
}

/**
 * Parses a byte stream of server-sent events.
 *
 * @example
 * ```ts
 * for await (const event of parseSseStream(response.body!)) console.log(JSON.parse(event.data));
 * ```
 */
export async function* parseSseStream(
  stream: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>,
): AsyncGenerator<SseEvent> {
  const queue: SseEvent[] = [];
  const parser = createSseParser((event) => queue.push(event));
  const iterable: AsyncIterable<Uint8Array> =
    Symbol.asyncIterator in stream ? (stream as AsyncIterable<Uint8Array>) : readerIterable(stream as ReadableStream<Uint8Array>);
  for await (const bytes of iterable) {
    parser.push(bytes);
    while (queue.length > 0) yield queue.shift() as SseEvent;
  }
  parser.end();
  while (queue.length > 0) yield queue.shift() as SseEvent;
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
