/**
 * A single-consumer async queue. The loop and the function handlers push events from any task;
 * the run's generator pulls them in order. Pushing after `close` is ignored, so a handler that
 * outlives a cancelled run cannot corrupt a finished stream.
 */
export class EventChannel<T> {
  #buffer: T[] = [];
  #closed = false;
  #failure: { error: unknown } | undefined;
  #waiter: (() => void) | undefined;

  /** Queues `item` for the consumer. */
  push(item: T): void {
    if (this.#closed) return;
    this.#buffer.push(item);
    this.#wake();
  }

  /** Ends the stream after what is already queued; `error` is thrown to the consumer after it. */
  close(error?: unknown): void {
    if (this.#closed) return;
    this.#closed = true;
    if (error !== undefined) this.#failure = { error };
    this.#wake();
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Everything queued, in order, leaving the queue empty. An empty array from a closed channel is
   * its end: then the error it was closed with, if any, is thrown.
   */
  takeAll(): T[] {
    if (this.#buffer.length > 0) {
      const items = this.#buffer;
      this.#buffer = [];
      return items;
    }
    if (this.#closed && this.#failure) throw this.#failure.error;
    return [];
  }

  /** Resolves once something is queued or the channel closes (at once if either is so already). */
  ready(): Promise<void> {
    if (this.#buffer.length > 0 || this.#closed) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.#waiter = resolve;
    });
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for (;;) {
      const items = this.takeAll();
      // One wait per burst, not per item.
      for (const item of items) yield item;
      if (items.length > 0) continue;
      if (this.#closed) return;
      await this.ready();
    }
  }

  #wake(): void {
    const waiter = this.#waiter;
    if (waiter) {
      this.#waiter = undefined;
      waiter();
    }
  }
}
