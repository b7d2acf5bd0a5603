import { nextTurn, queuedReader } from '../channel/index.js';
import { encodeSseComment } from './sse-encoder.js';

/** Options of {@link createSseEventStream}. */
export interface SseEventStreamOptions<T> {
  /** One item as the text of its SSE frame, e.g. `(event) => encodeSseEvent(toWireEventJson(event))`. */
  encode(item: T): string;
  /** A keep-alive comment goes out after this much silence, so proxies keep the stream open. Default 15 000 ms; `0` sends none. */
  keepAliveMs?: number;
  /** The text of the keep-alive comment. Default `keep-alive`. */
  keepAliveText?: string;
  /**
   * How many bytes of encoded events may wait for the consumer before no more items are read.
   * Items are read ahead up to this much, so a consumer that reads everything queued (the Node
   * adapter does) writes many events at once. Default 65 536.
   */
  highWaterMark?: number;
  /** Runs once when the consumer cancels the stream (a client gone), before the items are returned. */
  onCancel?(reason: unknown): void;
}

const DEFAULT_KEEP_ALIVE_MS = 15_000;
const DEFAULT_HIGH_WATER_MARK = 64 * 1024;

/** Characters of encoded events gathered into one chunk at most. */
const BATCH_CHARS = 16 * 1024;

/**
 * A byte stream of server-sent events from an async sequence of items. Items that arrive together
 * go out as one chunk, flushed as soon as the burst ends; from the generator of `run()` or
 * `resume()` a burst is taken whole, without a wait per event. Items are read ahead of the
 * consumer, up to `highWaterMark` bytes, and then only as the consumer reads (backpressure); one
 * keep-alive timer serves the whole stream, re-armed lazily, so an event costs no timer and no
 * race. Cancelling the stream returns the items' iterator (which stops a run). An item that fails
 * to encode, or an iterator that throws, errors the stream.
 *
 * @example
 * ```ts
 * const body = createSseEventStream(run(request, ports), { encode: (event) => encodeSseEvent(toWireEventJson(event)) });
 * return new Response(body, { headers: { 'content-type': 'text/event-stream' } });
 * ```
 */
export function createSseEventStream<T>(items: AsyncIterable<T>, options: SseEventStreamOptions<T>): ReadableStream<Uint8Array> {
  const iterator = items[Symbol.asyncIterator]();
  const encoder = new TextEncoder();
  const encode = options.encode;
  const keepAliveMs = options.keepAliveMs ?? DEFAULT_KEEP_ALIVE_MS;
  const keepAlive = encoder.encode(encodeSseComment(options.keepAliveText ?? 'keep-alive'));
  let lastWrite = Date.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let finished = false;
  let pending = '';
  let flushSoon: ReturnType<typeof setTimeout> | undefined;
  const flush = (controller: ReadableStreamDefaultController<Uint8Array>): void => {
    if (flushSoon !== undefined) clearTimeout(flushSoon);
    flushSoon = undefined;
    if (pending.length === 0) return;
    const text = pending;
    pending = '';
    controller.enqueue(encoder.encode(text));
    lastWrite = Date.now();
  };
  const stopTimer = (): void => {
    finished = true;
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    if (flushSoon !== undefined) clearTimeout(flushSoon);
    flushSoon = undefined;
  };
  const readQueued = queuedReader(iterator);
  /**
   * One burst from an iterator that offers its queued items (a run): what is queued already, or
   * else the next item and whatever follows it within a turn of the event loop, taken without a
   * wait per item, up to BATCH_CHARS and the consumer's room, as one chunk.
   */
  const pullBurst = async (controller: ReadableStreamDefaultController<Uint8Array>, read: () => T | undefined): Promise<void> => {
    let item = read();
    if (item === undefined) {
      const result = await iterator.next();
      if (finished) return;
      if (result.done) {
        stopTimer();
        controller.close();
        return;
      }
      item = result.value;
      await nextTurn();
      if (finished) return;
    }
    const room = Math.min(BATCH_CHARS, controller.desiredSize ?? Number.POSITIVE_INFINITY);
    pending = encode(item);
    while (pending.length < room && (item = read()) !== undefined) pending += encode(item);
    flush(controller);
  };
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        if (!(keepAliveMs > 0) || !Number.isFinite(keepAliveMs)) return;
        // One timer for the stream: when it fires it sends a comment only if nothing was written
        // for a whole period, else it waits out the rest of the period since the last write.
        const tick = (): void => {
          timer = undefined;
          if (finished) return;
          const quiet = Date.now() - lastWrite;
          if (quiet >= keepAliveMs) {
            controller.enqueue(keepAlive);
            lastWrite = Date.now();
            timer = setTimeout(tick, keepAliveMs);
          } else {
            timer = setTimeout(tick, keepAliveMs - quiet);
          }
        };
        timer = setTimeout(tick, keepAliveMs);
      },
      async pull(controller) {
        // Items that arrive together (within one turn of the event loop) go out as one chunk: one
        // encoding and one read for the consumer instead of one per event. A burst is cut at
        // BATCH_CHARS, and a quiet moment flushes what waits, so no event is held back.
        try {
          if (readQueued) {
            await pullBurst(controller, readQueued);
            return;
          }
          for (;;) {
            const result = await iterator.next();
            if (finished) return;
            if (result.done) {
              flush(controller);
              stopTimer();
              controller.close();
              return;
            }
            pending += encode(result.value);
            // What waits here counts against the consumer's high-water mark too (characters for bytes).
            if (pending.length >= BATCH_CHARS || pending.length >= (controller.desiredSize ?? Number.POSITIVE_INFINITY)) {
              flush(controller);
              return;
            }
            flushSoon ??= setTimeout(() => flush(controller), 0);
          }
        } catch (error) {
          stopTimer();
          throw error;
        }
      },
      async cancel(reason) {
        stopTimer();
        options.onCancel?.(reason);
        await iterator.return?.(undefined);
      },
    },
    new ByteLengthQueuingStrategy({ highWaterMark: options.highWaterMark ?? DEFAULT_HIGH_WATER_MARK }),
  );
}
