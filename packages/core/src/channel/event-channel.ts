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
   * What is queued, a burst at a time: each array holds everything queued since the last one (never
   * empty), so a reader pays one generator step and at most one wait per burst. Ends when the
   * channel closes, throwing the error it was closed with, if any.
   */
  async *bursts(): AsyncGenerator<T[]> {
    for (;;) {
      if (this.#buffer.length > 0) {
        const items = this.#buffer;
        this.#buffer = [];
        yield items;
        continue;
      }
      if (this.#closed) {
        if (this.#failure) throw this.#failure.error;
        return;
      }
      await new Promise<void>((resolve) => {
        this.#waiter = resolve;
      });
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for await (const items of this.bursts()) for (const item of items) yield item;
  }

  #wake(): void {
    const waiter = this.#waiter;
    if (waiter) {
      this.#waiter = undefined;
      waiter();
    }
  }
}
