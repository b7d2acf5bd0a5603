import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { encodeSseComment, encodeSseEvent } from './sse-encoder.js';
import { createSseParser, parseSseStream, type SseEvent } from './sse-parser.js';

const fixtures = new URL('../../../../fixtures/gemini/', import.meta.url);
const encoder = new TextEncoder();

function parseChunks(chunks: Uint8Array[]): SseEvent[] {
  const events: SseEvent[] = [];
  const parser = createSseParser((event) => events.push(event));
  for (const chunk of chunks) parser.push(chunk);
  parser.end();
  return events;
}

function bytesOf(text: string): AsyncIterable<Uint8Array> {
  return {
    async *[Symbol.asyncIterator]() {
      yield encoder.encode(text);
    },
  };
}

function splitAt(bytes: Uint8Array, offset: number): Uint8Array[] {
  return [bytes.subarray(0, offset), bytes.subarray(offset)];
}

function everyOffsetAgrees(bytes: Uint8Array): SseEvent[] {
  const whole = parseChunks([bytes]);
  for (let offset = 0; offset <= bytes.length; offset += 1) {
    expect(parseChunks(splitAt(bytes, offset)), `split at byte ${offset}`).toEqual(whole);
  }
  const single = Array.from({ length: bytes.length }, (_, index) => bytes.subarray(index, index + 1));
  expect(parseChunks(single), 'one byte per chunk').toEqual(whole);
  return whole;
}

describe('SSE parser', () => {
  it('gives the same events for a stream split at every byte offset, inside UTF-8 sequences too', () => {
    const text = 'data: {"text":"héllo wörld 😀 ✓"}\r\n\r\n: keep-alive\n\nevent: note\nid: 7\ndata: a\ndata: b\n\ndata: last';
    const events = everyOffsetAgrees(encoder.encode(text));
    expect(events).toEqual([
      { data: '{"text":"héllo wörld 😀 ✓"}' },
      { data: 'a\nb', event: 'note', id: '7' },
      { data: 'last', id: '7' },
    ]);
  });

  it('accepts LF, CRLF and bare CR line endings alike', () => {
    for (const newline of ['\n', '\r\n', '\r']) {
      const text = ['data: one', '', 'data: two', 'data: three', '', ''].join(newline);
      expect(everyOffsetAgrees(encoder.encode(text))).toEqual([{ data: 'one' }, { data: 'two\nthree' }]);
    }
  });

  it('reads retry, ignores comments and unknown fields, and keeps a value without a space', () => {
    const events = parseChunks([encoder.encode(': hello\nretry: 1500\nfoo: bar\ndata:tight\n\nretry: soon\ndata\n\n')]);
    expect(events).toEqual([{ data: 'tight', retry: 1500 }, { data: '' }]);
  });

  it('hands a retry sent in a block of its own to the next event', () => {
    const events = parseChunks([encoder.encode('retry: 3000\n\nevent: start\ndata: a\n\ndata: b\n\nretry: 10\n\nretry: 20\n\ndata: c\n\n')]);
    expect(events).toEqual([{ data: 'a', event: 'start', retry: 3000 }, { data: 'b' }, { data: 'c', retry: 20 }]);
  });

  it('dispatches a final event that has no trailing blank line', () => {
    expect(parseChunks([encoder.encode('data: {"a":1}')])).toEqual([{ data: '{"a":1}' }]);
  });

  it('round-trips what the encoder writes', () => {
    const text =
      encodeSseEvent({ thought: { text: 'line one\nline two' } }) +
      encodeSseComment('keep-alive') +
      encodeSseEvent('multi\nline', { id: '3', event: 'message' });
    const events = everyOffsetAgrees(encoder.encode(text));
    expect(events).toEqual([
      { data: '{"thought":{"text":"line one\\nline two"}}' },
      { data: 'multi\nline', id: '3', event: 'message' },
    ]);
    expect(JSON.parse(events[0]?.data ?? '')).toEqual({ thought: { text: 'line one\nline two' } });
  });

  it('encodes one event as a single data line of JSON followed by a blank line', () => {
    expect(encodeSseEvent({ finish: {} })).toBe('data: {"finish":{}}\n\n');
    expect(() => encodeSseEvent('x', { id: 'a\nb' })).toThrow(/id/);
  });

  it('parses a ReadableStream', async () => {
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(encoder.encode('data: 1\n'));
        controller.enqueue(encoder.encode('\ndata: 2\n\n'));
        controller.close();
      },
    });
    const events: SseEvent[] = [];
    for await (const event of parseSseStream(stream)) events.push(event);
    expect(events.map((event) => event.data)).toEqual(['1', '2']);
  });

  it('parses a 64 MiB line that arrives in 64 KiB chunks, each character scanned once', () => {
    // A parser that rescanned its buffer on every chunk would need about 2^35 character visits
    // here and not finish; this one visits each of the 2^26 characters once.
    const size = 64 * 1024 * 1024;
    const bytes = encoder.encode(`data: ${'x'.repeat(size)}\r\n\r\ndata: after\n\n`);
    const lengths: number[] = [];
    const parser = createSseParser((event) => lengths.push(event.data.length));
    for (let offset = 0; offset < bytes.length; offset += 65_536) parser.push(bytes.subarray(offset, offset + 65_536));
    parser.end();
    expect(lengths).toEqual([size, 5]);
  });

  it('refuses a line or an event longer than its limit with PAYLOAD_TOO_LARGE', () => {
    const parser = createSseParser(() => undefined, { maxLineLength: 1000 });
    parser.push(encoder.encode(`data: ${'x'.repeat(600)}`));
    expect(() => parser.push(encoder.encode('y'.repeat(600)))).toThrow(
      expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE', message: 'SSE line exceeds the limit of 1000 characters' }),
    );
    const events: SseEvent[] = [];
    const joined = createSseParser((event) => events.push(event), { maxLineLength: 1000 });
    expect(() => joined.push(encoder.encode(`data: ${'a'.repeat(600)}\ndata: ${'b'.repeat(600)}\n\n`))).toThrow(/SSE event data exceeds the limit of 1000/);
    expect(events).toEqual([]);
  });

  const files = readdirSync(fixtures).filter((name) => name.endsWith('.sse'));
  it.each(files)('parses the recorded stream %s at every split into JSON chunks', (name) => {
    const bytes = new Uint8Array(readFileSync(new URL(name, fixtures)));
    const whole = parseChunks([bytes]);
    expect(whole.length).toBeGreaterThan(0);
    for (const event of whole) expect(() => JSON.parse(event.data)).not.toThrow();
    for (const offset of interestingSplits(bytes)) {
      expect(parseChunks(splitAt(bytes, offset)), `${name} split at ${offset}`).toEqual(whole);
    }
    const dataLines = new TextDecoder()
      .decode(bytes)
      .split(/\r\n|\r|\n/)
      .filter((line) => line.startsWith('data:'));
    expect(whole.length).toBeLessThanOrEqual(dataLines.length);
  });

  it('drops one byte order mark at the start of the stream, even split across chunks, and keeps one inside a value', () => {
    const events = everyOffsetAgrees(encoder.encode('\uFEFFdata: a\n\ndata: \uFEFFb\n\n'));
    expect(events).toEqual([{ data: 'a' }, { data: '\uFEFFb' }]);
  });

  it('ignores an id that holds a NUL, keeping the last good one', async () => {
    const text = 'id: 1\ndata: a\n\nid: 2\u0000x\ndata: b\n\n';
    expect(everyOffsetAgrees(encoder.encode(text))).toEqual([
      { data: 'a', id: '1' },
      { data: 'b', id: '1' },
    ]);
    const own: SseEvent[] = [];
    for await (const event of parseSseStream(bytesOf(text), { carryId: false })) own.push(event);
    expect(own).toEqual([{ data: 'a', id: '1' }, { data: 'b' }]);
  });

  it('yields half a million tiny events that arrive in one chunk, in order, in linear time', async () => {
    // Taken one at a time off the front of an array this took about a minute.
    const count = 500_000;
    let seen = 0;
    let inOrder = true;
    for await (const event of parseSseStream(bytesOf('data: x\n\nid: 1\ndata: y\n\n'.repeat(count / 2)))) {
      if (event.data !== (seen % 2 === 0 ? 'x' : 'y')) inOrder = false;
      seen += 1;
    }
    expect(seen).toBe(count);
    expect(inOrder).toBe(true);
  });

  it('with carryId false, sets id only on events whose block has an id line, so a repeated id stays visible', async () => {
    const text = 'id: 1\ndata: a\n\nid: 1\ndata: b\n\ndata: c\n\n';
    const stream = { async *[Symbol.asyncIterator]() { yield encoder.encode(text); } };
    const carried: SseEvent[] = [];
    for await (const event of parseSseStream(stream)) carried.push(event);
    expect(carried.map((event) => event.id)).toEqual(['1', '1', '1']);
    const own: SseEvent[] = [];
    for await (const event of parseSseStream(stream, { carryId: false })) own.push(event);
    expect(own).toEqual([{ data: 'a', id: '1' }, { data: 'b', id: '1' }, { data: 'c' }]);
  });

  it('with discardIncompleteEvent, drops an event the stream ends in the middle of, and keeps it by default', async () => {
    const bytes = (text: string) => ({ async *[Symbol.asyncIterator]() { yield encoder.encode(text); } });
    const stream = bytes('data: whole\n\nevent: event\nid: 5\ndata: {"thought":{"te');
    const kept: string[] = [];
    for await (const event of parseSseStream(stream)) kept.push(event.data);
    expect(kept).toEqual(['whole', '{"thought":{"te']);
    const dropped: string[] = [];
    for await (const event of parseSseStream(bytes('data: whole\n\ndata: cut\n'), { discardIncompleteEvent: true })) dropped.push(event.data);
    expect(dropped).toEqual(['whole']);
  });
});

/**
 * Every offset of a small stream; for a large one, every offset near a line break or a non-ASCII
 * byte (where a split can go wrong) plus a regular sample of the rest, so the test stays fast.
 */
function interestingSplits(bytes: Uint8Array): number[] {
  if (bytes.length <= 4096) return Array.from({ length: bytes.length + 1 }, (_, offset) => offset);
  const offsets = new Set<number>();
  for (let index = 0; index < bytes.length; index += 1) {
    const byte = bytes[index] as number;
    if (byte === 0x0a || byte === 0x0d || byte >= 0x80) {
      for (let near = Math.max(0, index - 3); near <= Math.min(bytes.length, index + 4); near += 1) offsets.add(near);
    } else if (index % 61 === 0) {
      offsets.add(index);
    }
  }
  offsets.add(bytes.length);
  return [...offsets].sort((a, b) => a - b);
}
