import { describe, expect, it } from 'vitest';
import type { BackendClient } from '../ports/index.js';
import { toWireEventJson } from '../protocol/wire.js';
import { run } from '../run/start.js';
import { createMemoryInteractionStore } from '../testing/index.js';
import { encodeSseEvent } from './sse-encoder.js';
import { createSseEventStream } from './sse-event-stream.js';

const decoder = new TextDecoder();

async function readAll(stream: ReadableStream<Uint8Array>): Promise<string> {
  let text = '';
  for await (const bytes of stream as unknown as AsyncIterable<Uint8Array>) text += decoder.decode(bytes, { stream: true });
  return text;
}

async function* numbers(count: number, onRead?: (index: number) => void): AsyncGenerator<{ n: number }> {
  for (let index = 0; index < count; index += 1) {
    onRead?.(index);
    yield { n: index };
  }
}

describe('createSseEventStream', () => {
  it('streams every item as one SSE event, in order, and ends with the items', async () => {
    const text = await readAll(createSseEventStream(numbers(500), { encode: (item) => encodeSseEvent(item) }));
    expect(text).toBe(Array.from({ length: 500 }, (_, n) => `data: {"n":${n}}\n\n`).join(''));
  });

  it('sends events that arrive together as one chunk, and an event followed by a silence at once', async () => {
    let release!: () => void;
    const later = new Promise<void>((resolve) => (release = resolve));
    async function* burstThenWait(): AsyncGenerator<{ n: number }> {
      for (let index = 0; index < 50; index += 1) yield { n: index };
      await later;
      yield { n: 50 };
    }
    const reader = createSseEventStream(burstThenWait(), { encode: (item) => encodeSseEvent(item) }).getReader();
    const first = await reader.read();
    // The whole burst in one read, before the last item exists.
    expect(decoder.decode(first.value)).toBe(Array.from({ length: 50 }, (_, n) => `data: {"n":${n}}\n\n`).join(''));
    release();
    expect(decoder.decode((await reader.read()).value)).toBe('data: {"n":50}\n\n');
    expect((await reader.read()).done).toBe(true);
  });

  it('reads ahead of a consumer that does not read only up to its high-water mark', async () => {
    let read = 0;
    const stream = createSseEventStream(numbers(100_000, (index) => (read = index + 1)), { encode: (item) => encodeSseEvent(item), highWaterMark: 1024 });
    const reader = stream.getReader();
    await reader.read();
    await new Promise((resolve) => setTimeout(resolve, 50));
    // About 1 KiB of ~15-byte events, not the whole sequence.
    expect(read).toBeGreaterThan(10);
    expect(read).toBeLessThan(200);
    await reader.cancel();
  });

  it('sends a keep-alive comment after a silence, and none while events flow', async () => {
    async function* slow(): AsyncGenerator<string> {
      for (let index = 0; index < 8; index += 1) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        yield `e${index}`;
      }
      await new Promise((resolve) => setTimeout(resolve, 400));
      yield 'last';
    }
    const text = await readAll(createSseEventStream(slow(), { encode: (item) => encodeSseEvent(item), keepAliveMs: 250 }));
    const lines = text.split('\n\n').filter((line) => line.length > 0);
    const firstComment = lines.findIndex((line) => line.startsWith(':'));
    expect(lines.slice(0, 8)).toEqual(Array.from({ length: 8 }, (_, index) => `data: e${index}`));
    expect(firstComment).toBe(8);
    expect(lines.at(-1)).toBe('data: last');
  });

  it('stops the items when the consumer cancels, after telling onCancel why', async () => {
    let finished = false;
    const seen: unknown[] = [];
    async function* endless(): AsyncGenerator<number> {
      try {
        for (let index = 0; ; index += 1) {
          await new Promise((resolve) => setTimeout(resolve, 1));
          yield index;
        }
      } finally {
        finished = true;
      }
    }
    const stream = createSseEventStream(endless(), { encode: (item) => encodeSseEvent(String(item)), onCancel: (reason) => seen.push(reason) });
    const reader = stream.getReader();
    await reader.read();
    await reader.cancel('client gone');
    expect(seen).toEqual(['client gone']);
    expect(finished).toBe(true);
  });

  it('errors the stream when the items fail', async () => {
    async function* failing(): AsyncGenerator<number> {
      yield 1;
      throw new Error('run broke');
    }
    await expect(readAll(createSseEventStream(failing(), { encode: (item) => encodeSseEvent(String(item)) }))).rejects.toThrow('run broke');
  });
});

describe('createSseEventStream over a run', () => {
  /** A chat run whose model thinks `thoughts` times in one answer; `pace` waits that many ms between thoughts. */
  function thinkingRun(thoughts: number, pace = 0, seen: { signal?: AbortSignal } = {}) {
    const backend = {
      async *streamGenerateContent(_model: string, _body: unknown, signal?: AbortSignal) {
        seen.signal = signal;
        for (let index = 0; index < thoughts; index += 1) {
          if (pace > 0) await new Promise((resolve) => setTimeout(resolve, pace));
          yield { candidates: [{ content: { role: 'model', parts: [{ text: `Thought ${index} of the plan.`, thought: true }] }, index: 0 }] };
        }
        yield { candidates: [{ content: { role: 'model', parts: [{ text: 'Done.' }] }, finishReason: 'STOP', index: 0 }] };
      },
    } as unknown as BackendClient;
    const options = { mode: 'chat', maxTurns: 2, defaultFunctionGroups: false, now: () => new Date(0) } as const;
    return run({ segments: [{ type: 'text', text: 'Think it through.' }] }, { backend, store: createMemoryInteractionStore() }, options);
  }
  const encode = (event: Parameters<typeof toWireEventJson>[0]): string => encodeSseEvent(toWireEventJson(event));

  it('sends every event of the run once, in order, a long burst in slices of about 16 KiB', async () => {
    const expected: string[] = [];
    for await (const event of thinkingRun(3000)) expected.push(encode(event));
    const chunks: string[] = [];
    for await (const bytes of createSseEventStream(thinkingRun(3000), { encode }) as unknown as AsyncIterable<Uint8Array>) {
      chunks.push(decoder.decode(bytes));
    }
    expect(chunks.join('')).toBe(expected.join(''));
    expect(expected.filter((frame) => frame.startsWith('data: {"thought"')).length).toBe(3000);
    // About 120 KiB of thoughts: several chunks, none much past the slice.
    expect(chunks.length).toBeGreaterThanOrEqual(7);
    for (const chunk of chunks) expect(chunk.length).toBeLessThan(16 * 1024 + 100);
  });

  it('sends a thought that follows a silence at once, on its own', async () => {
    const reader = createSseEventStream(thinkingRun(3, 120), { encode }).getReader();
    const first = decoder.decode((await reader.read()).value);
    expect(first).toContain('data: {"start":');
    expect(first).toContain('data: {"sendRequest":');
    expect(decoder.decode((await reader.read()).value)).toBe('data: {"thought":{"text":"Thought 0 of the plan."}}\n\n');
    expect(decoder.decode((await reader.read()).value)).toBe('data: {"thought":{"text":"Thought 1 of the plan."}}\n\n');
    await reader.cancel();
  });

  it('stops the run when the consumer cancels in the middle of its answer', async () => {
    const seen: { signal?: AbortSignal } = {};
    const reader = createSseEventStream(thinkingRun(1000, 2, seen), { encode }).getReader();
    await reader.read();
    await reader.read();
    await reader.cancel('client gone');
    expect(seen.signal?.aborted).toBe(true);
  });
});
