/** Read items a queue drops from its front once they are at least half of it. */
const COMPACT_AFTER = 1024;

/** A fresh `{ done: true }` iterator result. */
export const done = (): IteratorReturnResult<undefined> => ({ done: true, value: undefined });

/**
 * The method under which an async iterator offers the items it already holds, without a wait
 * each: it returns the next queued item, or `undefined` when none is queued yet (the next one
 * then comes from `next()`, as does the end or an error). Run generators offer it, so that a
 * reader that gathers bursts (the SSE stream, a session's journal) takes a whole burst at once.
 */
export const READ_QUEUED: unique symbol = Symbol('readQueued');

/** An async iterator that offers its queued items; see {@link READ_QUEUED}. */
export interface QueuedItems<T> {
  [READ_QUEUED](): T | undefined;
}

/** The queued-item reader of `iterator`, when it offers one. */
export function queuedReader<T>(iterator: AsyncIterator<T>): (() => T | undefined) | undefined {
  const read = (iterator as Partial<QueuedItems<T>>)[READ_QUEUED];
  return typeof read === 'function' ? read.bind(iterator) : undefined;
}

/** Resolves on the next turn of the event loop, once what is running now (a burst of events) has run. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * A single-consumer async queue. The loop and the function handlers push events from any task;
 * the run's reader pulls them in order. An item the reader is already waiting for goes straight
 * to its pending `next()`, with no generator steps between. Pushing after `close` is ignored, so a
 * handler that outlives a cancelled run cannot corrupt a finished stream.
 */
export class EventChannel<T> {
  /** Pushed and not yet read, from `#readAt` on. */
  #queue: T[] = [];
  #readAt = 0;
  /** The reader's `next()` calls waiting for an item; only while the queue is empty. */
  #waiting: Array<{ resolve: (result: IteratorResult<T, undefined>) => void; reject: (error: unknown) => void }> = [];
  #closed = false;
  #failure: { error: unknown } | undefined;

  /** Queues `item` for the reader, or hands it to the `next()` that waits for it. */
  push(item: T): void {
    if (this.#closed) return;
    const waiting = this.#waiting.shift();
    if (waiting) waiting.resolve({ done: false, value: item });
    else this.#queue.push(item);
  }

  /** Ends the stream after what is already queued; `error` is thrown to the reader after it. */
  close(error?: unknown): void {
    if (this.#closed) return;
    this.#closed = true;
    if (error !== undefined) this.#failure = { error };
    // Waiting readers have read everything: the end (or the error) is theirs now.
    for (const waiting of this.#waiting.splice(0)) {
      const failure = this.#failure;
      this.#failure = undefined;
      if (failure) waiting.reject(failure.error);
      else waiting.resolve(done());
    }
  }

  /** Ends the stream now, for a reader that left: what is queued is dropped, every `next()` is done. */
  discard(): void {
    this.#closed = true;
    this.#failure = undefined;
    this.#queue = [];
    this.#readAt = 0;
    for (const waiting of this.#waiting.splice(0)) waiting.resolve(done());
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The next item; done once the channel is closed and read to its end (after its error, if any). */
  next(): Promise<IteratorResult<T, undefined>> {
    if (this.#readAt < this.#queue.length) return Promise.resolve({ done: false, value: this.#take() });
    if (this.#closed) {
      const failure = this.#failure;
      this.#failure = undefined;
      return failure ? Promise.reject(failure.error) : Promise.resolve(done());
    }
    return new Promise((resolve, reject) => this.#waiting.push({ resolve, reject }));
  }

  /** The next queued item, or `undefined` when nothing is queued (the end and an error come from `next()`). */
  readQueued(): T | undefined {
    return this.#readAt < this.#queue.length ? this.#take() : undefined;
  }

  #take(): T {
    const item = this.#queue[this.#readAt] as T;
    this.#readAt += 1;
    if (this.#readAt === this.#queue.length) {
      this.#queue = [];
      this.#readAt = 0;
    } else if (this.#readAt >= COMPACT_AFTER && this.#readAt * 2 >= this.#queue.length) {
      // A reader that never catches up must not keep what it has read alive.
      this.#queue = this.#queue.slice(this.#readAt);
      this.#readAt = 0;
    }
    return item;
  }

  /** An iterator over the channel; leaving it (`break`) ends that iterator, not the channel. */
  [Symbol.asyncIterator](): AsyncIterator<T, undefined> {
    let left = false;
    return {
      next: () => (left ? Promise.resolve(done()) : this.next()),
      return: () => {
        left = true;
        return Promise.resolve(done());
      },
    };
  }
}
